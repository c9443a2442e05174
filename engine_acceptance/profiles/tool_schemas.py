"""Tool definitions the checks offer the model, and validation of the arguments it sends.

Tools are committed JSON files (``fixtures/schemas/<name>.tool.json``) in the OpenAI
``{"type": "function", "function": {...}}`` form; arguments are checked against the
tool's ``parameters`` schema with jsonschema, so "valid" means what the application
that defined the tool would accept.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema

from engine_acceptance.profiles.profile import SCHEMAS_DIR

__all__ = ["argument_problems", "load_tool"]


@lru_cache(maxsize=None)
def _load(name: str) -> str:
    return (SCHEMAS_DIR / f"{name}.tool.json").read_text(encoding="utf-8")


def load_tool(name: str) -> dict[str, Any]:
    """A fresh copy of the tool definition ``fixtures/schemas/<name>.tool.json``."""
    tool = json.loads(_load(name))
    jsonschema.validators.validator_for(tool["function"]["parameters"]).check_schema(tool["function"]["parameters"])
    return tool


def argument_problems(tool: dict[str, Any], arguments: str) -> list[str]:
    """What is wrong with a call's ``arguments`` text for ``tool``; empty when it is valid."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as exc:
        shown = arguments if len(arguments) <= 200 else arguments[:200] + "…"
        return [f"arguments are not JSON ({exc.msg} at position {exc.pos}): {shown!r}"]
    # A function declared without `parameters` takes none: its arguments must be an object.
    schema = tool["function"].get("parameters") or {"type": "object", "properties": {}}
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"arguments {json.dumps(parsed, ensure_ascii=False)} do not fit the schema: "
            f"{'/'.join(map(str, error.absolute_path)) or '(top level)'}: {error.message}"
            for error in sorted(validator.iter_errors(parsed), key=lambda e: list(e.absolute_path))]
