"""Putting a thinking mode or a reasoning effort into a chat request, as the profiles say.

A model profile says which request fields select a thinking mode (MiniMax-M3:
``chat_template_kwargs.thinking_mode``; Qwen3: ``chat_template_kwargs.enable_thinking``);
an engine profile says where a reasoning effort goes (``reasoning_effort_in``: SGLang
reads the top-level ``reasoning_effort``, vLLM ``chat_template_kwargs.reasoning_effort``).
Checks call these helpers and never ask which engine they talk to.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from engine_acceptance.profiles.profile import EngineProfile, ModelProfile

__all__ = ["deep_merge", "with_reasoning_effort", "with_thinking_budget", "with_thinking_mode"]


def deep_merge(body: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with ``fields`` merged in; nested objects (chat_template_kwargs) are merged, not replaced."""
    merged = copy.deepcopy(dict(body))
    for key, value in fields.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def with_thinking_mode(body: Mapping[str, Any], profile: ModelProfile, mode: str) -> dict[str, Any]:
    """``body`` selecting thinking ``mode``; KeyError when the profile does not define it."""
    if mode not in profile.thinking_modes:
        raise KeyError(f"model profile {profile.name!r} defines no thinking mode {mode!r} "
                       f"(it has: {', '.join(profile.thinking_modes) or 'none'})")
    return deep_merge(body, profile.thinking_modes[mode])


def with_reasoning_effort(body: Mapping[str, Any], engine: EngineProfile, effort: str) -> dict[str, Any]:
    """``body`` asking for reasoning ``effort`` where this engine reads it."""
    if engine.reasoning_effort_in == "chat_template_kwargs":
        return deep_merge(body, {"chat_template_kwargs": {"reasoning_effort": effort}})
    if engine.reasoning_effort_in == "top_level":
        return deep_merge(body, {"reasoning_effort": effort})
    raise ValueError(f"engine profile {engine.name!r}: unknown reasoning_effort_in {engine.reasoning_effort_in!r}")


def with_thinking_budget(body: Mapping[str, Any], engine: EngineProfile, tokens: int) -> dict[str, Any]:
    """``body`` capping the reasoning at ``tokens`` where this engine reads a budget (a dotted path);
    ValueError when the engine profile names no budget field."""
    path = engine.thinking_budget_field
    if path is None:
        raise ValueError(f"engine profile {engine.name!r} names no thinking_budget_field")
    fields: dict[str, Any] = {}
    node = fields
    *parents, leaf = path.split(".")
    for name in parents:
        node = node.setdefault(name, {})
    node[leaf] = tokens
    return deep_merge(body, fields)
