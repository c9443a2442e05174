"""Send every case of the tool-accuracy set, non-streamed and streamed, and keep what came back.

Requests go through the openai SDK (the functional client, never retrying), a
bounded number at a time, with the same sampling settings for every case, so a
baseline and a candidate are scored on identical requests. Progress is written
every few seconds: the set is hundreds of requests and a slow engine takes minutes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.profiles.tool_schemas import argument_problems
from engine_acceptance.tool_accuracy.dataset import ToolCase
from engine_acceptance.wire.client import SdkChatClient
from engine_acceptance.wire.types import EngineTarget, Exchange

__all__ = ["CallOutcome", "CaseOutcome", "RunSettings", "run_cases"]

MODES = (False, True)  # non-streamed, then streamed


@dataclass(frozen=True)
class RunSettings:
    """What every request of a run shares; recorded with a baseline."""

    max_tokens: int
    temperature: float = 0.0
    concurrency: int = 16

    def as_dict(self) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "temperature": self.temperature}


@dataclass(frozen=True)
class CallOutcome:
    name: str
    arguments: str
    problems: tuple[str, ...]  # empty when the arguments are JSON that fits the named tool's schema

    @property
    def valid(self) -> bool:
        return not self.problems

    def canonical(self) -> tuple[str, str]:
        try:
            return self.name, json.dumps(json.loads(self.arguments), ensure_ascii=False, sort_keys=True)
        except ValueError:
            return self.name, self.arguments


@dataclass(frozen=True)
class CaseOutcome:
    """One case in one mode: the calls, the finish reason, or the error that stood in their place."""

    case_id: str
    stream: bool
    calls: tuple[CallOutcome, ...] = ()
    finish_reason: str | None = None
    content: str = ""
    error: str | None = None
    stream_problems: tuple[str, ...] = field(default=())
    elapsed_s: float = 0.0

    @property
    def mode(self) -> str:
        return "streamed" if self.stream else "non-streamed"

    @property
    def triggered(self) -> bool:
        return bool(self.calls)

    @property
    def finish_judged(self) -> bool:
        """Whether ``finish_reason`` can be judged: an answered reply that ended before max_tokens.

        A reply cut by max_tokens says "length", calls or not: it tells nothing about
        whether the engine would say "tool_calls" for its calls (its cut arguments are
        the schema check's finding), so it is left out, not counted as consistent.
        """
        return self.error is None and self.finish_reason != "length"

    @property
    def finish_consistent(self) -> bool:
        """``finish_reason`` is "tool_calls" exactly when the reply calls tools; False for a reply not judged."""
        if not self.finish_judged:
            return False
        return (self.finish_reason == "tool_calls") == self.triggered

    def signature(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(call.canonical() for call in self.calls))


def _call_problems(case: ToolCase, name: str, arguments: str) -> tuple[str, ...]:
    tool = case.tools_by_name.get(name)
    if tool is None:
        return (f"calls {name!r}, which was not offered ({', '.join(case.tools_by_name)})",)
    return tuple(argument_problems(tool, arguments))


def outcome_of(case: ToolCase, exchange: Exchange) -> CaseOutcome:
    elapsed = exchange.elapsed_s or 0.0
    if not exchange.ok or exchange.reply is None:
        return CaseOutcome(case.id, exchange.stream, error=exchange.describe_failure(), elapsed_s=elapsed)
    reply = exchange.reply
    calls = tuple(CallOutcome(call.name, call.arguments, _call_problems(case, call.name, call.arguments))
                  for call in reply.tool_calls)
    return CaseOutcome(case.id, exchange.stream, calls, reply.finish_reason, reply.content,
                       stream_problems=tuple(reply.problems), elapsed_s=elapsed)


async def run_cases(target: EngineTarget, cases: Sequence[ToolCase], settings: RunSettings, *,
                    progress: Callable[[str], None] | None = None, every_s: float = 10.0) -> list[CaseOutcome]:
    """Every case non-streamed and streamed, at most ``settings.concurrency`` in flight."""
    jobs = [(case, stream) for stream in MODES for case in cases]
    limit = asyncio.Semaphore(settings.concurrency)
    done = 0
    started = last = time.monotonic()

    async def one(client: SdkChatClient, case: ToolCase, stream: bool) -> CaseOutcome:
        nonlocal done, last
        body = {**case.body(), "temperature": settings.temperature, "max_tokens": settings.max_tokens}
        async with limit:
            outcome = outcome_of(case, await client.chat(body, stream=stream))
        done += 1
        now = time.monotonic()
        if progress is not None and (now - last >= every_s or done == len(jobs)):
            last = now
            progress(f"{_bar(done, len(jobs))} {done}/{len(jobs)} requests, {now - started:.0f} s")
        return outcome

    async with SdkChatClient(target) as client:
        return list(await asyncio.gather(*(one(client, case, stream) for case, stream in jobs)))


def _bar(done: int, total: int, width: int = 24) -> str:
    filled = round(width * done / total) if total else width
    return "[" + "#" * filled + "." * (width - filled) + "]"
