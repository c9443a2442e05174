"""Arguments that fit a tool's JSON schema, filled from what the question says.

The reference model calls tools whose parameters can be any shape a parser meets in
the field: nested objects, arrays with ``minItems``, enums, ``anyOf``/``oneOf``,
``$ref`` into ``$defs``, nullable types, bounded numbers, dates. An honest model
takes the values from the question: a quoted value (``"..."``, ``“...”``, ``「...」``,
``『...』``, ``《...》``) fills the next free-text string, in the order the schema lists
them, so Chinese, Japanese and emoji reach the arguments as sent; numbers, dates and
enum values the question mentions are used where they fit. Whatever the question
does not say is made up to fit: a bound, the first enum value, the first branch of
an ``anyOf`` that validates. Optional properties are filled when the question names
them.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Mapping
from typing import Any

import jsonschema

__all__ = ["fill_arguments", "mentions"]

_QUOTED = re.compile(r'"([^"\n]+)"|“([^”\n]+)”|「([^」\n]+)」|『([^』\n]+)』|《([^》\n]+)》')
_DATE_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:\d{2})?")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
# ASCII neighbours only: next to a CJK character (3晚, 第2) a number still counts.
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])-?\d+(?:\.\d+)?(?![A-Za-z0-9_])")
_DEFAULT_DATE = "2025-06-01"
# Past this nesting depth only what is required is filled, so a recursive $ref ends.
_DEEPEST = 8
_DEFAULT_DATE_TIME = "2025-06-01T09:00:00Z"


def mentions(text: str, word: str) -> bool:
    """Whether `text` names `word` (case-insensitive; as a whole word where ASCII letters touch it)."""
    if not word:
        return False
    pattern = r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])"
    return re.search(pattern, text, re.IGNORECASE) is not None


def _named(text: str, name: str) -> bool:
    return mentions(text, name) or mentions(text, name.replace("_", " "))


class _Filler:
    """One call's worth of values; quotes and numbers are used up in schema order."""

    def __init__(self, root: Mapping[str, Any], question: str, places: Mapping[str, str]) -> None:
        self.root = root
        self.question = question
        self.places = places
        self.quotes: deque[str] = deque(next(g for g in m.groups() if g) for m in _QUOTED.finditer(question))
        bare = _DATE.sub(" ", _DATE_TIME.sub(" ", _QUOTED.sub(" ", question)))
        self.numbers: deque[str] = deque(_NUMBER.findall(bare))
        self.dates: deque[str] = deque(_DATE.findall(_DATE_TIME.sub(" ", question)))
        self.date_times: deque[str] = deque(_DATE_TIME.findall(question))
        self.used_enum_values: set[str] = set()
        self.depth = 0

    # --- state, so a branch of anyOf that does not fit gives back what it took ---------

    def _snapshot(self) -> tuple[Any, ...]:
        return (deque(self.quotes), deque(self.numbers), deque(self.dates), deque(self.date_times),
                set(self.used_enum_values))

    def _restore(self, state: tuple[Any, ...]) -> None:
        self.quotes, self.numbers, self.dates, self.date_times, self.used_enum_values = state

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        seen = 0
        while isinstance(schema.get("$ref"), str) and seen < 32:
            pointer = schema["$ref"]
            if not pointer.startswith("#/"):
                return {}
            target: Any = self.root
            for part in pointer[2:].split("/"):
                target = target.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(target, Mapping) \
                    else {}
            schema = target if isinstance(target, Mapping) else {}
            seen += 1
        return schema

    def _fits(self, schema: Mapping[str, Any], value: Any) -> bool:
        # The node is checked with the root's definitions beside it, so its $refs resolve.
        document = {**schema}
        for key in ("$defs", "definitions"):
            if key in self.root and key not in document:
                document[key] = self.root[key]
        validator = jsonschema.validators.validator_for(self.root)(document)
        return validator.is_valid(value)

    # --- values ----------------------------------------------------------------------

    def value(self, schema: Mapping[str, Any], name: str = "", index: int = 0) -> Any:
        schema = self._resolve(schema)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self._enum(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if isinstance(schema.get(key), list) and schema[key]:
                return self._branch(schema, schema[key], name, index)
        if isinstance(schema.get("allOf"), list) and schema["allOf"]:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged.update(self._resolve(part))
            return self.value(merged, name, index)
        kind = self._type(schema)
        if kind in ("object", "array"):
            self.depth += 1
            try:
                return self._object(schema) if kind == "object" else self._array(schema, name)
            finally:
                self.depth -= 1
        if kind in ("integer", "number"):
            return self._number(schema, integer=kind == "integer", index=index)
        if kind == "boolean":
            return _named(self.question, name) if name else False
        if kind == "null":
            return None
        return self._string(schema, name, index)

    @staticmethod
    def _type(schema: Mapping[str, Any]) -> str:
        declared = schema.get("type")
        if isinstance(declared, list):
            # Nullable (["string", "null"]): a value is more useful than null.
            real = [t for t in declared if t != "null"]
            return real[0] if real else "null"
        if isinstance(declared, str):
            return declared
        if "properties" in schema:
            return "object"
        if "items" in schema:
            return "array"
        return "string"

    def _branch(self, schema: Mapping[str, Any], branches: list[Any], name: str, index: int) -> Any:
        # The first branch that fits and takes a value the question says (a quoted order code
        # goes to the string branch, a number to the integer one); else the first that fits.
        rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
        start = self._snapshot()
        fitting: tuple[Any, tuple[Any, ...]] | None = None
        first: Any = None
        for number, branch in enumerate(branches):
            self._restore(_copy(start))
            candidate = self.value({**rest, **self._resolve(branch)}, name, index)
            if number == 0:
                first = candidate
            if self._fits(schema, candidate):
                after = self._snapshot()
                if _took_something(start, after):
                    return candidate
                if fitting is None:
                    fitting = (candidate, after)
        if fitting is not None:
            self._restore(fitting[1])
            return fitting[0]
        return first

    def _enum(self, values: list[Any]) -> Any:
        mentioned = sorted(
            ((match.start(), position, value) for position, value in enumerate(values)
             for match in [re.search(r"(?<![A-Za-z0-9_])" + re.escape(str(value)) + r"(?![A-Za-z0-9_])",
                                     self.question, re.IGNORECASE)] if match),
            key=lambda found: (found[0], found[1]))
        fresh = [value for _, _, value in mentioned if str(value) not in self.used_enum_values]
        chosen = fresh[0] if fresh else (mentioned[0][2] if mentioned else values[0])
        self.used_enum_values.add(str(chosen))
        return chosen

    def _object(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        out: dict[str, Any] = {}
        for name, subschema in properties.items():
            optional_wanted = self.depth <= _DEEPEST and (_named(self.question, name) or name in self.places)
            if name in required or optional_wanted:
                out[name] = self.value(subschema if isinstance(subschema, Mapping) else {}, name)
        return out

    def _array(self, schema: Mapping[str, Any], name: str) -> list[Any]:
        items = self._resolve(schema["items"]) if isinstance(schema.get("items"), Mapping) else {}
        low = int(schema.get("minItems", 1))
        high = schema.get("maxItems")
        count = max(low, 1)
        plain = not {"enum", "const", "format", "anyOf", "oneOf"} & items.keys()
        # A list the question spells out ("a", "b" and "c"; 3, 8 and 15) is taken whole.
        said = {"string": len(self.quotes), "integer": len(self.numbers), "number": len(self.numbers)}
        if plain:
            count = max(count, said.get(self._type(items), 0))
        if self.depth > _DEEPEST:
            count = int(schema.get("minItems", 0))  # a recursive schema ends where it may
        if isinstance(high, int):
            count = min(count, high)
        return [self.value(items, name, index) for index in range(count)]

    def _number(self, schema: Mapping[str, Any], *, integer: bool, index: int) -> int | float:
        low = schema.get("minimum")
        if "exclusiveMinimum" in schema:
            low = schema["exclusiveMinimum"] + (1 if integer else 0.5)
        high = schema.get("maximum")
        if "exclusiveMaximum" in schema:
            high = schema["exclusiveMaximum"] - (1 if integer else 0.5)
        step = schema.get("multipleOf")

        def fits(value: float) -> bool:
            return (low is None or value >= low) and (high is None or value <= high) \
                and (not step or (value / step) == int(value / step)) and (not integer or value == int(value))

        if self.numbers:
            said = float(self.numbers.popleft())
            # A number that does not fit this parameter is not used: one is made up instead.
            if fits(said):
                return int(said) if integer or said == int(said) else said
        value: float = (low if low is not None else 1) + index
        if high is not None and value > high:
            value = high if low is None else max(low, high)
        if step:
            value = step * -(-value // step)
        return int(value) if integer else value

    def _string(self, schema: Mapping[str, Any], name: str, index: int) -> str:
        form = schema.get("format")
        if form == "date":
            return self.dates.popleft() if self.dates else _DEFAULT_DATE
        if form == "date-time":
            return self.date_times.popleft() if self.date_times else _DEFAULT_DATE_TIME
        if name in self.places:
            text = self.places[name]
        elif self.quotes:
            text = self.quotes.popleft()
        else:
            text = f"{name or 'value'}-{index + 1}" if index else (name or "value")
        low, high = int(schema.get("minLength", 0)), schema.get("maxLength")
        if len(text) < low:
            text += "x" * (low - len(text))
        if isinstance(high, int):
            text = text[:high]
        return text


def _copy(state: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(type(part)(part) for part in state)


def _took_something(before: tuple[Any, ...], after: tuple[Any, ...]) -> bool:
    """Whether a quote, number or date was used up, or an enum value the question mentions chosen."""
    return any(len(a) != len(b) for a, b in zip(before, after))


def fill_arguments(parameters: Mapping[str, Any], question: str, places: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Arguments for a tool with these ``parameters`` that fit them, taken from ``question`` where it says them.

    ``places`` fixes the value of named parameters (the place a parallel call is for).
    """
    filler = _Filler(parameters, question, places or {})
    value = filler.value(parameters)
    return value if isinstance(value, dict) else {}
