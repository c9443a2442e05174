"""Two run bundles compared: the findings, in the order a release engineer reads them.

1. **Verdict and capabilities**: the gate (pass -> fail), new and cleared gate failures, a
   capability served before and not served or broken now, a required capability that fails
   now, records that went stale (the defect is *fixed*), and new known-defect records.
2. **Checks** whose outcome changed (passed -> failed, known defect -> passed, newly skipped
   and why) and checks only one run has.
3. **Performance**, per load cell and metric: TTFT/TPOT/E2E/ITL percentiles, the first
   reasoning and the first content token's percentiles (chat cells), reasoning and content
   tokens per request, the cached share of the prompt tokens, throughput per round and the
   cell's other figures, each with its change, 95% interval and significance.
4. **Rates** (k of n: attainment, speculative-decoding acceptance among them) and tool-call F1,
   with change and interval.

Only what matches is compared: checks by id, rates by check and name, cells by workload and
key and only when their ``shape`` and ``request_set`` are equal (the same requests were
sent). Everything else is listed as *not compared*, with why. A performance change is
*significant* only when its interval excludes zero and it exceeds the metric's tolerance;
a rate's, and the cached share's, when its interval excludes zero. Token counts are what the
model did, neither better nor worse: a significant change of them is a *change*. Noise is not
news: a change that is not significant is ``unchanged``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine_acceptance.diff.bundle import Bundle
from engine_acceptance.diff.statistics import (
    PERCENTILES,
    RESAMPLES,
    Interval,
    f1_difference,
    f1_score,
    mean_change,
    newcombe_difference,
    percentile_change,
    rounds_change,
    share_difference,
)

__all__ = ["DEFAULT_TOLERANCE", "KINDS", "SECTIONS", "DiffReport", "Finding", "NotCompared", "Tolerances",
           "TOLERANCE_FAMILIES", "bundle_tolerances", "compare_bundles", "higher_is_better"]

# A relative change below 5% is not reported as significant unless a tolerance says otherwise.
DEFAULT_TOLERANCE = 0.05
# In reading order; each finding belongs to one.
VERDICT, CHECKS, PERFORMANCE, RATES = "verdict", "checks", "performance", "rates"
SECTIONS = (VERDICT, CHECKS, PERFORMANCE, RATES)
# What a finding is, worst first: the order within a section.
REGRESSION, IMPROVEMENT, CHANGE, UNCHANGED = "regression", "improvement", "change", "unchanged"
KINDS = (REGRESSION, IMPROVEMENT, CHANGE, UNCHANGED)

# Per-request samples the cells carry, with the name a tolerance is given under. The first reasoning and the
# first content token are times to a first token, of a part of the output: TTFT's tolerance applies.
SAMPLE_METRICS = {"ttft_ms": ("ttft", "TTFT"), "tpot_ms": ("tpot", "TPOT"), "e2e_ms": ("e2e", "E2E"),
                  "itl_ms": ("itl", "ITL"), "first_reasoning_ms": ("ttft", "first reasoning token"),
                  "first_content_ms": ("ttft", "first content token")}
# Per-request token counts, compared by their mean per request.
TOKENS = "tokens"
COUNT_METRICS = {"reasoning_tokens": "reasoning tokens/request", "content_tokens": "content tokens/request"}
# The cached share: the cached tokens over the prompt tokens of the same requests (run_bundle samples).
CACHED_SHARE = ("cached_tokens", "cached_of_prompt_tokens", "cached share of prompt tokens")
ROUND_METRICS = {"output_tok_s": "output tok/s", "request_per_s": "requests/s"}
# The figures of the output split a cell has only where its engine or its replies gave them.
_SPLIT_LABELS = {"first_reasoning_ms": "first reasoning token", "first_content_ms": "first content token",
                 **COUNT_METRICS, CACHED_SHARE[0]: CACHED_SHARE[2]}
# The tolerance families (the model profile's diff_tolerances keys, --tolerance METRIC=PCT): each
# sample metric's own, "tokens" for the token counts and "throughput" for the per-round figures. A
# cell's single figures (goodput) have no interval and so are never significant: no tolerance applies.
THROUGHPUT = "throughput"
TOLERANCE_FAMILIES = (*dict.fromkeys(family for family, _ in SAMPLE_METRICS.values()), TOKENS, THROUGHPUT)
# The rate a load cell's speculative-decoding acceptance is recorded under (load/output_split.py).
ACCEPTANCE_RATE = "spec_decode_acceptance["
# A tool-call trigger confusion's counts, in the order statistics.f1_difference takes them.
CONFUSION_FIELDS = ("both_called", "only_candidate_called", "only_reference_called", "neither_called")
# Why two runs' throughput requests differ most often: the prompts' kind or origin (token ids from the
# engine's /tokenize or a local tokenizer, or text of an estimated length).
_REQUEST_SET_HINT = {"throughput": "; the prompts were made another way (token ids from /tokenize, a local tokenizer "
                            "or estimated text)"}
# Engine facts that differ between any two runs and say nothing about what was tested: the URL
# (a port), and timings (names ending in _s: how long readiness or discovery took).
_VOLATILE_FACTS = frozenset({"engine.url"})
# Options that say only where a run wrote its files (its value may follow as the next argument).
_OUTPUT_OPTIONS = frozenset({"--run-bundle", "--gate-json", "--alluredir", "--clean-alluredir", "--junitxml",
                             "--junit-xml", "--throughput-out", "--throughput-save"})
# Capability states that mean the deployment serves it (discovery's words).
SERVED = "served"
NOT_SERVING = ("not_served", "broken")
# Outcomes a check ends in (gate.json's words) whose change section 1 reports, not section 2.
STALE, KNOWN, PASSED, FAILED, SKIPPED = "stale_record", "known_defect", "passed", "failed", "skipped"


@dataclass(frozen=True)
class Finding:
    """One thing that changed (or, for performance and rates, was compared and did not)."""

    section: str
    kind: str
    # What changed: "gate", "capability tools", a check id, "throughput 128/128@1".
    subject: str
    # Which of its figures: "outcome", "P95 TTFT", "output tok/s", a rate's name.
    metric: str
    base: str
    new: str
    # The change (relative for performance, a difference for rates and F1) and its 95% interval.
    change: float | None = None
    low: float | None = None
    high: float | None = None
    # "relative", "difference" (a rate's share), or "" for a change of state.
    unit: str = ""
    significant: bool = False
    tolerance: float | None = None
    # Why it is (not) significant, what the interval rests on, a skip's reason.
    note: str = ""
    # Where the figure came from, for a chart: the cell's workload and key, and the sample or round metric.
    source: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotCompared:
    """Something one run has that could not be compared with the other, and why."""

    what: str
    why: str


@dataclass(frozen=True)
class DiffReport:
    """The whole diff: both runs, the findings in reading order, and what was not compared."""

    base: Bundle
    new: Bundle
    findings: tuple[Finding, ...]
    not_compared: tuple[NotCompared, ...]
    # Lines saying what the diff used: tolerances and where they came from, the seed, context.
    notes: tuple[str, ...] = ()

    def of(self, section: str) -> list[Finding]:
        return [finding for finding in self.findings if finding.section == section]

    def count(self, kind: str) -> int:
        return sum(finding.kind == kind for finding in self.findings)


@dataclass(frozen=True)
class Tolerances:
    """The relative change a performance metric must exceed to be significant, and where it came from.

    The user's per-metric values win, then the user's value for every metric, then the NEW
    run's per-metric tolerances (its model profile's ``diff_tolerances``), then its ``default``,
    then :data:`DEFAULT_TOLERANCE`.
    """

    user: Mapping[str, float] = field(default_factory=dict)
    user_default: float | None = None
    bundle: Mapping[str, float] = field(default_factory=dict)

    def of(self, metric: str) -> tuple[float, str]:
        """The tolerance of a metric family (ttft, tpot, e2e, itl, throughput) and where it came from."""
        if metric in self.user:
            return self.user[metric], "--tolerance"
        if self.user_default is not None:
            return self.user_default, "--tolerance"
        if metric in self.bundle:
            return self.bundle[metric], "NEW run's model profile"
        if "default" in self.bundle:
            return self.bundle["default"], "NEW run's model profile"
        return DEFAULT_TOLERANCE, "the diff's default"


def _ordered(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Sections in reading order, worst kind first within each; otherwise in the order found."""
    return tuple(sorted(findings, key=lambda f: (SECTIONS.index(f.section), KINDS.index(f.kind))))


