"""Whose a baseline is: the engine, model, place and time it was recorded from, and the suite that did it.

A tool-accuracy baseline (``--record-tool-baseline``) and a throughput baseline
(``--throughput-save``) both keep a ``provenance`` object written by
:func:`provenance_of`. When a run gates on a baseline, :func:`comparison` says what
the comparison is worth: a baseline recorded from the same engine identity (kind,
version and model) as the run's only shows the deployment did not change since —
a **regression against itself**, never accuracy; one from the same engine kind and model
at another version is a **regression across versions** ("the same engine and model at
another version (0.32.0 → 0.33.0): a regression across versions": what an upgrade changed);
one from another engine kind or model is a comparison **against another engine**; an
older file without provenance is **provenance unknown**. The checks report it
(:func:`baseline_entry`) and the verdict lists it in the gate table and ``gate.json``
under ``baselines``.

Where it was recorded is the URL's scheme, host and port only: user, password, path
and query can carry secrets, and the API key is never written.
"""

from __future__ import annotations

import time
from typing import Any, Mapping
from urllib.parse import urlsplit

from engine_acceptance import __version__
from engine_acceptance.wire.readiness import EngineInfo

__all__ = ["ACROSS_VERSIONS", "AGAINST_ANOTHER", "AGAINST_ITSELF", "BASELINE_PROPERTY", "UNKNOWN", "baseline_entry",
           "comparison", "describe", "is_across_versions", "provenance_of", "read_provenance", "redacted_where"]

AGAINST_ITSELF = "regression against itself"
# Followed by the two versions, the baseline's first: "... at another version (0.32.0 → 0.33.0): a regression
# across versions".
ACROSS_VERSIONS = "the same engine and model at another version"
AGAINST_ANOTHER = "against another engine"
UNKNOWN = "provenance unknown"
# The user property a check that compared with a baseline records (the verdict collects it).
BASELINE_PROPERTY = "engine_acceptance.baseline"


def redacted_where(url: str) -> str:
    """``scheme://host[:port]`` of ``url``: no credentials, no path or query (they may hold tokens)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme or 'http'}://{host}{port}"


def provenance_of(engine: EngineInfo, *, model_profile: str | None = None) -> dict[str, Any]:
    """The provenance of a baseline recorded now from ``engine``."""
    data: dict[str, Any] = {"engine": engine.kind, "engine_version": engine.version, "model": engine.model,
                            "where": redacted_where(engine.url), "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                            "suite_version": __version__}
    if model_profile:
        data["model_profile"] = model_profile
    return data


def read_provenance(data: Any) -> dict[str, Any] | None:
    """A baseline file's ``provenance`` object, or None when it has none (a file written before it was kept)."""
    if not isinstance(data, Mapping) or not isinstance(data.get("engine"), str) or not isinstance(
            data.get("model"), str):
        return None
    return dict(data)


def comparison(provenance: Mapping[str, Any] | None, engine: EngineInfo) -> str:
    """What gating ``engine`` on a baseline of this provenance measures.

    The same engine identity is the same kind and model and the same version; a version
    unknown on either side cannot tell them apart, so it counts as the same (the weaker
    claim: a regression check, not a comparison with another engine). The same kind and
    model at another known version is a regression across versions, naming both: the
    upgrade is what the comparison measures, not another engine.
    """
    if provenance is None:
        return UNKNOWN
    if provenance.get("engine") != engine.kind or provenance.get("model") != engine.model:
        return AGAINST_ANOTHER
    recorded, running = provenance.get("engine_version"), engine.version
    if recorded is None or running is None or recorded == running:
        return AGAINST_ITSELF
    return f"{ACROSS_VERSIONS} ({recorded} → {running}): a regression across versions"


def is_across_versions(comparison_text: str | None) -> bool:
    """Whether a :func:`comparison` is a regression across versions (it carries the two versions)."""
    return bool(comparison_text) and str(comparison_text).startswith(ACROSS_VERSIONS)


def describe(provenance: Mapping[str, Any] | None) -> str:
    """One line: "vllm 0.32.0, model gemma-3-270m, at http://host:8000, 2026-12-01T20:47:09+0000, suite 0.1.0"."""
    if provenance is None:
        return "no provenance recorded in the file"
    engine = f"{provenance.get('engine')} {provenance.get('engine_version') or '(version unknown)'}"
    parts = [engine, f"model {provenance.get('model')}"]
    if provenance.get("where"):
        parts.append(f"at {provenance['where']}")
    parts.append(f"recorded {provenance.get('recorded_at') or '(time unknown)'}")
    if provenance.get("suite_version"):
        parts.append(f"suite {provenance['suite_version']}")
    return ", ".join(parts)


def baseline_entry(kind: str, path: str, provenance: Mapping[str, Any] | None, engine: EngineInfo) -> dict[str, Any]:
    """The ``baselines`` entry of ``gate.json`` for one baseline a check compared with."""
    return {"kind": kind, "path": path, "provenance": dict(provenance) if provenance is not None else None,
            "comparison": comparison(provenance, engine)}
