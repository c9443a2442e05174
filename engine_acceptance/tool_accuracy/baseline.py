"""Baselines: a trusted deployment's tool-call triggers, recorded by this suite, to gate others on.

A baseline is what one deployment did with the committed set: for every case and
mode, whether it called a tool, and its own figures. It is recorded by an ordinary
acceptance run with ``--record-tool-baseline=FILE`` and used by another with
``--tool-baseline=FILE``. It is only comparable on the same set and the same
request settings, so both are written into it and checked when it is read: a
baseline of another set or other settings is refused with the reason, never
compared. It also keeps its provenance (``engine_acceptance.provenance``: engine kind
and version, model, where and when, suite version), so a run gated on it can say
whether it compares with another engine or only with itself; a file written before
provenance was kept still loads, as "provenance unknown".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_acceptance.errors import UsageError
from engine_acceptance.provenance import describe, read_provenance
from engine_acceptance.reporting.json_file import write_json
from engine_acceptance.tool_accuracy.runner import RunSettings
from engine_acceptance.tool_accuracy.scoring import ToolScore

__all__ = ["BASELINE_FORMAT", "Baseline", "BaselineError", "load_baseline", "set_digest", "write_baseline"]

BASELINE_FORMAT = 1
_MODES = {False: "non-streamed", True: "streamed"}


class BaselineError(UsageError):
    """A baseline file that cannot be used for this run; the message says why and what to do (exit 4)."""


@dataclass(frozen=True)
class Baseline:
    path: Path
    set_sha256: str
    settings: dict[str, Any]
    provenance: dict[str, Any] | None
    triggers: dict[tuple[str, bool], bool]
    figures: dict[str, Any]
    # What a file without provenance said of its source (before provenance was kept), shown as is.
    recorded_from: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        if self.provenance is not None:
            return f"{self.path.name} ({describe(self.provenance)})"
        source = self.recorded_from or {}
        said = f"; it says {source.get('model', '?')} on {source.get('engine', '?')}, recorded " \
               f"{source.get('recorded_at', '?')}" if source else ""
        return f"{self.path.name} (provenance unknown{said})"


def set_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_baseline(path: Path, *, set_sha256: str, settings: RunSettings, provenance: dict[str, Any],
                   score: ToolScore) -> Path:
    """Write the baseline atomically (a crash leaves the old file, never half of one).

    ``provenance``: from :func:`engine_acceptance.provenance.provenance_of`.
    """
    triggers: dict[str, dict[str, bool]] = {}
    for (case_id, stream), called in sorted(score.triggers.items()):
        triggers.setdefault(case_id, {})[_MODES[stream]] = called
    data = {"format": BASELINE_FORMAT, "set_sha256": set_sha256, "settings": settings.as_dict(),
            "provenance": provenance,
            "figures": score.as_dict(), "triggers": triggers}
    return write_json(path, data, indent=1, trailing_newline=True)


def load_baseline(path: Path, *, set_sha256: str, settings: RunSettings, origin: str = "--tool-baseline") -> Baseline:
    """The baseline in ``path``, refused unless it was recorded on this set with these settings.

    ``origin`` names where the path came from in messages (the option, or the model profile).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"{origin} {path}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise BaselineError(f"{origin} {path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, dict) or data.get("format") != BASELINE_FORMAT or not isinstance(data.get("triggers"), dict):
        raise BaselineError(f"{origin} {path}: not a tool-accuracy baseline of format {BASELINE_FORMAT} "
                            "(record one with --record-tool-baseline)")
    if data.get("set_sha256") != set_sha256:
        raise BaselineError(f"{origin} {path} was recorded on another tool-accuracy set (sha256 "
                            f"{str(data.get('set_sha256'))[:12]}…, this suite's is {set_sha256[:12]}…): record it "
                            "again from the trusted deployment")
    if data.get("settings") != settings.as_dict():
        raise BaselineError(f"{origin} {path} was recorded with {data.get('settings')}, this run sends "
                            f"{settings.as_dict()} (from the model profile): triggers are only comparable with the "
                            "same settings; record the baseline with the same model profile")
    triggers: dict[tuple[str, bool], bool] = {}
    for case_id, modes in data["triggers"].items():
        for stream, mode in _MODES.items():
            if isinstance(modes, dict) and isinstance(modes.get(mode), bool):
                triggers[(case_id, stream)] = modes[mode]
    legacy = data.get("recorded_from")
    return Baseline(path, set_sha256, data["settings"], read_provenance(data.get("provenance")), triggers,
                    data.get("figures") or {}, legacy if isinstance(legacy, dict) else None)
