"""A team's own profiles and records, as the self-tests of profiles dirs write them."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ACME_ENGINE", "ACME_MODEL", "ACME_RECORDS", "write_team_dir"]

ACME_MODEL = """\
name: acme-7b
description: ACME's own 7B chat model, served by the team's deployment
match: ["(?i)^acme-7b"]
capabilities: [text, streaming, tools]
context_length: 32768
reasoning: {markers: []}
"""

ACME_ENGINE = """\
name: acme-serve
description: ACME's in-house OpenAI-compatible server
detect:
  owned_by: [acme]
  version_endpoints: [/version]
reasoning_field: null
reasoning_effort_in: top_level
features:
  ignore_eos: false
  tokenize_endpoint: null
  video_content_type: null
  metrics_endpoint: null
"""

ACME_RECORDS = """\
records:
  - check: "test_text.py::test_arithmetic_answer_is_correct[*]"
    engine: acme-serve
    model: "(?i)^acme-7b"
    reason: ACME 7B answers 19x37 with 693 at temperature 0
    source: ACME CI, nightly acceptance run
    date: "2026-12-02"
    failure:
      message: "expected 703 in the answer, got "
"""


def write_team_dir(root: Path) -> Path:
    """A profiles dir as it would sit in a team's repository: a model, an engine and a record file."""
    for folder, name, text in (("models", "acme-7b.yaml", ACME_MODEL), ("engines", "acme-serve.yaml", ACME_ENGINE),
                               ("expectations", "acme.yaml", ACME_RECORDS)):
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_text(text, encoding="utf-8")
    return root
