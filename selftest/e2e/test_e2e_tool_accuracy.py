"""End to end: tool-call accuracy at scale against the reference engine.

A clean engine passes the five checks when gated on a baseline it recorded itself
(a regression against itself, as the gate says, not accuracy);
a parser that cuts 3% of the calls (``tool-args-intermittent``) is caught at the
default set size; a deployment that calls a tool on every turn (``auto`` applied as
``required``) is caught by the trigger check against the clean baseline (these two in
one run of the whole set, each told by its own figures); a baseline recorded with other
settings, or one that does not exist, is refused with the reason. And a clean engine
passes in 20 runs out of 20, each with its own stream chunking and convention, so a
threshold that a clean deployment's ordinary variation could cross would show here.

The built-in engine runs without its latency model (``NO_LATENCY``), the baseline's
recording too: these checks judge what the replies say, never how long they took.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from shared_files import made_once_per_run
from suite_runner import NO_LATENCY, REPO, failed, run_suite

from engine_acceptance.reference_engine.launcher import start_reference_engine
from engine_acceptance.tool_accuracy.dataset import load_cases
from engine_acceptance.tool_accuracy.policy import ToolAccuracyPolicy
from engine_acceptance.tool_accuracy.runner import run_cases
from engine_acceptance.tool_accuracy.scoring import score
from engine_acceptance.wire.types import EngineTarget

pytestmark = pytest.mark.e2e

CHECKS = "test_tool_accuracy.py::test_"
ALL = {f"{CHECKS}{name}" for name in (
    "every_tool_accuracy_request_is_answered", "tool_call_arguments_fit_their_schemas_at_scale",
    "finish_reason_is_tool_calls_exactly_when_tools_are_called", "streamed_tool_calls_equal_non_streamed_at_scale",
    "tool_call_triggers_match_the_baseline")}
ANSWERED = f"{CHECKS}every_tool_accuracy_request_is_answered"
SCHEMA = f"{CHECKS}tool_call_arguments_fit_their_schemas_at_scale"
STREAMED = f"{CHECKS}streamed_tool_calls_equal_non_streamed_at_scale"
FINISH = f"{CHECKS}finish_reason_is_tool_calls_exactly_when_tools_are_called"
TRIGGER = f"{CHECKS}tool_call_triggers_match_the_baseline"
# 40 of the 319 cases, every shape among them (as CI samples 80): for a defect that shows in any
# sample, where the whole set (638 requests, ~20 s of CPU a run) proves nothing more. The clean run,
# the 3% cut and the trigger counts (one run) stay on the whole set.
SAMPLE = "--tool-accuracy-cases=40"


@pytest.fixture(scope="module")
def clean_baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A baseline recorded from a clean reference engine, by a plain run as a user records one (once per run)."""
    return made_once_per_run(tmp_path_factory, "reference.json", _record_clean_baseline)


def _record_clean_baseline(path: Path) -> None:
    where = path.parent
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO), str(REPO / "tests"),
         "-p", "no:cacheprovider", "-q", "-m", "tool_accuracy", f"--record-tool-baseline={path}",
         f"--gate-json={where / 'gate.json'}", *NO_LATENCY],
        cwd=where, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0 and path.is_file(), result.stdout[-3000:] + result.stderr[-2000:]


def test_clean_engine_passes_gated_on_its_own_baseline(pytester: pytest.Pytester, clean_baseline: Path) -> None:
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", f"--tool-baseline={clean_baseline}",
                                 "--convention=sglang", *NO_LATENCY)
    assert result.ret == 0 and set(outcomes) == ALL and not failed(outcomes), result.stdout.str()[-3000:]
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    trigger = gate["figures"][f"tests/{TRIGGER}"]["tool_trigger_vs_baseline"]
    assert trigger["f1"] == 1.0 and trigger["only_candidate_called"] == trigger["only_reference_called"] == 0
    schema = gate["figures"][f"tests/{SCHEMA}"]["tool_schema_valid"]
    assert schema["n"] >= 600 and schema["k"] == schema["n"], schema


