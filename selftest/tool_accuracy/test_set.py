"""The tool-accuracy set: committed as the builder writes it, and answerable as it intends.

The file part needs no engine: the committed ``cases.jsonl`` is byte for byte what
``build_set`` writes, the set is large enough and covers every shape, every tool's
schema is valid and uses only what engine grammars compile, and each case is small
enough for the CI's 8192-token CPU engine.

The engine part sends every case to a real reference engine subprocess, non-streamed
and streamed, through the suite's raw client: a clean engine calls exactly when the
set expects a call, with the expected tools, arguments valid against the schema,
``finish_reason`` ``tool_calls`` iff there are calls, and the same calls streamed and
not, on both conventions. With ``tool-args-intermittent`` the broken calls are exactly
the engine's every 33rd, about 3%.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from engine_acceptance.profiles.tool_schemas import argument_problems
from engine_acceptance.proportions import Proportion
from engine_acceptance.reference_engine import start_reference_engine
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.defects import INTERMITTENT_TOOL_CALL_PERIOD
from engine_acceptance.tool_accuracy import build_set
from engine_acceptance.tool_accuracy.dataset import CASES_FILE, SHAPES, ToolCase, case_count, load_cases, sample_cases
from engine_acceptance.wire.client import RawStreamingClient
from engine_acceptance.wire.types import EngineTarget, Exchange

CASES = load_cases()
CONCURRENCY = 16
# Enough for the reference model's reasoning and the largest call; the set's answers are short.
MAX_TOKENS = 2048
MIN_CASES = 300
MIN_PER_SHAPE = 20
# The CI's real engine has an 8192-token context; characters / 4 (UTF-8 bytes / 4 for CJK) stays far below.
MAX_CASE_TOKENS_APPROX = 1500
# What every structured-output grammar compiles (see tools_catalog's docstring).
ALLOWED_FORMATS = {"date", "date-time"}
UNSUPPORTED_KEYWORDS = {"pattern", "patternProperties", "if", "then", "else", "not", "dependentSchemas",
                        "unevaluatedProperties", "$dynamicRef"}
NO_LATENCY = LatencyModel(ttft_ms=0, tpot_ms=0)


# --- the file ----------------------------------------------------------------------------

def test_the_committed_set_is_what_the_builder_writes() -> None:
    result = subprocess.run([sys.executable, "-m", "engine_acceptance.tool_accuracy.build_set", "--check"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr + result.stdout


def test_check_fails_when_the_committed_file_differs(tmp_path: Path) -> None:
    stale = tmp_path / "cases.jsonl"
    stale.write_text(CASES_FILE.read_text(encoding="utf-8").replace("get_weather", "get_wether", 1), encoding="utf-8")
    assert build_set.main(["--check", "--output", str(stale)]) == 1
    assert build_set.main(["--output", str(stale)]) == 0
    assert stale.read_text(encoding="utf-8") == CASES_FILE.read_text(encoding="utf-8")


def test_the_set_is_large_and_covers_every_shape() -> None:
    shapes = Counter(case.shape for case in CASES)
    assert len(CASES) >= MIN_CASES
    thin = {shape: shapes[shape] for shape in SHAPES if shapes[shape] < MIN_PER_SHAPE}
    assert not thin, f"shapes with fewer than {MIN_PER_SHAPE} cases: {thin}"
    assert len({case.id for case in CASES}) == len(CASES)


def test_expectations_and_tool_choices_are_consistent() -> None:
    choices = Counter("named" if isinstance(case.tool_choice, dict) else case.tool_choice for case in CASES)
    assert choices["auto"] > len(CASES) / 2 and choices["required"] >= 20 and choices["named"] >= 20, choices
    for case in CASES:
        assert (case.expect == "call") == bool(case.expected_tools), case.id
        if case.shape == "no_call":
            assert case.expect == "no_call", case.id
        if case.forced:
            assert case.expect == "call", f"{case.id}: a forced case must expect a call"
        if isinstance(case.tool_choice, dict):
            named = case.tool_choice["function"]["name"]
            assert named in case.tools_by_name and named in case.expected_tools, case.id
    ending_in_results = [case for case in CASES if case.messages[-1]["role"] == "tool"]
    continuing = [case for case in CASES if case.shape == "multi_turn_results" and case.messages[-1]["role"] == "user"]
    assert ending_in_results and all(case.expect == "no_call" for case in ending_in_results)
    assert continuing and all(case.expect == "call" for case in continuing)
    assert all(len(case.tools) >= 20 for case in CASES if case.shape == "many_tools")


def _walk(schema: Any) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from _walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _walk(value)


def _parameters(case: ToolCase, name: str) -> dict[str, Any]:
    return case.tools_by_name[name]["function"].get("parameters") or {"type": "object", "properties": {}}


def test_every_schema_is_valid_and_uses_only_what_grammars_compile() -> None:
    # The set offers the same few schemas again and again (67 in 1,365 tools): each distinct one is
    # judged once, at its first case (what is judged is the schema alone), not 7 s of it over again.
    judged: set[str] = set()
    for case in CASES:
        for name in case.tools_by_name:
            parameters = _parameters(case, name)
            canonical = json.dumps(parameters, sort_keys=True)
            if canonical in judged:
                continue
            judged.add(canonical)
            jsonschema.validators.validator_for(parameters).check_schema(parameters)
            for node in _walk(parameters):
                properties = node.get("properties")
                # Property names are data, not keywords: "glob" or a property called "pattern" is fine.
                keywords = set(node) - ({"properties"} if isinstance(properties, dict) else set())
                if isinstance(node.get("$ref"), str):
                    assert node["$ref"].startswith("#/$defs/"), f"{case.id} {name}: {node['$ref']}"
                bad = keywords & UNSUPPORTED_KEYWORDS
                if node is not properties:
                    assert not bad, f"{case.id} {name}: {sorted(bad)}"
                    assert node.get("format", "date") in ALLOWED_FORMATS or not isinstance(node.get("format"), str), \
                        f"{case.id} {name}: format {node.get('format')}"


def test_every_case_is_small_enough_for_a_small_context() -> None:
    sizes = {case.id: len(json.dumps(case.body(), ensure_ascii=False).encode("utf-8")) // 4 for case in CASES}
    largest = max(sizes, key=sizes.__getitem__)
    assert sizes[largest] <= MAX_CASE_TOKENS_APPROX, f"{largest}: about {sizes[largest]} tokens"


# --- against the reference engine ----------------------------------------------------------

@dataclass
class Answer:
    """One case's reply, as the application sees it."""

    case: ToolCase
    streamed: bool
    error: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)
    finish_reason: str | None = None
    content: str = ""

    def invalid_calls(self) -> list[str]:
        problems = []
        for name, arguments in self.calls:
            tool = self.case.tools_by_name.get(name)
            if tool is None:
                problems.append(f"{name} is not offered")
                continue
            problems += [f"{name}: {problem}" for problem in argument_problems(tool, arguments)]
        return problems


