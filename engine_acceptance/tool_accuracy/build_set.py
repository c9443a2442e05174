"""Write the committed tool-accuracy set: ``python -m engine_acceptance.tool_accuracy.build_set``.

Every case is written out by hand below (the questions, English and Chinese, with a
few in Japanese) and combined with the tools of ``tools_catalog`` by fixed rules, so
the output is the same bytes on every machine: no randomness, no network. ``--check``
exits 1 when the committed file differs from what this would write.

Rules that make the set fair to a real model:

* a question that wants a call names the tool (``get_weather`` or ``get weather``)
  and says the values it needs, quoting free text ("...", “...”, 「...」);
* each call case offers the wanted tool among two others it does not need, in an order
  that rotates; the ``many_tools`` cases offer 20;
* ``tool_choice`` is ``auto`` for most, and every seventh call case is forced: the
  sixth ``required``, the seventh named (tools without a ``parameters`` field are never
  forced, since a grammar needs a schema); ``no_call`` cases and conversations ending in
  tool results are always ``auto``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from engine_acceptance.tool_accuracy.dataset import CASES_FILE, SHAPES
from engine_acceptance.tool_accuracy.scenarios import (
    ANY_OF,
    ARRAYS,
    CJK_EMOJI,
    DEFS_REFS,
    ENUMS,
    FLAT,
    MANY_TOOLS,
    MULTI_TURN_CONTINUE,
    MULTI_TURN_END,
    NESTED,
    NO_CALL,
    OPTIONAL,
    PARALLEL,
    PARAMETERLESS,
)
from engine_acceptance.tool_accuracy.tools_catalog import TOOLS

__all__ = ["build_cases", "main", "render"]

# Tools offered beside the wanted one: none is about the weather, so no question can want them by topic.
DISTRACTORS = (
    "lookup_word", "track_package", "set_light_mode", "create_note", "get_exchange_rate", "whoami",
    "rate_movie", "list_files", "send_email", "get_population", "order_coffee", "refresh_cache",
    "calculate_bmi", "search_music", "set_reminder", "get_stock_price",
)
MANY_TOOLS_OFFERED = 20
# A tool this long or shorter (its JSON, in characters) may be one of the many_tools cases' others.
SMALL_TOOL_CHARS = 300
_FORCE_PERIOD = 7


def _call_choice(position: int, tool_name: str) -> Any:
    """auto for most; the 6th of every 7 call cases `required`, the 7th named (when the tool has a schema)."""
    slot = position % _FORCE_PERIOD
    forcible = "parameters" in TOOLS[tool_name]["function"]
    if slot == _FORCE_PERIOD - 2 and forcible:
        return "required"
    if slot == _FORCE_PERIOD - 1 and forcible:
        return {"type": "function", "function": {"name": tool_name}}
    return "auto"


def _offer(wanted: Sequence[str], position: int, extra: int = 2) -> list[dict[str, Any]]:
    """The wanted tools and `extra` distractors, the wanted one at a rotating place."""
    others = [name for name in DISTRACTORS if name not in wanted]
    chosen = [others[(position * 3 + k) % len(others)] for k in range(extra)]
    names = list(chosen)
    for offset, name in enumerate(wanted):
        names.insert((position + offset) % (len(names) + 1), name)
    return [TOOLS[name] for name in names]


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _case(shape: str, number: int, expect: str, expected: Sequence[str], choice: Any,
          messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    prefix = shape.replace("_", "-")
    return {"id": f"{prefix}-{number:03d}", "shape": shape, "expect": expect, "expected_tools": list(expected),
            "tool_choice": choice, "messages": messages, "tools": tools}


def _single_tool_cases(shape: str, scenarios: Sequence[tuple[str, str]]) -> Iterator[dict[str, Any]]:
    """(tool, question) pairs: one call of that tool wanted."""
    for number, (name, question) in enumerate(scenarios, 1):
        yield _case(shape, number, "call", [name], _call_choice(number, name), _user(question),
                    _offer([name], number))


def _small(name: str) -> bool:
    return len(json.dumps(TOOLS[name], ensure_ascii=False)) <= SMALL_TOOL_CHARS


def _many_tools_cases() -> Iterator[dict[str, Any]]:
    # The others come from the small tools, so 20 fit in about 5,000 characters (~1,250 tokens).
    pool = sorted(name for name in TOOLS if _small(name) and name != "get_weather")
    for number, (name, question) in enumerate(MANY_TOOLS, 1):
        others = [other for other in pool if other != name]
        start = (number * 5) % len(others)
        names = (others[start:] + others[:start])[:MANY_TOOLS_OFFERED - 1]
        names.insert((number * 7) % MANY_TOOLS_OFFERED, name)
        yield _case("many_tools", number, "call", [name], _call_choice(number, name), _user(question),
                    [TOOLS[n] for n in names])


def _parallel_cases() -> Iterator[dict[str, Any]]:
    for number, (name, question) in enumerate(PARALLEL, 1):
        # A forced single named call cannot hold several: parallel cases are auto or required.
        choice = "required" if number % 4 == 0 else "auto"
        yield _case("parallel_calls", number, "call", [name], choice, _user(question), _offer([name], number))


def _assistant_calls(turn: int, calls: Sequence[tuple[str, dict[str, Any]]], number: int) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{number:03d}_{turn}{index}", "type": "function",
         "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}
        for index, (name, arguments) in enumerate(calls)]}


def _results(turn: int, results: Sequence[dict[str, Any]], number: int) -> list[dict[str, Any]]:
    return [{"role": "tool", "tool_call_id": f"call_{number:03d}_{turn}{index}",
             "content": json.dumps(result, ensure_ascii=False)} for index, result in enumerate(results)]


def _multi_turn_cases() -> Iterator[dict[str, Any]]:
    number = 0
    for question, calls, results in MULTI_TURN_END:
        number += 1
        names = list(dict.fromkeys(name for name, _ in calls))
        messages = [*_user(question), _assistant_calls(0, calls, number), *_results(0, results, number)]
        yield _case("multi_turn_results", number, "no_call", [], "auto", messages, _offer(names, number))
    for position, (question, calls, results, answer, follow_up, wanted) in enumerate(MULTI_TURN_CONTINUE, 1):
        number += 1
        names = list(dict.fromkeys([*(name for name, _ in calls), wanted]))
        messages = [*_user(question), _assistant_calls(0, calls, number), *_results(0, results, number),
                    {"role": "assistant", "content": answer}, *_user(follow_up)]
        yield _case("multi_turn_results", number, "call", [wanted], _call_choice(position, wanted), messages,
                    _offer(names, number, extra=1))


def _no_call_cases() -> Iterator[dict[str, Any]]:
    for number, (question, offered) in enumerate(NO_CALL, 1):
        yield _case("no_call", number, "no_call", [], "auto", _user(question), [TOOLS[name] for name in offered])


def build_cases() -> list[dict[str, Any]]:
    """Every case of the set, in file order."""
    cases: list[dict[str, Any]] = []
    for shape, scenarios in (("flat", FLAT), ("nested_objects", NESTED), ("arrays", ARRAYS), ("enums", ENUMS),
                             ("any_of", ANY_OF), ("defs_refs", DEFS_REFS), ("optional_params", OPTIONAL),
                             ("parameterless", PARAMETERLESS)):
        cases += _single_tool_cases(shape, scenarios)
    cases += _many_tools_cases()
    cases += _single_tool_cases("cjk_emoji_args", CJK_EMOJI)
    cases += _multi_turn_cases()
    cases += _parallel_cases()
    cases += _no_call_cases()
    return cases


def render(cases: Sequence[dict[str, Any]]) -> str:
    """The file's text: one compact JSON object per line, UTF-8 as written."""
    return "".join(json.dumps(case, ensure_ascii=False, separators=(",", ":")) + "\n" for case in cases)


def _summary(cases: Sequence[dict[str, Any]]) -> str:
    shapes = Counter(case["shape"] for case in cases)
    missing = [shape for shape in SHAPES if not shapes[shape]]
    lines = [f"{len(cases)} cases"] + [f"  {shape}: {shapes[shape]}" for shape in SHAPES]
    if missing:
        lines.append(f"  missing shapes: {', '.join(missing)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or check) the committed tool-accuracy set")
    parser.add_argument("--check", action="store_true",
                        help="Exit 1 if the committed file differs from what would be written")
    parser.add_argument("--output", type=Path, default=CASES_FILE, help="Where the set goes")
    args = parser.parse_args(argv)
    cases = build_cases()
    text = render(cases)
    if args.check:
        current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
        if current != text:
            print(f"{args.output} is out of date: run python -m engine_acceptance.tool_accuracy.build_set",
                  file=sys.stderr)
            return 1
        print(f"{args.output} is up to date ({len(cases)} cases)")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output}\n{_summary(cases)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
