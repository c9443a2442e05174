"""Recall cases: which prompts the long-context checks build, and what a run of one kept.

Plain data and functions used by the recall checks (``tests/test_recall.py``) and their
fixtures (``fixtures/recall.py``): seed 001's field extraction at each depth and key, and
seed 000's three codes in the longest prompt the engine takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


from engine_acceptance.recall.haystack import Haystack, Needle, RecallBudget, make_code
from engine_acceptance.resources import read_yaml, suite_path
from engine_acceptance.wire.types import Exchange
from engine_acceptance.wire.token_count import TokenEstimate, uncounted

__all__ = ["ESTIMATE_MARGIN", "FIELD_KEYS", "RECALL_PROMPTS", "UNCALIBRATED", "RecallCase", "RecallRun",
           "field_case", "field_cases", "field_prefix", "million_case", "no_count_reason"]



def no_count_reason(no_tokenize: str) -> str:
    """Why the token-accounting checks skip when nothing can count tokens."""
    return f"{uncounted(no_tokenize)}: the engine's count cannot be checked"

# An estimated length may be off by this much: kept below the engine's limit by as much.
ESTIMATE_MARGIN = 0.02
# Tokens per character assumed for the Chinese filler when the engine reports no usage.
UNCALIBRATED = TokenEstimate(1.0, 0, False, "uncalibrated: one token per character of Chinese prose assumed")

# Read at import: the field-extraction checks are parametrized by its depths and keys.
RECALL_PROMPTS: dict[str, Any] = read_yaml(suite_path("fixtures", "prompts", "recall.yaml"))
FIELD_KEYS: list[tuple[float, int]] = [
    (depth, key)
    for depth in RECALL_PROMPTS["field_extraction"]["depths"]
    for key in range(1, RECALL_PROMPTS["field_extraction"]["keys_per_depth"] + 1)
]


@dataclass(frozen=True)
class RecallCase:
    """One recall prompt to build: its name, length, text around the document, needles."""

    name: str
    target_tokens: int
    before: str
    after: str
    needles: tuple[Needle, ...]
    max_tokens: int
    # Set when the engine advertises less context than the model profile declares and this
    # prompt needs more than the engine takes: the check fails with it (RecallBudget.shortfall).
    shortfall: str | None = None


@dataclass
class RecallRun:
    """A built prompt and the engine's streamed reply to it."""

    case: RecallCase
    haystack: Haystack
    exchange: Exchange

    @property
    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.haystack.text}]

    @property
    def usage_prompt_tokens(self) -> int | None:
        reply = self.exchange.reply
        usage = reply.usage.prompt_tokens if reply is not None and reply.usage is not None else None
        return usage if isinstance(usage, int) else None

    @property
    def ttft_s(self) -> float | None:
        reply = self.exchange.reply
        return reply.first_output_time if reply is not None else None

    @property
    def e2e_s(self) -> float | None:
        return self.exchange.elapsed_s

    def timing(self) -> dict[str, Any]:
        return {"prompt_tokens_built": self.haystack.tokens, "prompt_tokens_exact": self.haystack.exact,
                "prompt_tokens_usage": self.usage_prompt_tokens, "build_s": round(self.haystack.build_s, 3),
                "ttft_s": _round(self.ttft_s), "e2e_s": _round(self.e2e_s)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _field_needles(prompts: dict[str, Any]) -> tuple[Needle, ...]:
    spec = prompts["field_extraction"]
    return tuple(
        Needle(code, depth, prompts["needle"].format(code=code))
        for depth in spec["depths"]
        for key in range(1, spec["keys_per_depth"] + 1)
        for code in [make_code(prompts["code_word"], depth, key, prompts["seed"])]
    )


def field_case(prompts: dict[str, Any], budget: RecallBudget, prefix: str) -> RecallCase:
    """Seed 001's explicit field extraction: one key asked for by its prefix (or the control)."""
    spec = prompts["field_extraction"]
    short = budget.shortfall if budget.shortfall and spec["target_tokens"] > budget.tokens else None
    return RecallCase(
        name=f"field {prefix}",
        target_tokens=min(spec["target_tokens"], budget.tokens),
        before=spec["preamble"] + "\n<document>\n",
        after="</document>\n" + spec["question"].format(prefix=prefix),
        needles=_field_needles(prompts),
        max_tokens=spec["max_tokens"],
        shortfall=short and f"{short}: the {spec['target_tokens']:,}-token field extraction does not fit",
    )


def field_cases(prompts: dict[str, Any], budget: RecallBudget) -> tuple[RecallCase, ...]:
    """Every field-extraction prompt of a run: one per key, and the control."""
    prefixes = [field_prefix(prompts, depth, key) for depth, key in FIELD_KEYS]
    return tuple(field_case(prompts, budget, prefix)
                 for prefix in [*prefixes, prompts["field_extraction"]["control_prefix"]])


def field_prefix(prompts: dict[str, Any], depth: float, key: int) -> str:
    return make_code(prompts["code_word"], depth, key, prompts["seed"]).rsplit("-", 1)[0]


def million_case(prompts: dict[str, Any], budget: RecallBudget) -> RecallCase:
    """Seed 000: three independent codes at 10/50/90% of the longest prompt the engine takes."""
    spec = prompts["million"]
    needles = tuple(Needle(code, depth, prompts["needle"].format(code=code))
                    for depth in spec["depths"]
                    for code in [make_code(prompts["code_word"], depth, 1, prompts["seed"])])
    return RecallCase(
        name="million",
        target_tokens=budget.tokens,
        before=spec["preamble"] + "\n<document>\n",
        after="</document>\n" + spec["question"].format(count=len(needles)),
        needles=needles,
        max_tokens=spec["max_tokens"],
        shortfall=budget.shortfall and f"{budget.shortfall}: the million-token check needs the declared context",
    )
