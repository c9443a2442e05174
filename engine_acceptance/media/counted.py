"""Whether an engine takes the media it is sent, judged without asking the model to read it.

The same question is sent with a media part and without it, streamed or not: both replies
must complete (a finish reason; a stream ends properly, which the client checks) with usage
that adds up, and the one with the media must cost more prompt tokens, since the engine
turned the picture or the frames into tokens. None of it depends on what the model makes of
the media, so it holds for a model that cannot read (a random-weight test model) and fails for
an engine that drops the part or breaks its stream when media is in the prompt.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from engine_acceptance.wire.media_parts import user_turn
from engine_acceptance.wire.types import Exchange

__all__ = ["media_count_problems"]

Chat = Callable[..., Awaitable[Exchange]]


async def media_count_problems(chat: Chat, prompt: str, part: dict[str, Any], *, what: str, stream: bool,
                               max_tokens: int) -> list[str]:
    """What is wrong with the engine's handling of `part` (named `what`); empty when nothing is."""
    replies = {}
    for label, parts in ((f"with {what}", [part]), (f"without {what}", [])):
        body: dict[str, Any] = {"messages": user_turn(prompt, parts), "temperature": 0, "max_tokens": max_tokens}
        if stream:
            body["stream_options"] = {"include_usage": True}
        exchange = await chat(body, stream=stream, label=label)
        if not exchange.ok or exchange.reply is None:
            return [f"the request {label} failed: {exchange.describe_failure()}"]
        replies[label] = exchange.reply
    problems = []
    for label, reply in replies.items():
        if reply.finish_reason is None:
            problems.append(f"the reply {label} has no finish_reason")
        if reply.usage is None:
            problems.append(f"the reply {label} has no usage"
                            + (" although stream_options.include_usage was set" if stream else ""))
        else:
            problems += [f"the reply {label}: {problem}" for problem in reply.usage.inconsistencies()]
    with_media, without = (replies[f"with {what}"].usage, replies[f"without {what}"].usage)
    if with_media is not None and without is not None and with_media.prompt_tokens <= without.prompt_tokens:
        problems.append(f"usage.prompt_tokens is {with_media.prompt_tokens} with {what} and {without.prompt_tokens} "
                        f"without: the engine did not count the {what} (dropped before the prompt?)")
    return problems
