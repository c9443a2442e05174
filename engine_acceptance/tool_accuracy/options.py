"""The tool-accuracy options: the trigger baseline to gate on or to record, and a sample of the set.

Declared here, registered by ``pytest_plugin/options.py`` (see :mod:`engine_acceptance.option_spec`);
:func:`from_options` checks what depends on more than one of them or on the files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_acceptance.errors import UsageError
from engine_acceptance.option_spec import OptionSpec, whole_number_at_least_one

__all__ = ["OPTIONS", "ToolAccuracyOptions", "cases_to_send", "from_options"]


def cases_to_send(raw: str) -> int:
    """N, the tool-accuracy cases to send: a whole number, at least 1."""
    return whole_number_at_least_one(raw, "cases", "a sample")


OPTIONS = (
    OptionSpec("--tool-baseline", default=None, metavar="FILE",
               help="Gate tool-call triggers on this baseline, recorded from a trusted deployment with "
                    "--record-tool-baseline (default: the trigger check skips, saying so)"),
    OptionSpec("--record-tool-baseline", default=None, metavar="FILE",
               help="Record this deployment's tool-accuracy run as a baseline for others (run it on the trusted "
                    "one)"),
    OptionSpec("--tool-accuracy-cases", type=cases_to_send, default=None, metavar="N",
               help="Send N cases of the tool-accuracy set, picked evenly from each of its shapes, instead of all of "
                    "them; said in the verdict as a shortfall (default: the whole set)"),
)


@dataclass(frozen=True)
class ToolAccuracyOptions:
    """The baseline files (relative paths resolved) and the sample size; None where not given."""

    baseline: Path | None
    record_baseline: Path | None
    cases: int | None


def from_options(values: Any, here: Path) -> ToolAccuracyOptions:
    """--tool-baseline must exist and differ from --record-tool-baseline; both relative to ``here``,
    the directory pytest was invoked from. A bad combination is a UsageError naming the options."""
    use, record = (Path(here, value) if value else None
                   for value in (values.tool_baseline, values.record_tool_baseline))
    if use is not None and not use.is_file():
        raise UsageError(f"--tool-baseline: {use} is not a file (record one with --record-tool-baseline on the "
                         "trusted deployment)")
    if use is not None and record is not None and use.resolve() == record.resolve():
        raise UsageError("--tool-baseline and --record-tool-baseline name the same file: a run cannot gate on the "
                         "baseline it overwrites")
    if record is not None and record.is_dir():
        raise UsageError(f"--record-tool-baseline: {record} is a folder; name the baseline file")
    if record is not None and values.tool_accuracy_cases is not None:
        raise UsageError(f"--record-tool-baseline with --tool-accuracy-cases={values.tool_accuracy_cases}: a "
                         "baseline is recorded from the whole set, so that any sample compares with it case by case")
    return ToolAccuracyOptions(use, record, values.tool_accuracy_cases)
