"""The run bundle: what every run leaves for ``engine-acceptance diff`` (issue 29).

The gate keeps a check's rates and load cells apart from its figures (gate.json stays as it
was) and the writer puts them, with the verdict, every check and the run's identity, into
``run-bundle/run.json``. End to end: a small throughput run and a trials check leave a bundle
with every measured request's latencies, the trials' count as k of n, and the key redacted.
"""

from __future__ import annotations

import json

import pytest
from suite_runner import NO_LATENCY, run_suite

from engine_acceptance.pytest_plugin.bundle_writer import bundle_document, write_bundle
from engine_acceptance.pytest_plugin.verdict import GateCollector
from engine_acceptance.run_bundle import (
    BUNDLE_VERSION,
    cell_entry,
    cells_property,
    rate_property,
    request_set_id,
)

CELL = cell_entry("throughput", "128/32@1", {"input_tokens": 128, "concurrency": 1},
                  samples={"ttft_ms": [1.23456, None, 2.0]}, rounds={"output_tok_s": [10.0, 11.0]})


def _collector_with_a_measured_check() -> GateCollector:
    gate = GateCollector()
    properties = [("throughput", json.dumps({"128/32@1": {"median": 1.0}})), rate_property("trials", 2, 3),
                  rate_property("trials", 3, 3), cells_property([CELL]),
                  ("tool_schema_valid", json.dumps({"k": 9, "n": 10, "rate": 0.9})),
                  ("tool_trigger_vs_baseline", json.dumps({"both_called": 5, "only_candidate_called": 1,
                                                           "only_reference_called": 0, "neither_called": 4}))]
    gate.add("tests/test_x.py::test_load", ["throughput"], "call", "passed", None, "", properties)
    return gate


def test_rates_and_cells_are_kept_for_the_bundle_and_not_as_figures() -> None:
    gate = _collector_with_a_measured_check()
    figures = gate.figures["tests/test_x.py::test_load"]
    assert set(figures) == {"throughput", "tool_schema_valid", "tool_trigger_vs_baseline"}
    assert gate.rates == [{"name": "trials", "k": 2, "n": 3, "check": "tests/test_x.py::test_load"},
                          {"name": "trials", "k": 3, "n": 3, "check": "tests/test_x.py::test_load"}]
    assert gate.cells == [{**CELL, "check": "tests/test_x.py::test_load"}]


def test_the_document_holds_the_verdict_checks_rates_confusions_and_cells(tmp_path) -> None:
    document = bundle_document(_collector_with_a_measured_check(), None, ["-m", "throughput"])
    assert document["bundle_version"] == BUNDLE_VERSION
    assert document["verdict"]["gate"] == "pass" and document["verdict"]["totals"]["passed"] == 1
    assert document["checks"][0]["outcome"] == "passed" and document["checks"][0]["group"] == "throughput"
    # A figure that is a count (k of n) is a rate too; a trigger confusion is kept as its four counts.
    assert {"name": "tool_schema_valid", "k": 9, "n": 10, "check": "test_x.py::test_load"} in document["rates"]
    assert document["confusions"][0]["both_called"] == 5
    assert document["cells"][0]["samples"]["ttft_ms"] == [1.235, 2.0]  # ms to the microsecond, failures left out
    path = write_bundle(tmp_path / "bundle", document)
    assert json.loads(path.read_text()) == document and path.name == "run.json"
    assert [p.name for p in path.parent.iterdir()] == ["run.json"]  # no temporary file left behind


def test_a_check_is_named_as_in_a_checkout_wherever_the_suite_was_installed() -> None:
    # Found by CI's wheel stage: the installed run and the checkout's named every check otherwise.
    # (pytest's node ids there were test_image.py::..., from the virtualenv's suite folder, and tests/test_image.py::...).
    for nodeid in ("../venv/lib/python3.11/site-packages/engine_acceptance/suite/tests/test_image.py::test_x[a/b]",
                   "tests/test_image.py::test_x[a/b]", "test_image.py::test_x[a/b]"):
        gate = GateCollector()
        gate.add(nodeid, ["image"], "call", "passed", None, "", [rate_property("trials", 3, 3), cells_property([CELL])])
        document = bundle_document(gate, None, [])
        assert (document["checks"][0]["id"] == document["rates"][0]["check"] == document["cells"][0]["check"]
                == "test_image.py::test_x[a/b]")


def test_a_rate_outside_its_total_is_refused() -> None:
    with pytest.raises(ValueError, match="4/3"):
        rate_property("trials", 4, 3)


def test_the_request_set_changes_with_the_shape_or_the_prompts() -> None:
    shape = {"input_tokens": 128, "concurrency": 1}
    assert request_set_id(shape, ("ids", 1)) == request_set_id(dict(shape), ("ids", 1))
    assert request_set_id(shape, ("ids", 1)) != request_set_id({**shape, "concurrency": 2}, ("ids", 1))
    assert request_set_id(shape, ("ids", 1)) != request_set_id(shape, ("ids", 2))


@pytest.mark.e2e
def test_a_run_leaves_a_bundle_with_every_request_and_the_key_redacted(pytester: pytest.Pytester) -> None:
    secret = "bundle-key-0123456789"
    result, outcomes = run_suite(
        pytester, "-m", "throughput or thinking", "-k", "not media and (throughput or 240)",
        "--throughput-shapes=128/32@2x4", "--throughput-rounds=2", "--trials=2", f"--api-key={secret}", *NO_LATENCY)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert set(outcomes.values()) == {"passed"} and len(outcomes) == 4, outcomes
    result.stdout.fnmatch_lines(["run bundle written to run-bundle/run.json (*KiB): engine-acceptance diff BASE NEW*"])
    text = (pytester.path / "run-bundle" / "run.json").read_text()
    assert secret not in text
    bundle = json.loads(text)
    assert bundle["engine"]["model.profile"] == "reference" and bundle["profiles"]["model"]["sha256"]
    assert {check["id"] for check in bundle["checks"]} >= {
        "test_throughput.py::test_fixed_length_load_is_served_in_full_and_passes_the_gate[in128-out32]"}
    [cell] = bundle["cells"]
    assert (cell["workload"], cell["key"], cell["shape"]["rounds"]) == ("throughput", "128/32@2", 2)
    assert all(len(cell["samples"][metric]) == 8 for metric in ("ttft_ms", "tpot_ms", "e2e_ms"))
    assert len(cell["rounds"]["output_tok_s"]) == 2 and cell["request_set"].startswith("sha256:")
    assert any(rate["name"] == "thinking_correct" for rate in bundle["rates"]), bundle["rates"]