def compare_bundles(base: Bundle, new: Bundle, *, tolerances: Tolerances | None = None, seed: int = 0) -> DiffReport:
    """Every finding between ``base`` and ``new``, and what could not be compared."""
    if tolerances is None:
        tolerances = Tolerances(bundle=bundle_tolerances(new))
    not_compared: list[NotCompared] = []
    notes: list[str] = []
    if base.suite_version != new.suite_version:
        not_compared.append(NotCompared(
            "suite version", f"BASE ran suite {base.suite_version}, NEW ran {new.suite_version}: checks are compared "
                             f"by id and cells only where the same requests were sent, but a check of the same id may "
                             f"test something else now"))
    for run, bundle in (("BASE", base), ("NEW", new)):
        stopped = bundle.section("verdict").get("interrupted") or bundle.section("verdict").get("engine_unavailable")
        if stopped:
            notes.append(f"The {run} run did not finish ({stopped}): what it did not run is not compared.")
    notes += _context_notes(base, new)
    notes.append(_tolerance_note(tolerances))
    notes.append(f"Intervals: 95%; performance and F1 by bootstrap ({RESAMPLES} resamples, seed {seed}), rates by "
                 f"Newcombe's hybrid score interval.")
    if any(str(rate.get("name", "")).startswith(ACCEPTANCE_RATE) for bundle in (base, new)
           for rate in bundle.section("rates")):
        notes.append("Speculative-decoding acceptance is a rate of draft tokens, and the tokens of one draft are not "
                     "independent trials: its interval is narrower than a rerun would scatter it.")
    findings = [*_verdict_findings(base, new), *_check_findings(base, new),
                *_cell_findings(base, new, tolerances, seed, not_compared),
                *_rate_findings(base, new, seed, not_compared)]
    return DiffReport(base, new, _ordered(findings), tuple(not_compared), tuple(notes))


