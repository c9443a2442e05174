"""--profiles-dir end to end: a team's model profile, engine profile and record, used by a real run.

The suite runs against the built-in reference engine serving a model under the team's
name; the team's model profile is chosen for it, the team's record (named
``test_text.py::...``, no folder) keeps the gate green under xdist, and the report header
says which folder contributed what. A folder that is not a profiles dir stops the run
with a usage error naming it.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import run_suite
from team_profiles import write_team_dir

pytestmark = pytest.mark.e2e

USAGE_RECORD = """\
records:
  - check: "test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion[*]"
    engine: "*"
    model: "(?i)^acme-7b"
    reason: ACME's server adds one to total_tokens (injected for the self-test)
    source: ACME CI
    date: "2026-12-02"
    failure:
      message: 'usage\\.total_tokens=\\d+ but prompt_tokens \\+ completion_tokens'
"""


def test_a_team_profiles_dir_chooses_the_model_profile_and_its_record_covers_the_defect(
        pytester: pytest.Pytester) -> None:
    team = write_team_dir(pytester.path / "acceptance-data")
    (team / "expectations" / "acme.yaml").write_text(USAGE_RECORD, encoding="utf-8")
    gate_json = pytester.path / "gate.json"
    result, _ = run_suite(pytester, "-m", "text", "-k", "usage", "-n", "2", "--reference-model", "acme-7b-instruct",
                          "--inject", "bad-usage", f"--profiles-dir={team}", f"--gate-json={gate_json}")
    assert result.ret == 0, result.stdout.str()[-3000:]
    verdict = json.loads(gate_json.read_text(encoding="utf-8"))
    assert verdict["gate"] == "pass" and len(verdict["known_defects"]) == 2
    assert all("[record acme.yaml#0]" in known["record"] for known in verdict["known_defects"])
    result.stdout.fnmatch_lines([
        "engine-acceptance: * serving 'acme-7b-instruct' (engine profile 'vllm', model profile 'acme-7b')",
        f"engine-acceptance: profiles dir {team.resolve()}: 1 model profile (acme-7b), 1 engine profile (acme-serve), "
        "1 record file (acme.yaml)",
        "engine-acceptance: shipped profiles (*): * model profiles, * engine profiles, * record files",
    ])


def test_a_folder_that_is_not_a_profiles_dir_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    empty = pytester.mkdir("not-profiles")
    result, _ = run_suite(pytester, "-m", "text", f"--profiles-dir={empty}")
    assert result.ret == 4, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines([f"*--profiles-dir: profiles dir {empty} holds none of models/, engines/, "
                                 "expectations/; it should hold at least one of*"])
