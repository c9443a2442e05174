"""The release-history store of the Allure dashboard (``engine_acceptance/allure_history.py``).

Allure itself is not needed: ``generate`` below does to ``history-trend.json`` what Allure 2
does (the run's entry, numbered by ``executor.json``, put before the earlier ones), which is
all the store relies on. The dashboard script is run with a stand-in ``allure`` and ``java``,
so its order (seed, generate, keep; no keep after a failed generation) is tested too. One
optional test runs the real Allure CLI when it is installed where the script puts it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine_acceptance.allure_history import HistoryStoreError, keep, main, read_store, seed
from engine_acceptance.reporting.allure_files import write_environment

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "allure_dashboard.sh"
ALLURE_TOOLS = Path(os.environ.get("EA_TOOLS", Path.home() / ".cache" / "engine-acceptance" / "tools"))
REAL_ALLURE = ALLURE_TOOLS / "node_modules" / ".bin" / "allure"

# What Allure 2 does with the history when it generates a report, reduced to the trend.
FAKE_ALLURE = f"""#!{sys.executable}
import json, os, pathlib, sys
if os.environ.get("FAKE_ALLURE_FAILS"):
    sys.exit("allure: generation failed")
args = sys.argv[1:]
results, report = pathlib.Path(args[args.index("--clean") + 1]), pathlib.Path(args[args.index("-o") + 1])
executor = json.loads((results / "executor.json").read_text())
old = results / "history" / "history-trend.json"
trend = [{{"buildOrder": executor["buildOrder"], "data": {{"passed": 1}}}}]
trend += json.loads(old.read_text()) if old.exists() else []
(report / "history").mkdir(parents=True, exist_ok=True)
(report / "history" / "history-trend.json").write_text(json.dumps(trend))
"""


def results_of(folder: Path, *, kind: str = "vllm", model: str = "gemma-3-270m", build_name: str = "vllm 0.32.0",
               history: dict[str, Any] | None = None) -> Path:
    """A results folder as the plugin leaves it: environment and executor (and a leftover history)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_environment(folder, {"target": "deployed engine", "engine.kind": kind, "engine.version": "0.32.0",
                               "model": model})
    (folder / "executor.json").write_text(json.dumps({"name": "engine-acceptance", "buildName": build_name}))
    for name, content in (history or {}).items():
        (folder / "history").mkdir(exist_ok=True)
        (folder / "history" / name).write_text(json.dumps(content))
    return folder


def generate(results: Path, report: Path) -> None:
    """Allure 2's history step: this run's trend entry first, then the seeded ones; history.json carried."""
    executor = json.loads((results / "executor.json").read_text())
    seeded = results / "history"
    trend = json.loads((seeded / "history-trend.json").read_text()) if (seeded / "history-trend.json").exists() else []
    (report / "history").mkdir(parents=True, exist_ok=True)
    entry = {"buildOrder": executor["buildOrder"], "reportName": "Allure Report", "data": {"passed": 3, "total": 3}}
    (report / "history" / "history-trend.json").write_text(json.dumps([entry, *trend]))
    history = json.loads((seeded / "history.json").read_text()) if (seeded / "history.json").exists() else {}
    history.setdefault("abc", {"items": []})["items"].insert(0, {"status": "passed", "build": executor["buildOrder"]})
    (report / "history" / "history.json").write_text(json.dumps(history))


def trend_builds(folder: Path) -> list[int]:
    return [entry["buildOrder"] for entry in json.loads((folder / "history" / "history-trend.json").read_text())]


def one_run(tmp_path: Path, store: Path, n: int, **engine: str) -> tuple[Path, Path]:
    results, report = results_of(tmp_path / f"results-{n}", **engine), tmp_path / f"report-{n}"
    seed(store, results)
    generate(results, report)
    keep(store, results, report)
    return results, report


def test_a_new_store_numbers_the_first_run_one_and_seeds_nothing(tmp_path: Path) -> None:
    results = results_of(tmp_path / "results")
    assert seed(tmp_path / "no-store-yet", results) == 1
    assert not (results / "history").exists()
    assert json.loads((results / "executor.json").read_text())["buildOrder"] == 1
    assert not (tmp_path / "no-store-yet").exists(), "seeding must not write the store"


def test_three_runs_through_one_store_make_a_trend_numbered_in_order(tmp_path: Path) -> None:
    store = tmp_path / "allure-history" / "vllm"
    reports = [one_run(tmp_path, store, n)[1] for n in (1, 2, 3)]
    assert trend_builds(store) == [3, 2, 1]
    assert trend_builds(reports[-1]) == [3, 2, 1]
    assert [item["build"] for item in json.loads((store / "history" / "history.json").read_text())["abc"]["items"]] \
        == [3, 2, 1]
    # What run 3 was seeded with is run 2's report history, byte for byte.
    assert (tmp_path / "results-3" / "history" / "history-trend.json").read_bytes() == \
        (reports[1] / "history" / "history-trend.json").read_bytes()
    assert json.loads((store / "engine.json").read_text()) == {"engine.kind": "vllm", "model": "gemma-3-270m"}
    assert not {p.name for p in store.iterdir()} - {"history", "engine.json"}, "no leftover swap folders"


