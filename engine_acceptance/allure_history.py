"""Release history for the Allure dashboard: one store per engine, carried from run to run.

Allure 2 draws its Trend widget and each check's History tab from ``history/*.json``
in the results folder it generates from, and writes the updated files to the report's
``history/``. A pipeline keeps an engine's history by carrying that folder from one
report to the next run's results. This module is that carrying, made explicit:

    python -m engine_acceptance.allure_history seed --store S --results R   before allure generate
    python -m engine_acceptance.allure_history keep --store S --results R --report REP   after it

A *store* is a folder: ``history/`` (the last report's history files, verbatim) and
``engine.json`` (the engine kind and model it belongs to, so two engines' trends never
mix in one store). ``seed`` copies the store's history into the results and numbers the
run (``buildOrder`` in ``executor.json``: one more than the store's last, the Trend's
``#N`` labels); ``keep`` replaces the store's history with the report's, only when the
report continues it. Anything unreadable stops with the file named: Allure itself would
log it and quietly start a fresh history, which loses every earlier release.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_acceptance.errors import UsageError

__all__ = ["HistoryStore", "HistoryStoreError", "keep", "main", "read_identity", "read_store", "seed"]

HISTORY = "history"
IDENTITY = "engine.json"
TREND = "history-trend.json"
# What makes two runs "the same engine" for a trend: a new release changes engine.version, not these.
IDENTITY_KEYS = ("engine.kind", "model")
# The exit code of a bad store or results folder, as the dashboard script's other input errors.
INPUT_ERROR = 2
_BUILD_PREFIX = re.compile(r"^#\d+ · ")


class HistoryStoreError(UsageError):
    """A history store, results or report folder that cannot be used as it is; the message names the file."""


@dataclass(frozen=True)
class HistoryStore:
    """A store as read: its history files (name -> parsed JSON) and the engine it belongs to."""

    path: Path
    files: dict[str, Any]
    identity: dict[str, str] | None

    def last_build(self) -> int:
        """The last run's number: the highest ``buildOrder`` of the trend (0 for a new store)."""
        return _last_build(self.files.get(TREND, []))


def read_store(path: Path) -> HistoryStore:
    """Read and check a store; a missing folder is a new, empty store."""
    if path.exists() and not path.is_dir():
        raise HistoryStoreError(f"{path}: is a file, not a history store folder")
    history = path / HISTORY
    if history.exists() and not history.is_dir():
        raise HistoryStoreError(f"{history}: is a file; a store keeps Allure's history files in this folder")
    files = _read_history(history) if history.is_dir() else {}
    identity_path = path / IDENTITY
    identity = _read_json(identity_path) if identity_path.exists() else None
    if identity is not None and not (isinstance(identity, dict) and all(isinstance(v, str) for v in identity.values())):
        raise HistoryStoreError(f"{identity_path}: expected an object of strings like {{\"engine.kind\": \"vllm\"}}")
    return HistoryStore(path, files, identity)


def read_identity(results: Path) -> dict[str, str]:
    """The engine a run tested, from the ``environment.properties`` the plugin wrote into its results."""
    path = results / "environment.properties"
    if not path.is_file():
        raise HistoryStoreError(f"{path}: missing; history is kept for engine-acceptance results, which name "
                                "their engine there (run the suite with --alluredir first)")
    facts = _read_properties(path)
    missing = [key for key in IDENTITY_KEYS if key not in facts]
    if missing:
        raise HistoryStoreError(f"{path}: has no {', '.join(missing)}; cannot tell which engine's history this is")
    return {key: facts[key] for key in IDENTITY_KEYS}


def seed(store_path: Path, results: Path, *, report_url: str | None = None) -> int:
    """Put the store's history into ``results/history`` and number the run; return its build number.

    Nothing is written until the store and the results have been read whole, and the
    store itself is never changed here, so a failed generation afterwards loses nothing.
    Seeding the same results twice gives the same number.
    """
    store = read_store(store_path)
    _check_identity(store, read_identity(results))
    executor_path = results / "executor.json"
    executor = _read_json(executor_path) if executor_path.exists() else {"name": "engine-acceptance"}
    if not isinstance(executor, dict):
        raise HistoryStoreError(f"{executor_path}: expected a JSON object (Allure's executor info)")
    build = store.last_build() + 1
    target = results / HISTORY
    if target.is_dir():
        shutil.rmtree(target)  # a results folder used before: the store, not a leftover, is the history
    elif target.exists():
        target.unlink()
    if store.files:
        target.mkdir(parents=True)
        for name in store.files:
            shutil.copyfile(store_path / HISTORY / name, target / name)
    executor["buildOrder"] = build
    executor["buildName"] = f"#{build} · {_BUILD_PREFIX.sub('', str(executor.get('buildName', 'engine-acceptance')))}"
    if report_url:
        # Allure links each History entry to <reportUrl>#testresult/<uid>: the report that run published.
        executor["reportUrl"] = report_url
    executor_path.write_text(json.dumps(executor, indent=2) + "\n", encoding="utf-8")
    return build


