"""Structured outputs: the answer written as JSON that fits the request's ``response_format``.

A real engine constrains decoding with a grammar compiled from the schema, so whatever the
model says comes out as JSON the schema accepts. The reference model does the same in one
step: it builds the smallest instance the schema accepts, filling strings with its answer
and numbers with the first number of its answer, and checks the instance against the
schema (a schema it cannot satisfy this way is refused, never answered with invalid JSON).
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from .protocol import RequestError, ResponseFormat

__all__ = ["structured_answer"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _instance(schema: Any, answer: str, depth: int = 0) -> Any:
    if depth > 16 or not isinstance(schema, dict):
        return answer
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return _instance(schema[key][0], answer, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties") or {}
        # Every declared property, not only the required ones: a fuller answer is still valid.
        return {name: _instance(sub, answer, depth + 1) for name, sub in properties.items()}
    if kind == "array":
        return [_instance(schema.get("items", {}), answer, depth + 1) for _ in range(max(schema.get("minItems", 1), 1))]
    if kind in ("integer", "number"):
        found = _NUMBER.search(answer)
        value: float = float(found.group()) if found else 0
        low, high = schema.get("minimum"), schema.get("maximum")
        value = max(value, low) if low is not None else value
        value = min(value, high) if high is not None else value
        return int(value) if kind == "integer" else value
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    text = answer
    if "maxLength" in schema:
        text = text[: schema["maxLength"]]
    return text.ljust(schema.get("minLength", 0), ".")


def structured_answer(fmt: ResponseFormat, answer: str) -> str:
    """The answer as JSON text that `fmt` accepts (an object for ``json_object``)."""
    if fmt.schema is None:
        return json.dumps({"answer": answer}, ensure_ascii=False)
    instance = _instance(fmt.schema, answer)
    errors = list(jsonschema.validators.validator_for(fmt.schema)(fmt.schema).iter_errors(instance))
    if errors:
        raise RequestError(f"The reference engine cannot satisfy this response_format schema: {errors[0].message}",
                           param="response_format")
    return json.dumps(instance, ensure_ascii=False)
