"""What a throughput cell must satisfy before its figures mean anything.

A fixed-length load is only the load it claims to be when every request succeeded,
every prompt had the intended length (``usage.prompt_tokens``) and, with
``ignore_eos``, every reply had the requested length (``usage.completion_tokens``,
or the event count when the engine sent no usage, which is then said). Each
function returns sentences for the assertion message; an empty list means it holds.
"""

from __future__ import annotations

from collections import Counter

from engine_acceptance.loadgen import CellResult

__all__ = ["error_problems", "length_problems", "count_notes"]


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
    if not counts:
        return []
    kinds = "; ".join(f"{kind} x{count} (e.g. {examples[kind][:200]})" for kind, count in counts.most_common())
    return [f"{result.cell.key}: {sum(counts.values())}/{total} measured requests failed: {kinds}"]


def length_problems(result: CellResult, *, output_forced: bool) -> list[str]:
    """Input length not honoured, or (with ignore_eos) output length not honoured."""
    cell = result.cell
    done = [record for records in result.records for record in records if record.ok]
    problems = []
    wrong_input = Counter(r.prompt_tokens for r in done if r.prompt_tokens is not None
                          and r.prompt_tokens != cell.input_tokens)
    if wrong_input:
        seen = ", ".join(f"{tokens} ({count} requests)" for tokens, count in wrong_input.most_common(3))
        problems.append(f"{cell.key}: input length not honored: sent {cell.input_tokens} prompt token ids, "
                        f"usage.prompt_tokens says {seen}")
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


def count_notes(result: CellResult, *, output_forced: bool, ignore_eos_reason: str) -> list[str]:
    """What the reader should know about how lengths were established (not failures)."""
    notes = []
    done = [record for records in result.records for record in records if record.ok]
    fallback = sum(1 for r in done if r.output_tokens_source == "events")
    if fallback:
        notes.append(f"{result.cell.key}: {fallback}/{len(done)} requests had no usage in the stream; their output "
                     f"token count (TPOT's n) is the number of events")
    no_prompt_count = sum(1 for r in done if r.prompt_tokens is None)
    if no_prompt_count:
        notes.append(f"{result.cell.key}: {no_prompt_count}/{len(done)} requests reported no usage.prompt_tokens; "
                     f"their input length is unverified")
    if not output_forced:
        notes.append(f"{result.cell.key}: output length not forced: {ignore_eos_reason}")
    return notes
