"""The diff's command line: ``engine-acceptance diff BASE NEW [options]``.

    engine-acceptance diff run-bundle-0.32/ run-bundle-0.33/ --markdown=diff.md --fail-on=regression
    python -m engine_acceptance.diff BASE NEW --tolerance=10 --tolerance=ttft=15,tpot=15

Prints the terminal table; ``--markdown``, ``--html`` and ``--json`` also write those
formats. Exit codes: 0 nothing the ``--fail-on`` condition names, 1 it holds, 2 a usage
error (an option, or a bundle missing, not JSON or of another format version).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from engine_acceptance.diff.bundle import BundleError, read_bundle
from engine_acceptance.diff.compare_runs import (
    CHANGE,
    DEFAULT_TOLERANCE,
    IMPROVEMENT,
    REGRESSION,
    TOLERANCE_FAMILIES,
    DiffReport,
    Tolerances,
    bundle_tolerances,
    compare_bundles,
)
from engine_acceptance.diff.render import json_text, render_html, render_markdown, render_terminal

__all__ = ["FAIL_ON", "EXIT_CHANGED", "EXIT_USAGE", "fails", "main", "parse_args"]

EXIT_CHANGED = 1
EXIT_USAGE = 2
# What makes the diff exit 1: a regression (the default), any change at all, or nothing.
FAIL_ON = {
    "regression": (REGRESSION,),
    "any-change": (REGRESSION, IMPROVEMENT, CHANGE),
    "never": (),
}


def _percent(text: str, what: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what}{text!r} is not a percentage") from None
    if not 0 <= value < 1000:
        raise argparse.ArgumentTypeError(f"{what}{text!r} must be a percentage from 0 to 1000")
    return value / 100


def _tolerance(text: str) -> dict[str, float]:
    """``10`` (every metric) -> {"*": 0.1}; ``ttft=10,tpot=15`` -> {"ttft": 0.1, "tpot": 0.15}."""
    if "=" not in text:
        return {"*": _percent(text, "")}
    values = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in TOLERANCE_FAMILIES:
            raise argparse.ArgumentTypeError(f"unknown metric {name!r} (one of "
                                             f"{', '.join(TOLERANCE_FAMILIES)})")
        values[name] = _percent(value, f"{name}: ")
    return values


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="engine-acceptance diff",
        description="What changed between two stored runs (their run bundles): verdict and capabilities, checks, "
                    "performance with 95% intervals, rates. See docs/diff.md.")
    command.add_argument("base", metavar="BASE", help="The earlier run: its bundle folder (run-bundle/) or run.json")
    command.add_argument("new", metavar="NEW", help="The run to judge against BASE: its bundle folder or run.json")
    command.add_argument("--tolerance", action="append", type=_tolerance, default=[], metavar="PCT|METRIC=PCT,...",
                         help="Relative change (percent) a performance change must exceed to be significant: one value "
                              "for every metric, or per metric (ttft, also the first reasoning and content token; tpot, "
                              "e2e, itl, tokens: reasoning and content tokens per request; throughput: output tok/s and "
                              "requests/s); "
                              "repeatable. Default: the NEW run's model profile's diff_tolerances, else "
                              f"{100 * DEFAULT_TOLERANCE:g}%%")
    command.add_argument("--fail-on", choices=tuple(FAIL_ON), default="regression",
                         help="Exit 1 when the diff finds a regression (default), any change, or never")
    command.add_argument("--markdown", type=Path, metavar="PATH", help="Also write the diff as Markdown (a CI job "
                                                                           "summary or pull-request comment)")
    command.add_argument("--html", type=Path, metavar="PATH", help="Also write the diff as an HTML page with charts")
    command.add_argument("--json", type=Path, metavar="PATH", help="Also write the diff as JSON")
    command.add_argument("--all", action="store_true", dest="everything",
                         help="List every comparison in the terminal, not only the significant ones")
    command.add_argument("--seed", type=int, default=0, help="Seed of the bootstrap (default 0: the same bundles "
                                                             "give the same intervals)")
    return command


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    return parser().parse_args(list(argv))


def tolerances_of(given: Sequence[dict[str, float]], from_bundle: dict[str, float]) -> Tolerances:
    """The user's --tolerance values (the last one for every metric wins) over the NEW run's own."""
    per_metric = {name: value for values in given for name, value in values.items() if name != "*"}
    every = [values["*"] for values in given if "*" in values]
    return Tolerances(per_metric, every[-1] if every else None, from_bundle)


def fails(report: DiffReport, fail_on: str) -> bool:
    """Whether the ``--fail-on`` condition holds for the report."""
    return any(finding.kind in FAIL_ON[fail_on] for finding in report.findings)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        base, new = read_bundle(arguments.base), read_bundle(arguments.new)
    except BundleError as error:
        print(f"engine-acceptance diff: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    report = compare_bundles(base, new, tolerances=tolerances_of(arguments.tolerance, bundle_tolerances(new)),
                             seed=arguments.seed)
    sys.stdout.write(render_terminal(report, everything=arguments.everything))
    try:
        for path, render in ((arguments.markdown, render_markdown), (arguments.html, render_html),
                             (arguments.json, json_text)):
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(render(report), encoding="utf-8")
                print(f"wrote {path}")
    except OSError as error:
        print(f"engine-acceptance diff: error: cannot write {error.filename}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    failing = fails(report, arguments.fail_on)
    if failing:
        print(f"--fail-on={arguments.fail_on}: exit {EXIT_CHANGED}")
    return EXIT_CHANGED if failing else 0
