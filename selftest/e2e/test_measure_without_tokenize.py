"""End to end: throughput and recall on a server without /tokenize and without --tokenizer.

Any OpenAI-compatible server that is not vLLM or SGLang has no tokenize endpoint. The
measurements must still run there: the fixed-length load sends text prompts of a
calibrated, estimated length and reports the lengths the engine counted as approximate;
recall builds its prompts to a calibrated character budget, checks the answers, and
skips only the token accounting, with the reason. The reference engine stands in for
such a server (``--reference-serves=no-tokenize``: /tokenize answers 404), once as
itself (engine profile vllm: ignore_eos) and once as a generic server (``--engine
generic``: no ignore_eos).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from allure_results import read_results
from suite_runner import run_suite

from engine_acceptance.wire.types import ClientTimeouts, EngineTarget
from engine_acceptance.recall.haystack import Needle, build_haystack_estimated, make_code
from engine_acceptance.load.generator import Cell, CellResult, PromptIds
from engine_acceptance.load.metrics import RequestRecord
from engine_acceptance.recall.answers import codes_in
from engine_acceptance.reference_engine.launcher import RunningReferenceEngine, start_reference_engine
from engine_acceptance.load.closed_loop.validity import Recount, input_tokens_line, length_problems
from engine_acceptance.load.prompts import TextPrompts, word_estimate
from engine_acceptance.load.report import prompt_tokens_cell
from engine_acceptance.wire.token_count import TokenEstimate, calibrate


CHECK = "test_throughput.py::test_fixed_length_load_is_served_in_full_and_passes_the_gate"
# The tokenize probe's finding, in the engine's words: absent (404), not broken.
UNCOUNTED = "no tokenize endpoint (POST /tokenize: HTTP 404: Not Found) and no --tokenizer"
NO_COUNT = f"{UNCOUNTED}: the engine's count cannot be checked"
FIELD = "test_recall.py::test_field_extraction_returns_the_asked_key_exactly"
FIELD_KEYS = {f"{FIELD}[depth{depth}-key{key}]" for depth in (10, 50, 90) for key in (1, 2, 3)}
CONTROL = "test_recall.py::test_field_extraction_control_without_the_key_answers_not_found"
FIELD_ACCOUNTING = "test_recall.py::test_field_extraction_prompt_tokens_match_the_engines_count"


e2e = pytest.mark.e2e


def _properties(junit: Path) -> dict[str, dict[str, str]]:
    """Each test's recorded junit properties, by test name."""
    return {case.get("name", ""): {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
            for case in ET.parse(junit).getroot().iter("testcase")}


@pytest.fixture(scope="module")
def generic_server() -> Iterator[RunningReferenceEngine]:
    """A server with no /tokenize, to be tested as a generic OpenAI-compatible one."""
    with start_reference_engine(tokenize=False) as engine:
        yield engine


@e2e
@pytest.mark.parametrize("as_generic", [False, True], ids=["vllm-profile-ignore-eos", "generic-server"])
def test_throughput_without_tokenize_runs_the_fixed_length_load_and_says_the_lengths_are_approximate(
        pytester: pytest.Pytester, request: pytest.FixtureRequest, as_generic: bool) -> None:
    out = pytester.path / "throughput.json"
    target = (("--engine-url", request.getfixturevalue("generic_server").url, "--engine", "generic") if as_generic
              else ("--reference-serves=no-tokenize",))
    result, outcomes = run_suite(pytester, "-m", "throughput", "-k", "not media", *target,
                                 "--throughput-shapes", "128/32@1x2,128/32@4x4", "--throughput-rounds", "2",
                                 "--throughput-out", str(out))
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert outcomes == {f"{CHECK}[in128-out32]": "passed"}
    result.stdout.fnmatch_lines(["tokenize *not served *not served (POST /tokenize: HTTP 404*"])
    result.stdout.fnmatch_lines([
        "*128/32@1: 2 round(s) of 2 requests, 1 warm-up; prompts from text cut to an estimated length "
        f"({UNCOUNTED})*",
        "*128/32@4: input tokens approximate: asked 128, engine counted * (usage.prompt_tokens*; text prompts of "
        "about * characters (* characters per token, calibrated with the engine's usage.prompt_tokens*), because "
        f"{UNCOUNTED}. Exact input accounting was not possible*",
    ])
    document = json.loads(out.read_text())
    for cell in document["cells"]:
        assert cell["input_tokens_exact"] is False
        counted = document["prompts"][cell["key"]]["input_tokens"]
        assert counted["exact"] is False and counted["estimate"]["calibrated"] is True
        assert counted["recount"]["again"] == counted["recount"]["in_load"] is not None
        # Calibrated with the engine's usage, the lengths land close to what was asked.
        low, high = counted["engine_counted"]["min"], counted["engine_counted"]["max"]
        assert 128 * 0.9 <= low <= high <= 128 * 1.1, counted
        prompt_tokens = {request["prompt_tokens"] for per_round in cell["requests"] for request in per_round}
        assert None not in prompt_tokens
        if not as_generic:  # ignore_eos on the vllm profile: the output length is still checked exactly
            assert {request["output_tokens"] for per_round in cell["requests"] for request in per_round} == {32}
    if as_generic:
        result.stdout.fnmatch_lines(["*128/32@4: output length not forced: engine profile 'generic' does not "
                                     "declare ignore_eos*"])
    name = "test_fixed_length_load_is_served_in_full_and_passes_the_gate[in128-out32]"
    properties = _properties(pytester.path / "junit.xml")[name]
    assert properties["input_tokens[128/32@4]"].startswith("approximate: asked 128, engine counted ")
    assert properties["input_tokens[128/32@4]"].endswith(" (usage)")
    allure = read_results(pytester.path / "allure-results")[name]
    table = allure.attachment_texts("tokens: table")[0]
    assert "input tokens approximate: asked 128, engine counted" in table and "~1" in table


@e2e
def test_recall_without_tokenize_checks_the_answers_and_skips_only_the_accounting(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "recall", "--recall-tokens=4096", "--reference-serves=no-tokenize",
                                 "-rs")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert outcomes == {**{key: "passed" for key in FIELD_KEYS | {CONTROL}}, FIELD_ACCOUNTING: "skipped"}, \
        result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines([
        f"*recall prompt length: 4,096 tokens (4096 tokens from --recall-tokens); approximate: {UNCOUNTED}, so "
        "prompts are built to a calibrated character budget*",
        f"*recall field: {UNCOUNTED}: lengths are estimated from characters, * characters per "
        "token*, calibrated with the engine's usage.prompt_tokens*",
        "*recall field jade-30-2: prompt tokens approximate: asked 4,096, engine counted * (usage.prompt_tokens, "
        "chat template included)*",
        f"*SKIPPED*{NO_COUNT}*",
    ])
    name = CONTROL.split("::")[1]
    properties = _properties(pytester.path / "junit.xml")[name]
    assert properties["prompt_tokens_exact"] == "False"
    # Calibrated on a sample laid out like the prompt, the estimate is close (2% here).
    assert abs(int(properties["prompt_tokens_usage"]) - 4096) <= 4096 * 0.02, properties
    # The needles still sit at their depths (in characters; at 4K the nine needles are a quarter
    # of the document and paragraphs are coarse: test_estimated_haystack_* checks a long one).
    allure = read_results(pytester.path / "allure-results")[name]
    summary = json.loads(allure.attachment_texts("recall prompt")[0])
    assert summary["tokens_exact"] is False and len(summary["needles"]) == 9
    for needle in summary["needles"]:
        assert abs(needle["actual_depth"] - needle["depth"]) < 0.15, needle


def test_estimated_haystack_is_the_estimated_characters_with_needles_at_their_depths() -> None:
    estimate = TokenEstimate(tokens_per_char=2.9, added_tokens=-300, calibrated=True, how="given")
    needles = [Needle(code, depth, f"备忘：密钥是 {code}。") for depth in (0.1, 0.5, 0.9)
               for code in [make_code("jade", depth, 1, 7)]]
    haystack = build_haystack_estimated(estimate=estimate, target_tokens=50_000, before="资料：\n<document>\n",
                                        after="</document>\n问题。", needles=needles, seed=7)
    assert len(haystack.text) == estimate.chars_for(50_000 + 300)
    assert haystack.tokens == 50_000 and not haystack.exact and "estimate" in haystack.counted_with
    assert [codes_in(haystack.text)] == [[n.code for n in needles]]
    for placed in haystack.needles:
        assert abs(placed.actual_depth - placed.depth) < 0.02, placed


# --- the pieces, without an engine -------------------------------------------------------

def _cell_result(prompt_tokens: list[int | None]) -> CellResult:
    cell = Cell(128, 32, 1, len(prompt_tokens), 0)
    records = [RequestRecord(start_s=0.0, output_tokens=32, output_tokens_source="usage", prompt_tokens=count)
               for count in prompt_tokens]
    return CellResult(cell, summary=None, records=[records], warmup=None, input_exact=False)  # type: ignore[arg-type]


def test_approximate_input_lengths_are_reported_not_failed_but_missing_or_inconsistent_counts_fail() -> None:
    spread = _cell_result([117, 131, 125])
    assert length_problems(spread, output_forced=True, input_exact=False, recount=Recount(117, 117)) == []
    assert "input length not honored" in length_problems(spread, output_forced=True)[0]  # the exact path
    assert input_tokens_line(spread, exact=False, short=True) == \
        "approximate: asked 128, engine counted 117-131 (usage)"
    assert prompt_tokens_cell(spread) == "~117-131"
    missing = length_problems(_cell_result([120, None]), output_forced=False, input_exact=False)
    assert missing == ["128/32@1: 1/2 requests reported no usage.prompt_tokens: with text prompts of an estimated "
                       "length it is the only measure of their input length"]
    drift = length_problems(spread, output_forced=False, input_exact=False, recount=Recount(117, 118))
    assert drift == ["128/32@1: usage.prompt_tokens is not consistent: the same prompt counted 117 tokens in the "
                     "load and 118 when sent again"]


def test_text_prompts_are_distinct_and_cut_at_a_word_boundary_near_the_estimated_characters() -> None:
    estimate = TokenEstimate(tokens_per_char=0.2, added_tokens=1, calibrated=True, how="given")
    words = tuple(PromptIds.corpus_text(2000, 5).split())
    prompts = TextPrompts(words, estimate, "text", 3)
    texts = [prompts.prompt(128, index) for index in range(8)]
    assert len(set(texts)) == 8
    # Each request starts at an offset of its own, like the token-id prompts (no shared prefix).
    assert [text.split()[:3] for text in texts] == [list(words[3 + index:6 + index]) for index in range(8)]
    aim = prompts.chars_for(128)
    assert aim == round(127 / 0.2)
    assert all(abs(len(text) - aim) <= 12 and text == text.strip() for text in texts)


def test_calibration_without_an_answer_falls_back_and_says_why() -> None:
    target = EngineTarget("http://127.0.0.1:9", "m", timeouts=ClientTimeouts(connect=2, idle=2, total=2))
    estimate = calibrate(target, path="/completions", samples=["a b", "a b c d"], fallback=word_estimate(),
                         make_body=lambda text: {"prompt": text})
    assert not estimate.calibrated and estimate.tokens_per_char == word_estimate().tokens_per_char
    assert "uncalibrated: one token per common English word assumed: the calibration requests gave no count" \
        in estimate.describe()


@e2e
def test_an_engine_that_takes_no_token_id_prompts_gets_text_and_the_reason(pytester: pytest.Pytester) -> None:
    # llama.cpp's Python server answers a prompt of token ids with HTTP 500: its profile says so, and the
    # load sends the same corpus as text even though the engine (here the built-in one) has /tokenize.
    folder = pytester.path / "team" / "engines"
    folder.mkdir(parents=True)
    (folder / "text-prompts.yaml").write_text(
        "name: text-prompts\ndescription: an engine whose completions take text only\n"
        "detect: {owned_by: [], version_endpoints: []}\nreasoning_field: reasoning\n"
        "reasoning_effort_in: chat_template_kwargs\nfeatures:\n  ignore_eos: true\n  tokenize_endpoint: /tokenize\n"
        "  token_id_prompts: false\n", encoding="utf-8")
    result, outcomes = run_suite(pytester, "-m", "throughput", "-k", "not media", "--profiles-dir",
                                 str(pytester.path / "team"), "--engine", "text-prompts",
                                 "--throughput-shapes", "128/32@1x2", "--throughput-rounds", "1")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert outcomes == {f"{CHECK}[in128-out32]": "passed"}
    result.stdout.fnmatch_lines([
        "*128/32@1: 1 round(s) of 2 requests, 1 warm-up; prompts from text cut to an estimated length (engine "
        "profile 'text-prompts' says the engine takes no token-id prompt (features.token_id_prompts: false))*"])
