"""The reference model's argument filler: values that fit a schema's shape, taken from the question."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from engine_acceptance.reference_engine.schema_values import fill_arguments


def _valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.validators.validator_for(schema)(schema).is_valid(value)


SCHEMAS = {
    "recursive-ref": ({"type": "object", "$defs": {"Node": {"type": "object", "properties": {
        "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
        "required": ["name", "children"]}}, "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"]},
        "a tree"),
    "bounds": ({"type": "object", "properties": {
        "a": {"type": "integer", "exclusiveMinimum": 5, "maximum": 9, "multipleOf": 2},
        "b": {"type": "number", "minimum": 0.5, "exclusiveMaximum": 1}}, "required": ["a", "b"]}, "nothing said"),
    "number-out-of-range": ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "maximum": 10}},
                             "required": ["n"]}, "set it to 500"),
    "one-of-second-branch": ({"type": "object", "properties": {"v": {"oneOf": [
        {"type": "integer", "minimum": 100}, {"type": "string", "enum": ["auto"]}]}}, "required": ["v"]},
        "v should be auto, use 7"),
    "max-items": ({"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                             "minItems": 1, "maxItems": 2}}, "required": ["tags"]},
                  'tags "a", "b", "c", "d"'),
    "only-null": ({"type": "object", "properties": {"x": {"type": "null"}}, "required": ["x"]}, "x"),
    "no-properties": ({"type": "object"}, "anything"),
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_arguments_fit_the_schema(name: str) -> None:
    schema, question = SCHEMAS[name]
    assert _valid(schema, fill_arguments(schema, question))


def test_quoted_values_numbers_dates_and_mentioned_enums_are_taken_from_the_question() -> None:
    schema = {"type": "object", "properties": {
        "title": {"type": "string"}, "day": {"type": "string", "format": "date"}, "guests": {"type": "integer"},
        "size": {"type": "string", "enum": ["small", "large"]}, "note": {"type": "string"}}, "required": [
        "title", "day", "guests", "size"]}
    arguments = fill_arguments(schema, '请预订 "生日会 🎂"，2025-05-05，12 位客人，large，note "无坚果"')
    assert arguments == {"title": "生日会 🎂", "day": "2025-05-05", "guests": 12, "size": "large", "note": "无坚果"}


def test_an_optional_property_is_left_out_unless_the_question_names_it() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}},
              "required": ["q"]}
    assert fill_arguments(schema, 'search "cats"') == {"q": "cats"}
    assert fill_arguments(schema, 'search "cats", limit 5') == {"q": "cats", "limit": 5}
