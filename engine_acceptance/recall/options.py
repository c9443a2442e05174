"""The long-context recall options: the prompt length and how many field-extraction prompts fly at once.

Declared here, registered by ``pytest_plugin/options.py`` (see :mod:`engine_acceptance.option_spec`).
"""

from __future__ import annotations

import argparse

from engine_acceptance.option_spec import OptionSpec, whole_number_at_least_one

__all__ = ["OPTIONS", "prompts_at_once", "whole_tokens"]


def whole_tokens(raw: str) -> int:
    """A token count; ``1_000_000`` is accepted as written."""
    # Imported when a value is read, not when pytest --help registers the option.
    from engine_acceptance.recall.haystack import MIN_RECALL_TOKENS

    try:
        tokens = int(raw.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a whole number of tokens") from None
    if tokens < MIN_RECALL_TOKENS:
        raise argparse.ArgumentTypeError(f"{raw!r} is below the minimum of {MIN_RECALL_TOKENS} tokens")
    return tokens


def prompts_at_once(raw: str) -> int:
    """N, the recall prompts in flight at once: a whole number, at least 1."""
    return whole_number_at_least_one(raw, "prompts", "sending")


OPTIONS = (
    OptionSpec("--recall-tokens", type=whole_tokens, default=None, metavar="N",
               help="Recall prompt length in tokens (default: the model profile's context length, else the engine's "
                    "max_model_len, minus room for the answer; an engine advertising less than the profile declares "
                    "fails the long-context checks unless this asks for less)"),
    OptionSpec("--recall-concurrency", type=prompts_at_once, default=1, metavar="N",
               help="The field-extraction prompts (one document, ten questions) sent N at a time instead of one after "
                    "another, for an engine that batches its decoding; their TTFT and E2E are then not alone "
                    "(default: 1)"),
)
