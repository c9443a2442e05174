"""Reading a run bundle: the folder or its run.json, and a usage error naming the path and the fault."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diff_bundles import bundle, write

from engine_acceptance.diff.bundle import BundleError, read_bundle
from engine_acceptance.errors import EngineAcceptanceError, UsageError


def test_a_bundle_is_read_from_its_folder_or_its_run_json(tmp_path: Path) -> None:
    folder = write(tmp_path / "run-bundle", bundle())
    assert read_bundle(folder).document == read_bundle(folder / "run.json").document
    assert read_bundle(folder).path == folder / "run.json"
    assert read_bundle(folder).label.startswith("vllm 0.1.0+reference")


def test_a_bundle_error_is_a_usage_error_of_the_one_tree() -> None:
    assert issubclass(BundleError, UsageError) and issubclass(BundleError, EngineAcceptanceError)


@pytest.mark.parametrize(("content", "says"), [
    (None, "does not exist"),
    ("{not json", "not JSON"),
    ("[1, 2]", "a JSON list, not a run bundle's object"),
    ('{"gate": "pass"}', "no bundle_version, not a run bundle"),
    ('{"bundle_version": 2}', "bundle_version 2, but this diff reads version 1"),
    ('{"bundle_version": 1, "checks": {}}', "'checks' is a JSON dict, not an array"),
    ('{"bundle_version": 1, "checks": [{"id": "t::a"}]}', "checks[0] has no 'outcome'"),
], ids=["missing", "not-json", "not-an-object", "no-version", "other-version", "wrong-section-type", "entry-lacks-a-key"])
def test_an_unreadable_bundle_names_its_path_and_what_is_wrong(tmp_path: Path, content: str | None, says: str) -> None:
    path = tmp_path / "run.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BundleError, match=str(path)) as raised:
        read_bundle(path)
    assert says in str(raised.value)


def test_a_folder_without_run_json_is_named(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=f"no run.json in the folder {tmp_path}"):
        read_bundle(tmp_path)


def test_sections_a_run_left_out_read_as_empty(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"bundle_version": 1}))
    read = read_bundle(tmp_path)
    assert read.section("checks") == [] and read.section("verdict") == {} and read.suite_version == "?"