def _context_notes(base: Bundle, new: Bundle) -> list[str]:
    """What differs in who was tested and how: engine facts, profiles (by hash), the command line."""
    notes = []
    base_engine, new_engine = base.section("engine"), new.section("engine")
    facts = [f"{key} {base_engine.get(key, '-')} -> {new_engine.get(key, '-')}"
             for key in dict.fromkeys([*base_engine, *new_engine])
             if not _volatile(key) and base_engine.get(key) != new_engine.get(key)]
    if facts:
        notes.append("Engine: " + "; ".join(facts) + ".")
    base_profiles, new_profiles = base.section("profiles"), new.section("profiles")
    for kind in dict.fromkeys([*base_profiles, *new_profiles]):
        before, after = base_profiles.get(kind) or {}, new_profiles.get(kind) or {}
        if (before.get("name"), before.get("sha256")) != (after.get("name"), after.get("sha256")):
            notes.append(f"The {kind} profile differs: {before.get('name', '-')} "
                         f"({str(before.get('sha256') or '-')[:12]}) -> {after.get('name', '-')} "
                         f"({str(after.get('sha256') or '-')[:12]}).")
    base_seeds, new_seeds = _prompt_seeds(base), _prompt_seeds(new)
    if base_seeds and new_seeds and base_seeds != new_seeds:
        notes.append(f"Throughput prompts drawn with other seeds (BASE {', '.join(map(str, sorted(base_seeds)))}, "
                     f"NEW {', '.join(map(str, sorted(new_seeds)))}): the same lengths from the same corpus, not the "
                     f"same texts; --throughput-seed N in both runs sends identical prompts.")
    base_args, new_args = _what_was_asked(base), _what_was_asked(new)
    only_base = [str(arg) for arg in base_args if arg not in new_args]
    only_new = [str(arg) for arg in new_args if arg not in base_args]
    if only_base or only_new:
        notes.append(f"Command lines differ (where files were written aside): only BASE {' '.join(only_base) or '-'}; "
                     f"only NEW {' '.join(only_new) or '-'}.")
    return notes