def test_three_percent_of_calls_cut_and_calls_where_none_is_needed_are_each_caught_on_the_whole_set(
        pytester: pytest.Pytester, clean_baseline: Path) -> None:
    # Two defects in one run of the whole set (one run fewer), told apart by what each breaks:
    # tool-args-intermittent cuts the arguments of every 33rd call and moves no call (the schema check;
    # selftest/tool_accuracy/test_set.py counts it alone), auto-tool-choice-as-required adds calls where
    # none is needed, with arguments that fit (the trigger check). Their figures below are each one's alone:
    # 3% of the calls cut (the added calls fit, or the share would be over 10%), the 74 added calls and
    # nothing missed (a cut call is still a call).
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", f"--tool-baseline={clean_baseline}",
                                 "--inject=tool-args-intermittent", "--inject=auto-tool-choice-as-required",
                                 *NO_LATENCY)
    assert {SCHEMA, TRIGGER} <= failed(outcomes), outcomes
    output = result.stdout.str()
    assert "tool-call arguments that are JSON fitting the tool's schema:" in output
    assert "below the required 99.0%" in output and "arguments are not JSON" in output
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    schema = gate["figures"][f"tests/{SCHEMA}"]["tool_schema_valid"]
    # Every 33rd call is cut: the rate the defect promises, measured.
    assert 0.025 <= 1 - schema["rate"] <= 0.035, schema

    assert "tool-call trigger F1 against the baseline reference.json" in output
    trigger = gate["figures"][f"tests/{TRIGGER}"]["tool_trigger_vs_baseline"]
    # The 37 cases that need no call, called anyway, non-streamed and streamed; nothing missed.
    assert (trigger["only_candidate_called"], trigger["only_reference_called"]) == (74, 0), trigger
    # Recorded from this same engine, version and model: a regression against itself, said so, never accuracy.
    assert trigger["comparison"] == "regression against itself", trigger
    entry, = gate["baselines"]
    assert (entry["kind"], entry["path"], entry["comparison"]) == ("tool_accuracy", str(clean_baseline),
                                                                   "regression against itself"), entry
    assert (entry["provenance"]["engine"], entry["provenance"]["model"]) == ("vllm", "reference-model"), entry
    result.stdout.fnmatch_lines([f"*baseline (tool_accuracy): regression against itself, {clean_baseline}: vllm *"])
    assert "not that they are accurate" in output


def test_refused_requests_fail_the_answered_check_grouped_by_kind(pytester: pytest.Pytester) -> None:
    # After its first 20 chat requests the engine refuses every second one 503: about half of the 80
    # requests of a 40-case sample (SAMPLE: the whole set is not needed to see it).
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", "--inject=degrading-503", SAMPLE, *NO_LATENCY)
    assert ANSWERED in failed(outcomes), outcomes
    output = result.stdout.str()
    assert "tool-accuracy requests answered with 2xx:" in output and "below the required 100.0%" in output
    # One kind, counted, with its modes and cases: a rarer second kind could not hide behind it.
    assert re.search(r"Errors by kind \(1\): \d+ x HTTP 503: .* \[non-streamed and streamed: ", output), output[-3000:]


def test_calls_that_end_with_finish_reason_stop_are_caught(pytester: pytest.Pytester) -> None:
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", "--inject=tool-calls-finish-stop", SAMPLE,
                                 *NO_LATENCY)
    assert failed(outcomes) == {FINISH}, outcomes
    assert ("replies whose finish_reason is 'tool_calls' exactly when they call tools (0 cut by max_tokens, not "
            "judged):") in result.stdout.str()
    assert "call(s), finish_reason 'stop'" in result.stdout.str()


def test_a_sample_of_the_set_is_gated_case_by_case_on_the_whole_sets_baseline_and_says_so(
        pytester: pytest.Pytester, clean_baseline: Path) -> None:
    # CI's way (--tool-accuracy-cases): 40 cases, 3 or 4 of each shape, the no-call ones among them.
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", f"--tool-baseline={clean_baseline}",
                                 "--inject=auto-tool-choice-as-required", "--tool-accuracy-cases=40", *NO_LATENCY)
    assert TRIGGER in failed(outcomes), outcomes
    gate = json.loads((pytester.path / "gate.json").read_text(encoding="utf-8"))
    trigger = gate["figures"][f"tests/{TRIGGER}"]["tool_trigger_vs_baseline"]
    # Every reply of the sample compared with the baseline's own reply to that case: 80 of them.
    assert sum(trigger[key] for key in ("both_called", "only_candidate_called", "only_reference_called",
                                        "neither_called")) == 80, trigger
    assert trigger["only_candidate_called"] > 0 and trigger["only_reference_called"] == 0, trigger
    shortfall, = gate["shortfalls"]
    assert (shortfall["check"], shortfall["declared"], shortfall["ran"]) == ("tool_accuracy", 319, 40), shortfall
    output = result.stdout.str()
    assert "SHORTFALL (tools): tool accuracy at 40 of 319 cases [--tool-accuracy-cases=40:" in output
    assert "40 cases of the set's 319 (--tool-accuracy-cases)" in output
    # A baseline is of the whole set, so that any sample compares with it.
    result, _ = run_suite(pytester, "-m", "tool_accuracy", "--tool-accuracy-cases=40",
                          f"--record-tool-baseline={pytester.path / 'sampled.json'}")
    assert result.ret == 4 and "a baseline is recorded from the whole set" in result.stderr.str() + result.stdout.str()