def _request(case: ToolCase, model: str, *, stream: bool) -> dict[str, Any]:
    body = {**case.body(), "model": model, "max_tokens": MAX_TOKENS, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def _answer(case: ToolCase, streamed: bool, exchange: Exchange) -> Answer:
    if not exchange.ok or exchange.reply is None:
        return Answer(case, streamed, error=exchange.describe_failure())
    reply = exchange.reply
    return Answer(case, streamed, calls=[(call.name, call.arguments) for call in reply.tool_calls],
                  finish_reason=reply.finish_reason, content=reply.content)


async def _ask_all(url: str, model: str) -> list[Answer]:
    target = EngineTarget(base_url=url, model=model)
    limit = asyncio.Semaphore(CONCURRENCY)
    async with RawStreamingClient(target, pool_size=CONCURRENCY) as client:
        async def one(case: ToolCase, stream: bool) -> Answer:
            async with limit:
                exchange = await client.post("/v1/chat/completions", _request(case, model, stream=stream),
                                             stream=stream)
            return _answer(case, stream, exchange)

        return list(await asyncio.gather(*(one(case, stream) for case in CASES for stream in (False, True))))


def _run(convention: str, defects: tuple[str, ...] = ()) -> list[Answer]:
    # Without the latency model: what the replies say is the point, and its waits were half of each run.
    with start_reference_engine(convention=convention, defects=defects, latency=NO_LATENCY) as engine:
        return asyncio.run(_ask_all(engine.url, "reference-model"))


@pytest.fixture(scope="module")
def clean_answers() -> dict[str, list[Answer]]:
    return {convention: _run(convention) for convention in ("vllm", "sglang")}


def _mismatch(answer: Answer) -> list[str]:
    case, names = answer.case, [name for name, _ in answer.calls]
    if answer.error:
        return [answer.error]
    problems = answer.invalid_calls()
    if case.expect == "call":
        if not names:
            problems.append(f"no call (content: {answer.content[:80]!r})")
        elif set(names) != set(case.expected_tools):
            problems.append(f"calls {names}, expected {list(case.expected_tools)}")
        if case.shape == "parallel_calls" and len(names) < 2:
            problems.append(f"{len(names)} call(s) where the question names several places")
    elif names:
        problems.append(f"calls {names} where none is wanted")
    elif not answer.content.strip():
        problems.append("neither calls nor text")
    if (answer.finish_reason == "tool_calls") != bool(names):
        problems.append(f"finish_reason {answer.finish_reason!r} with {len(names)} call(s)")
    return problems


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_a_clean_engine_answers_every_case_as_the_set_intends(clean_answers: dict[str, list[Answer]],
                                                              convention: str) -> None:
    answers = clean_answers[convention]
    assert len(answers) == 2 * len(CASES)
    wrong = [f"{a.case.id} ({'streamed' if a.streamed else 'non-streamed'}): {'; '.join(p)}"
             for a in answers for p in [_mismatch(a)] if p]
    assert not wrong, f"{len(wrong)} of {len(answers)} replies are not what the set intends:\n" + "\n".join(wrong[:15])


def _calls_as_parsed(answer: Answer) -> list[tuple[str, Any]]:
    return [(name, json.loads(arguments)) for name, arguments in answer.calls]


@pytest.mark.parametrize("convention", ["vllm", "sglang"])
def test_streamed_calls_equal_the_non_streamed_calls(clean_answers: dict[str, list[Answer]], convention: str) -> None:
    by_case: dict[str, dict[bool, Answer]] = {}
    for answer in clean_answers[convention]:
        by_case.setdefault(answer.case.id, {})[answer.streamed] = answer
    differ = [case_id for case_id, pair in by_case.items()
              if _calls_as_parsed(pair[False]) != _calls_as_parsed(pair[True])]
    assert not differ, f"streamed and non-streamed calls differ in {len(differ)} cases: {differ[:10]}"


def test_cjk_and_emoji_reach_the_arguments_unchanged(clean_answers: dict[str, list[Answer]]) -> None:
    for answer in clean_answers["vllm"]:
        if answer.case.shape == "cjk_emoji_args":
            arguments = "".join(arguments for _, arguments in answer.calls)
            assert any(ord(char) > 0x2E80 for char in arguments), f"{answer.case.id}: {arguments!r}"


def test_the_intermittent_defect_breaks_every_33rd_call_about_3_percent(
        clean_answers: dict[str, list[Answer]]) -> None:
    answers = _run("vllm", ("tool-args-intermittent",))
    calls = sum(len(answer.calls) for answer in answers)
    invalid = [problem for answer in answers for problem in answer.invalid_calls()]
    # The counter runs over every call the engine returned, streamed or not, in whatever order they came.
    assert calls == sum(len(answer.calls) for answer in clean_answers["vllm"])
    assert len(invalid) == calls // INTERMITTENT_TOOL_CALL_PERIOD, f"{len(invalid)} invalid of {calls}"
    assert all("are not JSON" in problem for problem in invalid), invalid[:3]
    broken = Proportion(len(invalid), calls)
    assert broken.lower <= 1 / INTERMITTENT_TOOL_CALL_PERIOD <= broken.upper, str(broken)
    # Calls still happen when they should, and the finish reason still says so: only the arguments break.
    assert all((a.finish_reason == "tool_calls") == bool(a.calls) for a in answers)


@pytest.mark.parametrize("count", [1, 13, 40, 100, 318])
def test_a_sample_is_even_over_the_shapes_and_the_same_every_time(count: int) -> None:
    cases = CASES
    sample = sample_cases(cases, count)
    assert len(sample) == count and sample == sample_cases(cases, count)
    assert [c.id for c in sample] == [c.id for c in cases if c in sample], "the set's order is kept"
    per_shape = Counter(c.shape for c in sample)
    if count >= len(SHAPES):
        assert set(per_shape) == set(SHAPES), per_shape
        whole = Counter(c.shape for c in cases)
        # Each shape's share within one case of its proportional share.
        assert all(abs(per_shape[s] - count * whole[s] / len(cases)) < 1.5 for s in SHAPES), per_shape


def test_no_count_or_one_past_the_set_sends_the_whole_set() -> None:
    assert sample_cases(CASES, None) == CASES == sample_cases(CASES, len(CASES) + 1) and case_count() == len(CASES)
