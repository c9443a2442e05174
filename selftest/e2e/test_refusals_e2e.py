"""A feature that breaks cannot read as "not served" (issue 26), end to end against the reference engine.

The reference engine runs under a model name no profile matches (``qwen3-8b``: the
generic model profile, every capability discovered) with a fault that answers 4xx:

- ``tool-parser-400``: every tool-bearing request answered 400 "Error in extracting
  tool call from response: JSONDecodeError..." (a crashing parser);
- ``media-decode-400``: every request with an image answered 400 "Failed to load
  image: cannot identify image file" for valid media (a broken decoder);
- ``firewall-403``: POST /v1/responses answered 403 "Forbidden" (a proxy).

None of these is a refusal the engine profile lists, so each capability is broken:
its checks run, fail leading with the engine's words, and the gate fails naming the
capability. ``--not-served tools`` states the intent: the tools checks are skipped as
"not served (stated)" and the gate passes.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import failed, run_suite

pytestmark = pytest.mark.e2e

UNPROFILED = "--reference-model=qwen3-8b"


def _gate(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))


def _row(gate: dict, name: str) -> dict:
    return next(row for row in gate["capabilities"] if row["name"] == name)


@pytest.mark.parametrize(("defect", "selection", "capability", "words"), [
    ("tool-parser-400", ("-m", "tools", "-k", "json_that_fits or both_cities"), "tools",
     "HTTP 400: Error in extracting tool call from response: JSONDecodeError"),
    ("media-decode-400", ("-m", "image", "-k", "pure_color and red"), "image",
     "HTTP 400: Failed to load image: cannot identify image file"),
    ("firewall-403", ("-m", "responses", "-k", "text_answer"), "responses",
     "POST /v1/responses: HTTP 403: Forbidden"),
], ids=["tool-parser-400", "media-decode-400", "firewall-403"])
def test_a_4xx_that_is_no_known_refusal_is_broken_and_fails_the_gate_in_the_engines_words(
        pytester: pytest.Pytester, defect: str, selection: tuple[str, ...], capability: str, words: str) -> None:
    result, outcomes = run_suite(pytester, UNPROFILED, "--inject", defect, *selection)
    out = result.stdout.str()
    assert result.ret == 1, out[-3000:]
    assert outcomes and set(outcomes.values()) == {"failed"}, outcomes
    gate = _gate(pytester)
    assert gate["gate"] == "fail"
    row = _row(gate, capability)
    assert row["discovered"] == "broken" and row["ran"] > 0 and row["failed"] == row["ran"], row
    assert words in row["evidence"], row
    assert f"not a refusal engine profile 'vllm' recognizes for {capability}" in row["evidence"], row
    assert f"--not-served {capability}" in row["evidence"], row
    # Every failing check leads with the capability and the engine's words.
    for check in gate["failing_checks"]:
        assert check["reason"].startswith(f"{capability} found broken by capability discovery ("), check
        assert words in check["reason"], check
    result.stdout.fnmatch_lines([f"E   {capability} found broken by capability discovery (*{words}*",
                                 f"{capability} *broken *failed", "GATE: FAIL*"])


def test_stating_tools_not_served_skips_the_crashing_parser_and_says_where_it_was_stated(
        pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, UNPROFILED, "--inject", "tool-parser-400", "--not-served", "tools",
                                 "-m", "tools or text", "-k", "json_that_fits or arithmetic")
    out = result.stdout.str()
    assert result.ret == 0, out[-3000:]
    tools = {test: outcome for test, outcome in outcomes.items() if test.startswith("test_tools.py")}
    assert tools and set(tools.values()) == {"skipped"}, outcomes
    assert not failed(outcomes), outcomes
    row = _row(_gate(pytester), "tools")
    assert row["discovered"] == "not_served (stated)", row
    assert row["result"].startswith("not tested: not served (stated with --not-served); probe found it broken: "
                                    "HTTP 400: Error in extracting tool call"), row
    result.stdout.fnmatch_lines(["tools *not served (stated)*not tested: not served (stated with --not-served)*",
                                 "GATE: PASS*"])


def test_not_served_and_expect_of_the_same_capability_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, "--not-served", "tools,image", "--expect", "image", "-m", "tools")
    assert result.ret == 4, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines(["*--not-served and --expect both name image*"])


def test_not_served_names_only_known_capabilities(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, "--not-served", "tool", "-m", "tools")
    assert result.ret == 4, result.stdout.str()[-2000:]
    result.stderr.fnmatch_lines(["*--not-served: unknown capability 'tool'; known: *"])