def test_a_baseline_of_other_settings_or_none_at_all_is_refused(pytester: pytest.Pytester,
                                                                 clean_baseline: Path) -> None:
    result, _ = run_suite(pytester, "-m", "tool_accuracy", f"--tool-baseline={pytester.path / 'missing.json'}")
    assert result.ret == 4 and "--tool-baseline:" in result.stderr.str() + result.stdout.str()
    other = json.loads(clean_baseline.read_text(encoding="utf-8"))
    other["settings"]["max_tokens"] = 96
    (pytester.path / "other.json").write_text(json.dumps(other), encoding="utf-8")
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", f"--tool-baseline={pytester.path / 'other.json'}")
    assert failed(outcomes) == ALL, outcomes
    assert "was recorded with {'max_tokens': 96, 'temperature': 0.0}, this run sends" in result.stdout.str()


# The slow tier (`pytest selftest -m slow`): 20 runs of 638 requests, about 200 s on this machine.
@pytest.mark.slow
@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_a_clean_engine_passes_twenty_runs_out_of_twenty(convention: str) -> None:
    """Ten runs per convention, stream chunks of 1 to 10 tokens: every threshold holds in every run."""
    cases = load_cases()
    policy = ToolAccuracyPolicy()
    verdicts = []
    for chunk in range(1, 11):
        with start_reference_engine(convention=convention, stream_chunk_tokens=chunk) as engine:
            target = EngineTarget(engine.url, "reference-model")
            result = score(cases, asyncio.run(run_cases(target, cases, policy.settings)))
        verdicts.append((chunk, result.errors, result.schema_valid.rate, result.finish_consistent.rate,
                         result.stream_agreement.rate, result.intended.f1))
    passing = [v for v in verdicts if v[1] == 0 and v[2] >= policy.min_schema_valid
               and v[3] >= policy.min_finish_reason_consistent and v[4] >= policy.min_stream_agreement
               and v[5] >= policy.min_trigger_f1]
    assert len(passing) == 10, verdicts


def test_too_few_finished_replies_cannot_pass_the_stream_comparison(pytester: pytest.Pytester) -> None:
    """A model cut by max_tokens everywhere (the CI's pretrained Gemma) leaves nothing to compare: a failure, not a pass.

    Neither streamed with non-streamed, nor finish_reason with the calls: a cut reply is not judged.
    """
    profile = (REPO / "fixtures" / "profiles" / "models" / "reference.yaml").read_text(encoding="utf-8")
    profile = profile.replace("name: reference\n", "name: reference-cut\n").split("tool_accuracy:")[0]
    path = pytester.path / "reference-cut.yaml"
    path.write_text(profile + "tool_accuracy:\n  max_tokens: 6\n", encoding="utf-8")
    result, outcomes = run_suite(pytester, "-m", "tool_accuracy", f"--profile={path}", SAMPLE, *NO_LATENCY)
    assert {STREAMED, FINISH} <= failed(outcomes), outcomes
    assert "cases had both replies run to their end" in result.stdout.str()
    assert "fewer than the 30 needed to judge streamed = non-streamed" in result.stdout.str()
    # Cut replies are not judged for finish_reason (they were counted consistent before): too few left, a failure.
    found = re.search(r"only (\d+) of (\d+) answered replies ended before max_tokens 6 \((\d+) cut, not judged",
                      result.stdout.str())
    assert found and int(found[1]) < 30 and int(found[1]) + int(found[3]) == int(found[2]), result.stdout.str()[-3000:]
    assert "fewer than the 30 needed to judge finish_reason against the calls" in result.stdout.str()