def keep(store_path: Path, results: Path, report: Path) -> int:
    """Replace the store's history with the generated report's; return the build number kept.

    Only a report that continues the store is kept: its trend must start with this run
    (the ``buildOrder`` ``seed`` gave) and that number must follow the store's last, so a
    report generated without seeding can never cut an engine's history short. The swap
    goes through a new folder, so an interrupted keep leaves the old history in place.
    """
    store = read_store(store_path)
    identity = read_identity(results)
    _check_identity(store, identity)
    executor = _read_json(results / "executor.json") if (results / "executor.json").exists() else {}
    build = executor.get("buildOrder") if isinstance(executor, dict) else None
    history = report / HISTORY
    if not history.is_dir():
        raise HistoryStoreError(f"{history}: missing; was {report} generated by Allure 2 (allure generate)?")
    files = _read_history(history)
    trend = files.get(TREND)
    first = trend[0].get("buildOrder") if trend else None
    if not isinstance(build, int) or first != build or build <= store.last_build():
        raise HistoryStoreError(
            f"{history}: does not continue the store {store_path} (its last run is #{store.last_build()}, this "
            f"report's newest is #{first}, the results' executor.json says #{build}); seed the results from the "
            f"store before allure generate. The store is left as it was")
    store_path.mkdir(parents=True, exist_ok=True)
    incoming, previous = store_path / f"{HISTORY}.incoming", store_path / f"{HISTORY}.previous"
    for leftover in (incoming, previous):
        if leftover.exists():
            shutil.rmtree(leftover)
    shutil.copytree(history, incoming)
    (store_path / IDENTITY).write_text(json.dumps(identity, indent=2) + "\n", encoding="utf-8")
    if (store_path / HISTORY).exists():
        (store_path / HISTORY).rename(previous)
    incoming.rename(store_path / HISTORY)
    if previous.exists():
        shutil.rmtree(previous)
    return build


def _check_identity(store: HistoryStore, identity: dict[str, str]) -> None:
    if store.identity is not None and store.identity != identity:
        raise HistoryStoreError(
            f"{store.path / IDENTITY}: this store holds the history of {_engine(store.identity)}, and these "
            f"results are of {_engine(identity)}; keep one store per engine (e.g. allure-history/<engine>) so "
            "two engines' trends do not mix")


def _engine(identity: dict[str, str]) -> str:
    return f"{identity.get('engine.kind', '?')} serving {identity.get('model', '?')!r}"


def _last_build(trend: list[dict[str, Any]]) -> int:
    # Entries written without an executor have no buildOrder; counting them keeps the numbers rising.
    orders = [entry["buildOrder"] for entry in trend if isinstance(entry.get("buildOrder"), int)]
    return max([*orders, len(trend)]) if trend else 0


def _read_history(folder: Path) -> dict[str, Any]:
    files = {path.name: _read_json(path) for path in sorted(folder.glob("*.json"))}
    trend = files.get(TREND)
    if trend is not None and not (isinstance(trend, list) and all(isinstance(entry, dict) for entry in trend)):
        raise HistoryStoreError(f"{folder / TREND}: expected a list of trend entries, newest first")
    return files


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HistoryStoreError(f"{path}: not readable as JSON ({exc}); fix or remove it. Nothing was "
                                "changed, and no fresh history was started in its place") from None


def _read_properties(path: Path) -> dict[str, str]:
    facts = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            # The plugin's writer escapes backslashes and line ends (reporting/allure_files.write_environment).
            facts[key.strip()] = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)
    return facts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m engine_acceptance.allure_history",
                                     description="Carry one engine's Allure history from report to report")
    commands = parser.add_subparsers(dest="command", required=True)
    seed_cmd = commands.add_parser("seed", help="Before allure generate: the store's history into the results")
    keep_cmd = commands.add_parser("keep", help="After allure generate: the report's history into the store")
    for command in (seed_cmd, keep_cmd):
        command.add_argument("--store", type=Path, required=True, help="The engine's history store folder")
        command.add_argument("--results", type=Path, required=True, help="The run's Allure results folder")
    seed_cmd.add_argument("--report-url", default=None,
                          help="Where this run's report will be published, so History entries link to it")
    keep_cmd.add_argument("--report", type=Path, required=True, help="The report allure generate wrote")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "seed":
            build = seed(args.store, args.results, report_url=args.report_url)
            source = f"the history up to run #{build - 1} from {args.store}" if build > 1 else \
                f"no earlier runs: {args.store} starts a new history"
            print(f"allure history: {args.results / HISTORY} holds {source}; this run is #{build}")
        else:
            build = keep(args.store, args.results, args.report)
            print(f"allure history: {args.store} now ends with run #{build} ({args.report / HISTORY})")
    except HistoryStoreError as exc:
        print(f"allure history: error: {exc}", file=sys.stderr)
        return INPUT_ERROR
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