def _prompt_seeds(bundle: Bundle) -> set[int]:
    """The seeds the run's throughput prompts were drawn with (random unless --throughput-seed was given)."""
    return {cell["prompt_seed"] for cell in bundle.section("cells") if cell.get("prompt_seed") is not None}


def _volatile(fact: str) -> bool:
    return fact in _VOLATILE_FACTS or fact.endswith("_s")


def _what_was_asked(bundle: Bundle) -> list[str]:
    """The run's command line without the options that only placed its files (and their values)."""
    asked, skip_value = [], False
    for arg in map(str, bundle.section("options").get("args") or ()):
        if skip_value:
            skip_value = False
        elif arg.split("=", 1)[0] in _OUTPUT_OPTIONS:
            skip_value = "=" not in arg and arg != "--clean-alluredir"
        elif asked and not arg.startswith("-") and asked[-1].startswith("-") and "=" not in asked[-1] \
                and " " not in asked[-1]:
            # An option's value given as its own word stays with it: "-p engine_acceptance", "-n 2".
            asked[-1] = f"{asked[-1]} {arg}"
        else:
            asked.append(arg)
    return asked


def _tolerance_note(tolerances: Tolerances) -> str:
    """One line: each tolerance, the metrics it applies to and where it came from."""
    groups: dict[tuple[float, str], list[str]] = {}
    for family in TOLERANCE_FAMILIES:
        groups.setdefault(tolerances.of(family), []).append(family)
    return "Tolerances: " + "; ".join(f"{100 * value:g}% for {', '.join(metrics)} ({source})"
                                      for (value, source), metrics in groups.items()) + "."


def bundle_tolerances(bundle: Bundle) -> dict[str, float]:
    """The run's own tolerances (its model profile's ``diff_tolerances``), the numeric ones."""
    return {str(name): float(value) for name, value in bundle.section("tolerances").items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)}


# --- 1. verdict and capabilities -----------------------------------------------------------

def _verdict_findings(base: Bundle, new: Bundle) -> list[Finding]:
    findings = []
    base_verdict, new_verdict = base.section("verdict"), new.section("verdict")
    base_gate, new_gate = str(base_verdict.get("gate", "?")), str(new_verdict.get("gate", "?"))
    if base_gate != new_gate:
        kind = REGRESSION if new_gate == "fail" else IMPROVEMENT if new_gate == "pass" else CHANGE
        findings.append(Finding(VERDICT, kind, "gate", "verdict", base_gate.upper(), new_gate.upper()))
    base_failures = set(base_verdict.get("gate_failures") or ())
    for failure in new_verdict.get("gate_failures") or ():
        if failure not in base_failures:
            findings.append(Finding(VERDICT, REGRESSION, "gate", "new gate failure", "-", str(failure)))
    new_failures = set(new_verdict.get("gate_failures") or ())
    for failure in base_verdict.get("gate_failures") or ():
        if failure not in new_failures:
            findings.append(Finding(VERDICT, IMPROVEMENT, "gate", "gate failure cleared", str(failure), "-"))
    findings += _capability_findings(base, new)
    base_outcomes = {check["id"]: check for check in base.section("checks")}
    for check in new.section("checks"):
        before = base_outcomes.get(check["id"], {}).get("outcome", "not run")
        if check["outcome"] == STALE and before != STALE:
            findings.append(Finding(VERDICT, IMPROVEMENT, check["id"], "fixed: its record went stale", before, STALE,
                                    note=_reason(check) or "the recorded defect no longer shows; remove its record"))
        elif check["outcome"] == KNOWN and before != KNOWN:
            findings.append(Finding(VERDICT, CHANGE, check["id"], "new known-defect record", before, KNOWN,
                                    note=_reason(check)))
    return findings


