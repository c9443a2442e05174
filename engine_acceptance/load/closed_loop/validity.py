"""What a throughput cell must satisfy before its figures mean anything.

A fixed-length load is only the load it claims to be when every request succeeded,
every prompt had the intended length (``usage.prompt_tokens``) and, with
``ignore_eos``, every reply had the requested length (``usage.completion_tokens``,
or the event count when the engine sent no usage, which is then said). Each
function returns sentences for the assertion message; an empty list means it holds.

With text prompts of an estimated length (no ``/tokenize``, no ``--tokenizer``) the
input length cannot be held to the asked count: what is checked instead is that every
request reported ``usage.prompt_tokens`` and that the same prompt sent again was
counted the same (:class:`Recount`); the lengths the engine counted are reported
(:func:`input_tokens_line`), never failed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

from engine_acceptance.load.generator import CellResult

__all__ = ["Recount", "count_notes", "error_problems", "input_tokens_line", "input_tokens_summary",
           "length_problems"]


@dataclass(frozen=True)
class Recount:
    """A measured request's prompt sent once more: the load's count and the second one."""

    in_load: int | None
    again: int | None
    error: str | None = None

    def problem(self, key: str) -> str | None:
        if self.error is not None:
            return f"{key}: sending the first measured prompt again, to check its count, failed: {self.error}"
        if self.in_load is not None and self.again != self.in_load:
            return (f"{key}: usage.prompt_tokens is not consistent: the same prompt counted {self.in_load} tokens "
                    f"in the load and {self.again} when sent again")
        return None


def _prompt_counts(result: CellResult) -> list[int]:
    return [r.prompt_tokens for records in result.records for r in records
            if r.ok and r.prompt_tokens is not None]


def input_tokens_summary(result: CellResult, *, exact: bool) -> dict[str, Any]:
    """Asked and counted input lengths of a cell (successful measured requests), for the JSON."""
    counts = _prompt_counts(result)
    done = sum(1 for records in result.records for r in records if r.ok)
    return {
        "exact": exact,
        "asked": result.cell.input_tokens,
        "engine_counted": ({"min": min(counts), "max": max(counts), "median": statistics.median(counts),
                            "requests": len(counts)} if counts else None),
        "requests_without_usage": done - len(counts),
        "counted_by": "usage.prompt_tokens",
    }


def input_tokens_line(result: CellResult, *, exact: bool, short: bool = False) -> str:
    """``input tokens approximate: asked 128, engine counted 117-131 (usage...)``."""
    counts = _prompt_counts(result)
    if not counts:
        counted = "engine counted none (no usage.prompt_tokens)"
    else:
        low, high = min(counts), max(counts)
        counted = f"engine counted {low}" if low == high else f"engine counted {low}-{high}"
    kind = "exact" if exact else "approximate"
    if short:
        return f"{kind}: asked {result.cell.input_tokens}, {counted} (usage)"
    median = f", median {statistics.median(counts):g}" if counts and min(counts) != max(counts) else ""
    return (f"{result.cell.key}: input tokens {kind}: asked {result.cell.input_tokens}, {counted} "
            f"(usage.prompt_tokens{median}, {len(counts)} requests)")


def error_problems(result: CellResult) -> list[str]:
    """Failed requests, by kind, with one example message each."""
    examples: dict[str, str] = {}
    counts: Counter[str] = Counter()
    total = 0
    for records in result.records:
        for record in records:
            total += 1
            if record.error_kind is not None:
                counts[record.error_kind] += 1
                examples.setdefault(record.error_kind, record.error or "")
    # One problem per kind of error: an expected-failure record for one kind (a known HTTP 500, say)
    # must not cover another kind that shows up beside it.
    return [f"{result.cell.key}: {count}/{total} measured requests failed: {kind} x{count} "
            f"(e.g. {examples[kind][:200]})" for kind, count in counts.most_common()]


def length_problems(result: CellResult, *, output_forced: bool, input_exact: bool = True,
                    recount: Recount | None = None) -> list[str]:
    """Input length not honoured, or (with ignore_eos) output length not honoured.

    With ``input_exact`` False (text prompts of an estimated length) the input is not held
    to the asked count: a request without ``usage.prompt_tokens`` and a ``recount`` that
    disagrees are the problems instead.
    """
    cell = result.cell
    done = [record for records in result.records for record in records if record.ok]
    problems = []
    if input_exact:
        wrong_input = Counter(r.prompt_tokens for r in done if r.prompt_tokens is not None
                              and r.prompt_tokens != cell.input_tokens)
        if wrong_input:
            seen = ", ".join(f"{tokens} ({count} requests)" for tokens, count in wrong_input.most_common(3))
            problems.append(f"{cell.key}: input length not honored: sent {cell.input_tokens} prompt token ids, "
                            f"usage.prompt_tokens says {seen}")
    else:
        unreported = sum(1 for r in done if r.prompt_tokens is None)
        if unreported:
            problems.append(f"{cell.key}: {unreported}/{len(done)} requests reported no usage.prompt_tokens: with "
                            f"text prompts of an estimated length it is the only measure of their input length")
        problem = recount.problem(cell.key) if recount is not None else None
        if problem:
            problems.append(problem)
    if output_forced:
        wrong_output = Counter((r.output_tokens, r.output_tokens_source, r.finish_reason) for r in done
                               if r.output_tokens != cell.output_tokens)
        if wrong_output:
            count = sum(wrong_output.values())
            (tokens, source, finish), _ = wrong_output.most_common(1)[0]
            by = "usage.completion_tokens" if source == "usage" else "counted events (no usage in the stream)"
            problems.append(f"{cell.key}: output length not honored: asked {cell.output_tokens} tokens with "
                            f"ignore_eos, got {tokens} ({by}, finish_reason={finish!r}) in {count}/{len(done)} "
                            f"requests")
    return problems


def count_notes(result: CellResult, *, output_forced: bool, ignore_eos_reason: str,
                input_estimate: str | None = None, recount: Recount | None = None) -> list[str]:
    """What the reader should know about how lengths were established (not failures).

    ``input_estimate`` (text prompts: how their length was estimated and why) adds the
    approximate input lengths and what was checked instead of the exact count.
    """
    notes = []
    done = [record for records in result.records for record in records if record.ok]
    if input_estimate is not None:
        again = (f"; the first measured prompt sent again counted {recount.again} (the load: {recount.in_load})"
                 if recount is not None and recount.again is not None else "")
        notes.append(f"{input_tokens_line(result, exact=False)}; {input_estimate}. Exact input accounting was not "
                     f"possible: only the engine knows how long a text prompt is; checked instead that every "
                     f"request reported usage.prompt_tokens and that the same prompt counts the same{again}")
    fallback = sum(1 for r in done if r.output_tokens_source == "events")
    if fallback:
        notes.append(f"{result.cell.key}: {fallback}/{len(done)} requests had no usage in the stream; their output "
                     f"token count (TPOT's n) is the number of events")
    no_prompt_count = sum(1 for r in done if r.prompt_tokens is None)
    if no_prompt_count and input_estimate is None:
        notes.append(f"{result.cell.key}: {no_prompt_count}/{len(done)} requests reported no usage.prompt_tokens; "
                     f"their input length is unverified")
    if not output_forced:
        notes.append(f"{result.cell.key}: output length not forced: {ignore_eos_reason}")
    return notes
