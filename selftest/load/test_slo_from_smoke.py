"""CI's SLO cell is set from the same engine's closed-loop smoke (scripts/slo_from_smoke.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slo_from_smoke.py"
_spec = importlib.util.spec_from_file_location("slo_from_smoke", SCRIPT)
slo_from_smoke = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(slo_from_smoke)


def cell(key: str, concurrency: int, req_s: float, ttft: float, tpot: float, e2e: float) -> dict:
    """One cell as throughput.json writes it: each metric's median over the rounds."""
    metrics = {"request_per_s": req_s, "p99_ttft_ms": ttft, "p99_tpot_ms": tpot, "p99_e2e_ms": e2e}
    return {"key": key, "concurrency": concurrency,
            "summary": {"key": key, "metrics": {name: {"median": value} for name, value in metrics.items()}}}


SMOKE = {"format": "engine-acceptance-throughput-results/1",
         "cells": [cell("128/32@1", 1, 0.4, 100, 70, 2300), cell("128/32@4", 4, 0.8, 400, 150, 5000),
                   cell("128/128@8", 8, 2.0, 900, 300, 40000)]}


def test_rate_and_limits_scale_the_highest_concurrency_cell_of_the_slo_shape():
    rate, limits, how = slo_from_smoke.derive(SMOKE)
    assert rate == 0.4
    assert limits == {"ttft": 2000, "tpot": 450, "e2e": 15000}
    assert "128/32@4" in how and "0.5 x" in how


def test_a_smoke_without_the_shape_is_an_error_that_names_the_cells():
    with pytest.raises(ValueError, match=r"no 128/32 cell .*128/128@8"):
        slo_from_smoke.derive({"cells": [SMOKE["cells"][2]]})


def test_the_command_prints_four_numbers_for_the_shell_and_fails_on_a_missing_file(tmp_path):
    path = tmp_path / "throughput.json"
    path.write_text(json.dumps(SMOKE), encoding="utf-8")
    done = subprocess.run([sys.executable, str(SCRIPT), str(path)], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0.4", "2000", "450", "15000"]
    missing = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "absent.json")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and "cannot set the SLO cell" in missing.stderr