def _capability_findings(base: Bundle, new: Bundle) -> list[Finding]:
    findings = []
    base_rows = {row["name"]: row for row in base.section("capabilities") if "name" in row}
    new_rows = {row["name"]: row for row in new.section("capabilities") if "name" in row}
    for name, row in new_rows.items():
        subject = f"capability {name}"
        before = base_rows.get(name)
        if before is None:
            findings.append(Finding(VERDICT, CHANGE, subject, "only in NEW", "-", _capability_state(row)))
            continue
        was, now = str(before.get("discovered", "-")), str(row.get("discovered", "-"))
        if was != now:
            kind = (REGRESSION if was == SERVED and now in NOT_SERVING else
                    IMPROVEMENT if now == SERVED and was in NOT_SERVING else CHANGE)
            findings.append(Finding(VERDICT, kind, subject, "discovered", was, now,
                                    note=str(row.get("evidence") or "")))
        if row.get("required") and (row.get("failed") or 0) > 0 and not (before.get("failed") or 0):
            findings.append(Finding(VERDICT, REGRESSION, subject, "required, now failing",
                                    f"{before.get('failed') or 0} failed", f"{row['failed']} failed"))
        if row.get("coverage_failure") and not before.get("coverage_failure"):
            findings.append(Finding(VERDICT, REGRESSION, subject, "coverage failure", "-",
                                    str(row["coverage_failure"])))
        elif before.get("coverage_failure") and not row.get("coverage_failure"):
            findings.append(Finding(VERDICT, IMPROVEMENT, subject, "coverage failure cleared",
                                    str(before["coverage_failure"]), "-"))
    for name, row in base_rows.items():
        if name not in new_rows:
            findings.append(Finding(VERDICT, CHANGE, f"capability {name}", "only in BASE", _capability_state(row), "-"))
    return findings


def _capability_state(row: Mapping[str, Any]) -> str:
    return f"discovered {row.get('discovered', '-')}, {row.get('result', '?')}"


# --- 2. checks -----------------------------------------------------------------------------

def _reason(check: Mapping[str, Any]) -> str:
    return " ".join(str(check.get("reason") or "").split())[:300]


def _check_findings(base: Bundle, new: Bundle) -> list[Finding]:
    findings = []
    base_checks = {check["id"]: check for check in base.section("checks")}
    new_checks = {check["id"]: check for check in new.section("checks")}
    for check_id, check in new_checks.items():
        now = check["outcome"]
        before_check = base_checks.get(check_id)
        if before_check is None:
            if now not in (STALE, KNOWN):  # section 1 reports the records
                kind = REGRESSION if now == FAILED else CHANGE
                findings.append(Finding(CHECKS, kind, check_id, "only in NEW", "-", now, note=_reason(check)))
            continue
        was = before_check["outcome"]
        if was == now or now in (STALE, KNOWN):  # section 1 reports the records
            continue
        findings.append(Finding(CHECKS, _outcome_kind(was, now), check_id, "outcome", was, now,
                                note=_reason(check) if now != PASSED else ""))
    for check_id, check in base_checks.items():
        if check_id not in new_checks:
            findings.append(Finding(CHECKS, CHANGE, check_id, "only in BASE", check["outcome"], "-"))
    return findings


def _outcome_kind(was: str, now: str) -> str:
    if now == FAILED:
        return REGRESSION
    if now == PASSED and was in (FAILED, KNOWN):
        return IMPROVEMENT
    return CHANGE


# --- 3. performance ------------------------------------------------------------------------

def higher_is_better(metric: str) -> bool:
    """Throughput, goodput and attainment: more is better; latencies: less is better."""
    return any(word in metric for word in ("tok_s", "per_s", "goodput", "rps", "attainment"))


