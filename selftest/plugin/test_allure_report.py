"""What the plugin gives Allure so runs of one engine line up release after release.

- ``executor.json`` names the engine release and the time of the run, so the dashboard's
  Executors card and the Trend tell runs apart;
- every check's Allure ``historyId`` is the same in two processes and unique in the
  suite: Allure links a check's results across runs by it, so a parameter whose repr
  carries a memory address or a hash-ordered set would leave each History tab empty.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine_acceptance.pytest_plugin.allure_report import executor_build_name
from engine_acceptance.reporting.allure_files import write_executor

REPO = Path(__file__).resolve().parent.parent.parent

# Loaded into a collection of the suite: each check's historyId, computed by allure-pytest's own functions.
HISTORY_IDS_PLUGIN = """
import json, os
from allure_commons.model2 import Parameter
from allure_commons.utils import represent
from allure_pytest.utils import allure_full_name, get_history_id

def pytest_collection_finish(session):
    ids = {}
    for item in session.items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        parameters = [Parameter(name=name, value=represent(value)) for name, value in params.items()]
        ids[item.nodeid] = get_history_id(allure_full_name(item), parameters, original_values=params)
    with open(os.environ["HISTORY_IDS_OUT"], "w") as out:
        json.dump(ids, out)
"""


def session_of(*, version: str | None, reference: bool) -> SimpleNamespace:
    engine = SimpleNamespace(kind="vllm", version=version, model="gemma-3-270m")
    return SimpleNamespace(engine=engine, reference=SimpleNamespace() if reference else None)


@pytest.mark.parametrize(("version", "reference", "build_name"), [
    ("0.32.0", False, "vllm 0.32.0 serving 'gemma-3-270m', 2025-06-01 10:05 UTC"),
    (None, False, "vllm serving 'gemma-3-270m', 2025-06-01 10:05 UTC"),
    ("0.1.0+reference", True, "vllm 0.1.0+reference (built-in reference engine) serving 'gemma-3-270m', "
                              "2025-06-01 10:05 UTC"),
], ids=["release", "no-version", "built-in"])
def test_the_executor_names_the_engine_release_and_the_time_of_the_run(
        tmp_path: Path, version: str | None, reference: bool, build_name: str) -> None:
    now = datetime(2025, 6, 1, 10, 5, 59, tzinfo=timezone.utc)
    session = session_of(version=version, reference=reference)
    build_name = executor_build_name(session, now=now)  # type: ignore[arg-type]
    executor = json.loads(write_executor(tmp_path, build_name).read_text())
    assert executor["buildName"] == build_name
    assert executor["name"].startswith("engine-acceptance ")
    assert "buildOrder" not in executor, "the history store numbers runs, not the plugin"


@pytest.mark.e2e
def test_every_checks_history_id_is_the_same_in_two_runs_and_unique(pytester: pytest.Pytester,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makepyfile(history_ids=HISTORY_IDS_PLUGIN)
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    runs = []
    for hash_seed in ("1", "2"):
        out = pytester.path / f"ids-{hash_seed}.json"
        monkeypatch.setenv("PYTHONHASHSEED", hash_seed)
        monkeypatch.setenv("HISTORY_IDS_OUT", str(out))
        result = pytester.runpytest_subprocess("-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO),
                                               str(REPO / "tests"), "-p", "history_ids", "-p", "no:cacheprovider",
                                               "--collect-only", "-q")
        assert result.ret == 0, result.stdout.str()[-2000:]
        runs.append(json.loads(out.read_text()))
    first, second = runs
    assert len(first) > 100, "the whole suite is collected"
    changed = sorted(nodeid for nodeid in first if first[nodeid] != second.get(nodeid))
    assert not changed, f"historyId differs between two runs (History cannot link them): {changed[:5]}"
    shared: dict[str, list[str]] = {}
    for nodeid, history_id in first.items():
        shared.setdefault(history_id, []).append(nodeid)
    assert not [ids for ids in shared.values() if len(ids) > 1], "two checks share one history"