def test_the_run_number_leads_the_build_name_once_however_often_it_is_seeded(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1)
    results = results_of(tmp_path / "results-2", build_name="vllm 0.33.0 serving 'gemma-3-270m', 2025-06-01 10:00 UTC")
    assert seed(store, results) == 2
    assert seed(store, results) == 2
    executor = json.loads((results / "executor.json").read_text())
    assert executor["buildName"] == "#2 · vllm 0.33.0 serving 'gemma-3-270m', 2025-06-01 10:00 UTC"
    assert "reportUrl" not in executor


def test_a_report_url_is_given_to_allure_so_history_entries_link_to_their_report(tmp_path: Path) -> None:
    results = results_of(tmp_path / "results")
    seed(tmp_path / "store", results, report_url="https://ci.example/reports/vllm/42/")
    assert json.loads((results / "executor.json").read_text())["reportUrl"] == "https://ci.example/reports/vllm/42/"


def test_a_leftover_history_in_the_results_gives_way_to_the_stores(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1)
    results = results_of(tmp_path / "reused", history={"history-trend.json": [{"buildOrder": 40}],
                                                       "stale.json": {}})
    assert seed(store, results) == 2
    assert sorted(p.name for p in (results / "history").iterdir()) == ["history-trend.json", "history.json"]
    assert trend_builds(results) == [1]


def test_trend_entries_without_a_build_number_still_count(tmp_path: Path) -> None:
    # A history started by hand (no executor.json) has entries without buildOrder.
    store = tmp_path / "store"
    (store / "history").mkdir(parents=True)
    (store / "history" / "history-trend.json").write_text(json.dumps([{"data": {}}] * 3))
    assert read_store(store).last_build() == 3
    assert seed(store, results_of(tmp_path / "results")) == 4


def test_a_store_path_that_is_a_file_is_refused_with_its_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) \
        -> None:
    store = tmp_path / "store"
    store.write_text("not a folder")
    results = results_of(tmp_path / "results")
    assert main(["seed", "--store", str(store), "--results", str(results)]) == 2
    assert f"{store}: is a file, not a history store folder" in capsys.readouterr().err
    assert "buildOrder" not in json.loads((results / "executor.json").read_text())


@pytest.mark.parametrize("name", ["history/history-trend.json", "history/history.json", "engine.json"])
def test_unreadable_json_in_the_store_is_named_and_nothing_is_changed(tmp_path: Path, name: str) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1)
    (store / name).write_text('{"cut off in the middle')
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    results = results_of(tmp_path / "results-2")
    with pytest.raises(HistoryStoreError, match=f"{store / name}: not readable as JSON.*no fresh history"):
        seed(store, results)
    assert not (results / "history").exists() and "buildOrder" not in (results / "executor.json").read_text()
    with pytest.raises(HistoryStoreError, match="not readable as JSON"):
        keep(store, tmp_path / "results-1", tmp_path / "report-1")
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_a_trend_that_is_not_a_list_of_entries_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (store / "history").mkdir(parents=True)
    (store / "history" / "history-trend.json").write_text('{"buildOrder": 1}')
    with pytest.raises(HistoryStoreError, match="history-trend.json: expected a list of trend entries"):
        seed(store, results_of(tmp_path / "results"))


def test_another_engines_results_are_refused_by_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1)
    sglang = results_of(tmp_path / "sglang", kind="sglang")
    with pytest.raises(HistoryStoreError, match="history of vllm serving 'gemma-3-270m'.*sglang serving "
                                                "'gemma-3-270m'.*one store per engine"):
        seed(store, sglang)
    other_model = results_of(tmp_path / "other-model", model="gemma-3-1b")
    with pytest.raises(HistoryStoreError, match="one store per engine"):
        keep(store, other_model, tmp_path / "report-1")
    assert trend_builds(store) == [1]


def test_results_that_do_not_name_their_engine_are_refused(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    with pytest.raises(HistoryStoreError, match="environment.properties: missing"):
        seed(tmp_path / "store", tmp_path / "results")


def test_a_report_generated_without_seeding_does_not_cut_the_history_short(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1)
    one_run(tmp_path, store, 2)
    results = results_of(tmp_path / "unseeded")
    (results / "executor.json").write_text(json.dumps({"buildOrder": 1}))
    generate(results, tmp_path / "unseeded-report")
    with pytest.raises(HistoryStoreError, match=r"does not continue the store .*last run is #2.*left as it was"):
        keep(store, results, tmp_path / "unseeded-report")
    assert trend_builds(store) == [2, 1]


def test_a_report_without_history_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1)
    results = results_of(tmp_path / "results-2")
    seed(store, results)
    (tmp_path / "empty-report").mkdir()
    with pytest.raises(HistoryStoreError, match="empty-report/history: missing"):
        keep(store, results, tmp_path / "empty-report")
    assert trend_builds(store) == [1]