def _cell_findings(base: Bundle, new: Bundle, tolerances: Tolerances, seed: int,
                   not_compared: list[NotCompared]) -> list[Finding]:
    findings = []
    base_cells = {(cell["workload"], cell["key"]): cell for cell in base.section("cells")}
    new_cells = {(cell["workload"], cell["key"]): cell for cell in new.section("cells")}
    for identity, cell in new_cells.items():
        name = f"{identity[0]} {identity[1]}"
        before = base_cells.get(identity)
        if before is None:
            not_compared.append(NotCompared(f"cell {name}", "only in NEW"))
            continue
        if before.get("shape") != cell.get("shape"):
            not_compared.append(NotCompared(f"cell {name}", "a different shape: " + _shape_difference(
                before.get("shape") or {}, cell.get("shape") or {})))
            continue
        if before.get("request_set") != cell.get("request_set"):
            not_compared.append(NotCompared(f"cell {name}", f"the same shape but other requests (request_set "
                                            f"{before.get('request_set')} vs {cell.get('request_set')}: other "
                                            f"prompts or media){_REQUEST_SET_HINT.get(identity[0], '')}"))
            continue
        _one_sided(name, before, cell, not_compared)
        findings += _sample_findings(name, identity, before, cell, tolerances, seed)
        findings += _count_findings(name, identity, before, cell, tolerances, seed)
        findings += _round_findings(name, identity, before, cell, tolerances, seed)
        findings += _figure_findings(name, before, cell)
    for identity in base_cells:
        if identity not in new_cells:
            not_compared.append(NotCompared(f"cell {identity[0]} {identity[1]}", "only in BASE"))
    return findings


def _one_sided(name: str, base: Mapping[str, Any], new: Mapping[str, Any], not_compared: list[NotCompared]) -> None:
    """The output split's figures one run has and the other has not: listed, not compared (a mean of nothing).

    A run has them where its engine reported them (cached tokens) or its replies had them (reasoning).
    """
    base_samples, new_samples = base.get("samples") or {}, new.get("samples") or {}
    for metric, label in _SPLIT_LABELS.items():
        before, after = bool(base_samples.get(metric)), bool(new_samples.get(metric))
        if before != after:
            run, other = ("BASE", "NEW") if before else ("NEW", "BASE")
            not_compared.append(NotCompared(f"{label} of cell {name}", f"only in {run}: no request of {other} had "
                                                                       f"it (not reported by the engine, or no such "
                                                                       f"output)"))


