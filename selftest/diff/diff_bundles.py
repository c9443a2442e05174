"""Small run bundles (run.json documents) for the diff's self-tests, built in the test.

:func:`bundle` gives a clean run of a few checks, one throughput cell with per-request
samples drawn from a seeded lognormal (so two "runs" differ only by noise), rates and a
tool-call confusion; the tests change what they are about and write it with :func:`write`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CHECK_IDS", "bundle", "cell", "write"]

CHECK_IDS = ("tests/test_text.py::test_answer[streamed]", "tests/test_tools.py::test_call[streamed]",
             "tests/test_text.py::test_recorded_defect[streamed]")
SHAPE = {"input_tokens": 128, "output_tokens": 128, "concurrency": 4, "requests": 500, "rounds": 3}


def cell(seed: int, *, slower: float = 1.0, requests: int = 500, key: str = "128/128@4",
         shape: dict[str, Any] | None = None) -> dict[str, Any]:
    """A throughput cell whose latencies are lognormal around 40 ms TTFT and 10 ms TPOT, times ``slower``."""
    rng = np.random.default_rng(seed)
    ttft = rng.lognormal(np.log(40), 0.15, requests) * slower
    tpot = rng.lognormal(np.log(10), 0.10, requests) * slower
    itl = rng.lognormal(np.log(10), 0.2, requests * 20) * slower
    e2e = ttft + 127 * tpot
    rounds = (rng.normal(1000, 8, 3) / slower).tolist()
    return {"workload": "throughput", "check": "tests/test_throughput.py::test_fixed_length[in128-out128]", "key": key,
            "shape": dict(shape or SHAPE), "request_set": "sha256:0123456789abcdef",
            "samples": {"ttft_ms": ttft.round(3).tolist(), "tpot_ms": tpot.round(3).tolist(),
                        "e2e_ms": e2e.round(3).tolist(), "itl_ms": itl.round(3).tolist()},
            "rounds": {"output_tok_s": rounds, "request_per_s": [r / 128 for r in rounds]},
            "figures": {}}


def bundle(seed: int = 1, **changes: Any) -> dict[str, Any]:
    """A clean run: the gate passes, three checks (one with a recorded defect), one cell, rates, a confusion."""
    document: dict[str, Any] = {
        "bundle_version": 1,
        "suite_version": "0.1.0",
        "written_at": "2026-12-04T15:30:00+0000",
        "engine": {"engine.kind": "vllm", "engine.version": "0.1.0+reference", "model": "reference-model"},
        "options": {"args": []},
        "profiles": {},
        "tolerances": {},
        "verdict": {"gate": "pass", "gate_failures": [], "totals": {"passed": 2, "known_defect": 1},
                    "interrupted": None, "engine_unavailable": None, "stale_records_policy": "fail"},
        "capabilities": [
            {"name": "text", "declared": True, "discovered": "-", "required": True, "failed": 0, "result": "PASS",
             "coverage_failure": None},
            {"name": "tools", "declared": True, "discovered": "served", "required": False, "failed": 0,
             "result": "PASS", "coverage_failure": None},
        ],
        "checks": [
            {"id": CHECK_IDS[0], "group": "text", "outcome": "passed", "reason": "", "covers": ["text"], "figures": {}},
            {"id": CHECK_IDS[1], "group": "tools", "outcome": "passed", "reason": "", "covers": ["tools"], "figures": {}},
            {"id": CHECK_IDS[2], "group": "text", "outcome": "known_defect", "reason": "the engine drops the stop token",
             "covers": ["text"], "figures": {}},
        ],
        "rates": [{"name": "tool_schema_valid", "check": "tests/test_tool_accuracy.py::test_schemas", "k": 620, "n": 626}],
        "confusions": [{"name": "tool_trigger_vs_baseline", "check": "tests/test_tool_accuracy.py::test_triggers",
                        "both_called": 560, "only_candidate_called": 2, "only_reference_called": 4,
                        "neither_called": 72}],
        "cells": [cell(seed)],
    }
    document.update(copy.deepcopy(changes))
    return document


def check(document: dict[str, Any], check_id: str) -> dict[str, Any]:
    return next(entry for entry in document["checks"] if entry["id"] == check_id)


def write(folder: Path, document: dict[str, Any]) -> Path:
    """The bundle folder ``folder`` holding ``run.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(document), encoding="utf-8")
    return folder