def test_the_environment_is_read_as_the_plugin_writes_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    one_run(tmp_path, store, 1, model="org\\model\nv2")
    assert read_store(store).identity == {"engine.kind": "vllm", "model": "org\\model\nv2"}


# --- the dashboard script, with a stand-in Allure ------------------------------------------

@pytest.fixture
def fake_tools(tmp_path: Path) -> dict[str, str]:
    """Environment for the script: a stand-in allure under EA_TOOLS and a java on PATH."""
    tools, bin_dir = tmp_path / "tools", tmp_path / "bin"
    allure = tools / "node_modules" / ".bin" / "allure"
    allure.parent.mkdir(parents=True)
    allure.write_text(FAKE_ALLURE)
    bin_dir.mkdir()
    (bin_dir / "java").write_text("#!/bin/sh\nexit 0\n")
    for path in (allure, bin_dir / "java"):
        path.chmod(0o755)
    return {**os.environ, "EA_TOOLS": str(tools), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def run_script(env: dict[str, str], *args: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=120)


def test_the_dashboard_script_carries_the_history_from_report_to_report(tmp_path: Path,
                                                                       fake_tools: dict[str, str]) -> None:
    env = {**fake_tools, "HISTORY": str(tmp_path / "allure-history" / "vllm")}
    for n in (1, 2, 3):
        done = run_script(env, results_of(tmp_path / f"results-{n}"), tmp_path / f"report-{n}")
        assert done.returncode == 0, done.stderr
    assert trend_builds(tmp_path / "report-3") == [3, 2, 1]
    assert trend_builds(tmp_path / "allure-history" / "vllm") == [3, 2, 1]
    assert "this run is #3" in done.stdout


def test_a_failed_generation_leaves_the_store_as_it_was(tmp_path: Path, fake_tools: dict[str, str]) -> None:
    env = {**fake_tools, "HISTORY": str(tmp_path / "store")}
    assert run_script(env, results_of(tmp_path / "results-1"), tmp_path / "report-1").returncode == 0
    before = (tmp_path / "store" / "history" / "history-trend.json").read_bytes()
    failed = run_script({**env, "FAKE_ALLURE_FAILS": "1"}, results_of(tmp_path / "results-2"), tmp_path / "report-2")
    assert failed.returncode != 0 and "generation failed" in failed.stderr
    assert (tmp_path / "store" / "history" / "history-trend.json").read_bytes() == before


def test_the_dashboard_script_stops_on_a_bad_store_before_generating(tmp_path: Path,
                                                                     fake_tools: dict[str, str]) -> None:
    (tmp_path / "store").write_text("")
    done = run_script({**fake_tools, "HISTORY": str(tmp_path / "store")}, results_of(tmp_path / "results"),
                      tmp_path / "report")
    assert done.returncode == 2
    assert f"allure history: error: {tmp_path / 'store'}: is a file" in done.stderr
    assert not (tmp_path / "report").exists()


# --- the real Allure CLI, when installed ---------------------------------------------------

def allure_result(results: Path, status: str) -> None:
    """One check's result file, as allure-pytest writes it (the fields Allure's history needs)."""
    (results / f"{uuid.uuid4()}-result.json").write_text(json.dumps({
        "uuid": str(uuid.uuid4()), "historyId": "5d41402abc4b2a76b9719d911017c592", "name": "test_stream",
        "fullName": "tests.test_streaming#test_stream", "status": status, "stage": "finished",
        "start": 1_700_000_000_000, "stop": 1_700_000_001_000}))


@pytest.mark.skipif(not (REAL_ALLURE.exists() and shutil.which("java")),
                    reason=f"the Allure CLI is not installed at {REAL_ALLURE} (scripts/allure_dashboard.sh "
                           "installs it) or java is missing")
def test_real_allure_draws_a_trend_and_a_history_of_three_runs(tmp_path: Path) -> None:
    store = tmp_path / "store"
    for n, status in enumerate(("passed", "failed", "passed"), start=1):
        results, report = results_of(tmp_path / f"results-{n}"), tmp_path / f"report-{n}"
        allure_result(results, status)
        seed(store, results)
        subprocess.run([str(REAL_ALLURE), "generate", "--clean", str(results), "-o", str(report)], check=True,
                       capture_output=True, timeout=300)
        keep(store, results, report)
    assert trend_builds(report) == [3, 2, 1]
    # Allure keys a check's history by its historyId (newer releases prefix the test case id).
    [check] = json.loads((report / "history" / "history.json").read_text()).values()
    assert [item["status"] for item in check["items"]] == ["passed", "failed", "passed"]