def _shape_difference(base: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    keys = sorted(set(base) | set(new), key=str)
    return ", ".join(f"{key} {base.get(key, '-')} vs {new.get(key, '-')}" for key in keys
                     if base.get(key) != new.get(key))


def _significance(interval: Interval, tolerance: float, better_when_higher: bool) -> tuple[str, bool, str]:
    """The finding's kind, whether significant, and why (not)."""
    if interval.change is None:
        return UNCHANGED, False, interval.basis
    if interval.low is None:
        return UNCHANGED, False, f"not significant: {interval.basis}"
    if not interval.excludes_zero:
        return UNCHANGED, False, f"not significant: the interval covers 0 ({interval.basis})"
    if abs(interval.change) <= tolerance:
        return UNCHANGED, False, f"not significant: within the {100 * tolerance:g}% tolerance ({interval.basis})"
    worse = (interval.change < 0) if better_when_higher else (interval.change > 0)
    return (REGRESSION if worse else IMPROVEMENT), True, interval.basis


def _sample_findings(name: str, identity: tuple[str, str], base: Mapping[str, Any], new: Mapping[str, Any],
                     tolerances: Tolerances, seed: int) -> list[Finding]:
    findings = []
    base_samples, new_samples = base.get("samples") or {}, new.get("samples") or {}
    for metric, (family, label) in SAMPLE_METRICS.items():
        before, after = base_samples.get(metric) or [], new_samples.get(metric) or []
        if (not before and not after) or (metric in _SPLIT_LABELS and not (before and after)):
            continue
        tolerance, _ = tolerances.of(family)
        changes = percentile_change(before, after, seed=seed, name=f"{name} {metric}")
        for q in PERCENTILES:
            interval = changes[q]
            kind, significant, why = _significance(interval, tolerance, better_when_higher=False)
            findings.append(Finding(
                PERFORMANCE, kind, name, f"P{q} {label}", _ms(_percentile(before, q)), _ms(_percentile(after, q)),
                interval.change, interval.low, interval.high, "relative", significant, tolerance, why,
                (identity[0], identity[1], "samples", metric, str(q))))
    return findings


def _count_findings(name: str, identity: tuple[str, str], base: Mapping[str, Any], new: Mapping[str, Any],
                    tolerances: Tolerances, seed: int) -> list[Finding]:
    """Tokens per request (mean, relative change: a change, neither better nor worse) and the cached share."""
    findings = []
    base_samples, new_samples = base.get("samples") or {}, new.get("samples") or {}
    tolerance, _ = tolerances.of(TOKENS)
    for metric, label in COUNT_METRICS.items():
        before, after = base_samples.get(metric) or [], new_samples.get(metric) or []
        if not (before and after):
            continue
        interval = mean_change(before, after, seed=seed, name=f"{name} {metric}")
        kind, significant, why = _significance(interval, tolerance, better_when_higher=False)
        findings.append(Finding(PERFORMANCE, CHANGE if significant else kind, name, label, _mean(before),
                                _mean(after), interval.change, interval.low, interval.high, "relative", significant,
                                tolerance, why, (identity[0], identity[1], "samples", metric)))
    parts, totals, label = CACHED_SHARE
    if base_samples.get(totals) and new_samples.get(totals):
        interval = share_difference(base_samples.get(parts) or [], base_samples.get(totals) or [],
                                    new_samples.get(parts) or [], new_samples.get(totals) or [],
                                    seed=seed, name=f"{name} {label}")
        findings.append(_share_finding(name, identity, label, _share_of(base_samples, parts, totals),
                                       _share_of(new_samples, parts, totals), interval))
    return findings


def _share_of(samples: Mapping[str, Any], parts: str, totals: str) -> str:
    part, total = sum(samples.get(parts) or []), sum(samples.get(totals) or [])
    return f"{100 * part / total:.1f}%" if total else "not reported"


def _share_finding(name: str, identity: tuple[str, str], label: str, before: str, after: str,
                   interval: Interval) -> Finding:
    """A share's difference: significant when its interval excludes zero (more cached is better)."""
    kind, significant, note = UNCHANGED, False, interval.basis
    if interval.excludes_zero and interval.change is not None:
        kind, significant = (IMPROVEMENT if interval.change > 0 else REGRESSION), True
    elif interval.change is not None:
        note = f"not significant: {interval.basis}" if interval.low is None else \
            f"not significant: the interval covers 0 ({interval.basis})"
    return Finding(PERFORMANCE, kind, name, label, before, after, interval.change, interval.low, interval.high,
                   "difference", significant, None, note, (identity[0], identity[1], "samples", CACHED_SHARE[0]))


def _round_findings(name: str, identity: tuple[str, str], base: Mapping[str, Any], new: Mapping[str, Any],
                    tolerances: Tolerances, seed: int) -> list[Finding]:
    findings = []
    base_rounds, new_rounds = base.get("rounds") or {}, new.get("rounds") or {}
    for metric in sorted(set(base_rounds) & set(new_rounds), key=_round_order):
        before, after = base_rounds[metric] or [], new_rounds[metric] or []
        tolerance, _ = tolerances.of(THROUGHPUT)
        interval = rounds_change(before, after, seed=seed, name=f"{name} {metric}")
        kind, significant, why = _significance(interval, tolerance, better_when_higher=higher_is_better(metric))
        findings.append(Finding(
            PERFORMANCE, kind, name, f"{ROUND_METRICS.get(metric, metric)} (mean of rounds)", _mean(before),
            _mean(after), interval.change, interval.low, interval.high, "relative", significant, tolerance, why,
            (identity[0], identity[1], "rounds", metric)))
    return findings


def _round_order(metric: str) -> tuple[int, str]:
    return (list(ROUND_METRICS).index(metric) if metric in ROUND_METRICS else len(ROUND_METRICS), metric)


def _figure_findings(name: str, base: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    """The cell's other numeric figures (goodput...): one value a run, so a change without an interval."""
    findings = []
    base_figures, new_figures = base.get("figures") or {}, new.get("figures") or {}
    for metric in sorted(set(base_figures) & set(new_figures)):
        before, after = base_figures[metric], new_figures[metric]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (before, after)):
            continue
        change = after / before - 1 if before else None
        findings.append(Finding(PERFORMANCE, UNCHANGED, name, metric, _figure(before), _figure(after), change,
                                unit="relative", note="one value a run: no interval, never significant on its own"))
    return findings


def _percentile(values: Sequence[float], q: int) -> float | None:
    return float(np.percentile(values, q)) if values else None


def _figure(value: float) -> str:
    """Four significant digits, but never an exponent: 12,270 ms reads as it is, not 1.227e+04."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{_figure(value)} ms"


def _mean(values: Sequence[float]) -> str:
    return _figure(sum(values) / len(values)) if values else "-"


# --- 4. rates ------------------------------------------------------------------------------

def _rate_findings(base: Bundle, new: Bundle, seed: int, not_compared: list[NotCompared]) -> list[Finding]:
    findings = []
    for (check, name), before, after in _pairs(base.section("rates"), new.section("rates"), "rate", not_compared):
        interval = newcombe_difference(int(before["k"]), int(before["n"]), int(after["k"]), int(after["n"]))
        findings.append(_rate_finding(check, name, _share(before), _share(after), interval))
    for (check, name), before, after in _pairs(base.section("confusions"), new.section("confusions"), "F1",
                                               not_compared):
        base_counts = [int(before.get(field) or 0) for field in CONFUSION_FIELDS]
        new_counts = [int(after.get(field) or 0) for field in CONFUSION_FIELDS]
        interval = f1_difference(base_counts, new_counts, seed=seed, name=f"{check} {name}")
        findings.append(_rate_finding(check, f"{name} F1", f"{f1_score(*base_counts[:3]):.3f}",
                                      f"{f1_score(*new_counts[:3]):.3f}", interval))
    return findings


def _pairs(base_entries: Iterable[Mapping[str, Any]], new_entries: Iterable[Mapping[str, Any]], label: str,
           not_compared: list[NotCompared]) -> list[tuple[tuple[str, str], Mapping[str, Any], Mapping[str, Any]]]:
    """The entries both runs have, matched by check and name; the others go to the not-compared list."""
    base_by = {(str(entry.get("check")), str(entry["name"])): entry for entry in base_entries}
    new_by = {(str(entry.get("check")), str(entry["name"])): entry for entry in new_entries}
    for run, entries, other in (("NEW", new_by, base_by), ("BASE", base_by, new_by)):
        not_compared += [NotCompared(f"{label} {name} of {check}", f"only in {run}")
                         for check, name in entries if (check, name) not in other]
    return [(identity, base_by[identity], entry) for identity, entry in new_by.items() if identity in base_by]


def _rate_finding(check: str, name: str, before: str, after: str, interval: Interval) -> Finding:
    """A rate's or F1's difference: significant when its interval excludes zero (more is better)."""
    kind, significant, note = UNCHANGED, False, interval.basis
    if interval.excludes_zero and interval.change is not None:
        kind, significant = (IMPROVEMENT if interval.change > 0 else REGRESSION), True
    elif interval.change is not None:
        note = f"not significant: the interval covers 0 ({interval.basis})"
    return Finding(RATES, kind, check, name, before, after, interval.change, interval.low, interval.high,
                   "difference", significant, None, note)


def _share(rate: Mapping[str, Any]) -> str:
    k, n = int(rate["k"]), int(rate["n"])
    return f"{k}/{n} ({100 * k / n:.1f}%)" if n else f"{k}/{n}"
