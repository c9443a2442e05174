"""The engine comparison (``python -m engine_acceptance.compare``) against reference engines.

Two reference engines whose latency models are 2x apart make a comparison with a
known answer: the slower one's output tok/s is half and its TTFT twice the faster
one's (within 5%), and both pass exactly the same checks. A reference engine with a
defect makes the functional table differ and name the checks. The ratio notes never
claim a winner when ranges overlap. Bad options stop the driver (and a pytest run
given ``--engine-url`` twice) with a usage error that says what to do.
"""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from suite_runner import run_suite

from engine_acceptance.compare.run import EngineSpec, main as compare_main, parse_args, phase_command
from engine_acceptance.compare.report import compare_figures
from engine_acceptance.reporting.results import Spread
from engine_acceptance.pytest_plugin.option_catalog import OPTIONS, driver_set_options

REPO = Path(__file__).resolve().parents[2]
# Latencies far above the client's and the machine's noise (milliseconds of Python per
# request), one token per event so TTFT is ttft_ms itself.
FAST = "fast:ttft_ms=100,tpot_ms=10,stream_chunk_tokens=1"
SLOW = "slow:ttft_ms=200,tpot_ms=20,stream_chunk_tokens=1"


def _compare(tmp_path: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "engine_acceptance.compare", "--out", str(tmp_path / "out"),
                           "--quiet", *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout)


# Where the latency model is not the point (a defect, a verdict, an engine that is gone), the built-in
# engines answer at once and every check sends one sample: each check still ends as it would, the
# text checks in a quarter of the time (issue 27).
AT_ONCE = "ttft_ms=0,tpot_ms=0"
ONE_SAMPLE = ("--", "--trials=1")


def _compare_here(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The driver's main() in this process: its exit code and what it printed.

    Each engine's phases are still pytest runs of their own; what this process saves is the
    driver's Python start and its imports, and the built-in engines are forked from the
    self-tests' forkserver (selftest/conftest.py) instead of started as the command. The 2x
    test keeps both as a user has them: a timing is its point, and it shows ``python -m``'s exit code.
    """
    # In the folder the command would run in: relative paths in the runs' arguments mean the same.
    with contextlib.chdir(tmp_path):
        code = compare_main(["--out", str(tmp_path / "out"), "--quiet", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _csv(tmp_path: Path) -> list[dict[str, str]]:
    with open(tmp_path / "out" / "comparison.csv", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _ratio(rows: list[dict[str, str]], metric: str, row: str) -> float:
    (found,) = [r for r in rows if r["metric"] == metric and r["row"] == row and r["ratio_to_base"]]
    return float(found["ratio_to_base"])


@pytest.mark.e2e
def test_engines_2x_apart_show_the_2x_ratio_and_identical_functional_results(tmp_path: Path) -> None:
    # Of the text checks, the reply check alone (-k) with one sample: at these latencies the 19 text checks
    # took 31 s on the slow engine and 17 s on the fast one, most of the test's 100 s, and what is compared
    # here is that each check ends the same way on both (the defect test below compares a whole capability).
    # Each cell's three rounds are one wave of two requests at concurrency 2 and one image request: every
    # ratio is still a median of three rounds' figures (issue 27: half the waiting of 2x4 and image@1x2).
    done = _compare(tmp_path, "--reference", FAST, "--reference", SLOW, "--select", "text or throughput",
                    "--", "--throughput-shapes", "128/32@2x2", "--media-shapes", "image-512@1x1",
                    "-k", "throughput or reply_has_content", "--trials=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = _csv(tmp_path)
    # Known answer: the slow engine takes twice as long for everything.
    assert _ratio(rows, "output_tok_s", "128/32@2") == pytest.approx(0.5, rel=0.05)
    # P95 of a few requests is nearly their slowest: one stall of the fast engine's first token on
    # these shared two cores moves its ratio (1.84 in a CI run, 1.78 beside a real engine), so the
    # ratio is held to 2 +-20%, which still tells 2x from 1x or from the engines swapped.
    assert _ratio(rows, "p95_ttft_ms", "128/32@2") == pytest.approx(2.0, rel=0.20)
    assert _ratio(rows, "p95_tpot_ms", "128/32@2") == pytest.approx(2.0, rel=0.05)
    markdown = (tmp_path / "out" / "comparison.md").read_text(encoding="utf-8")
    functional = [r for r in rows if r["metric"] == "checks"]
    by_engine = {(r["row"], r["engine"]): (r["passed"], r["failed"], r["known_defect"]) for r in functional}
    assert {row for row, _ in by_engine} >= {"text", "throughput"}
    for capability in {row for row, _ in by_engine}:
        assert by_engine[(capability, "fast")] == by_engine[(capability, "slow")], capability
    assert "ended the same way on every engine" in markdown
    assert "| image-512 | 1 |" in markdown and "processor cache" in markdown
    results = list((tmp_path / "out" / "allure-results").glob("*-result.json"))
    assert len(results) == 1
    attachments = {a["type"] for a in json.loads(results[0].read_text())["attachments"]}
    assert attachments == {"text/markdown", "text/csv", "text/html"}
    for name in ("fast", "slow"):
        for phase, files in (("functional", ("gate.json", "junit.xml", "pytest.log")),
                             ("throughput", ("gate.json", "junit.xml", "throughput.json"))):
            for file in files:
                assert (tmp_path / "out" / name / phase / file).is_file(), f"{name}/{phase}/{file}"


@pytest.mark.e2e
def test_a_defect_on_one_engine_shows_as_differing_results_and_the_acceptance_phase_gives_each_its_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One comparison proves both (issue 27: they were two of the same engines, each comparing the text
    # checks): the acceptance phase, the README's one command per engine, gives each engine its own
    # verdict, and the defect shows in the functional table as the checks that ended differently, with
    # the failing side's reason. The functional phase's own run is the 2x test's and the unavailable one's.
    code, output = _compare_here(tmp_path, capsys, "--reference", f"clean:{AT_ONCE}", "--reference",
                                 f"broken:{AT_ONCE},inject=empty-content", "--phase", "acceptance", "--select",
                                 "text and not recall", *ONE_SAMPLE)
    assert code == 0, output[-6000:]
    verdicts = {name: json.loads((tmp_path / "out" / name / "acceptance" / "gate.json").read_text())["gate"]
                for name in ("clean", "broken")}
    assert verdicts == {"clean": "pass", "broken": "fail"}, verdicts
    markdown = (tmp_path / "out" / "comparison.md").read_text(encoding="utf-8")
    assert "phases acceptance" in markdown
    functional = markdown.split("### Checks passed by capability", 1)[1].split("###", 1)[0]
    text_row = next(line for line in functional.splitlines() if line.startswith("| text |"))
    assert text_row.endswith("| no |"), text_row
    assert "checks ended differently: each is in the table" in markdown
    differences = markdown.split("### Checks that ended differently", 1)[1].split("###", 1)[0]
    # Each differing check with its outcome on each engine, and the failing side's reason.
    assert "| passed | failed: " in differences, differences
    # What each serves, from each verdict: the capability rows (tokenize among them), where the gauges are read.
    serving = markdown.split("### What each engine serves", 1)[1].split("###", 1)[0]
    # The clean side passes text at one sample of three (a shortfall, said in the row).
    assert "| text | passed; answers trials at 1 of 3 samples per check | " in serving, serving
    assert "| tokenize | served: the measurements count prompt tokens with it | " in serving, serving
    assert "| metrics | GET /metrics (engine profile 'vllm': running vllm:num_requests_running, " in serving, serving


def test_the_acceptance_phase_is_given_alone(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--out", str(tmp_path), "--reference", "a", "--reference", "b", "--phase", "acceptance",
                    "--phase", "throughput"])


@pytest.mark.e2e
def test_an_unavailable_engine_is_reported_and_the_others_still_compared(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, output = _compare_here(tmp_path, capsys, "--engine", "gone=http://127.0.0.1:9", "--reference",
                                 f"here:{AT_ONCE}", "--phase", "functional", "--select", "text", *ONE_SAMPLE)
    assert code == 6, output[-6000:]
    markdown = (tmp_path / "out" / "comparison.md").read_text(encoding="utf-8")
    assert "| gone | http://127.0.0.1:9 | ? |" in markdown and "functional 6 |" in markdown
    functional = markdown.split("### Checks passed by capability", 1)[1].split("###", 1)[0]
    text_row = next(line for line in functional.splitlines() if line.startswith("| text |"))
    assert text_row.startswith("| text | - | ") and text_row.endswith("| no |"), text_row


def test_every_engine_gets_the_same_pytest_run_but_for_its_url_and_its_files() -> None:
    def command(name: str) -> list[str]:
        return phase_command(EngineSpec(name, url=f"http://{name}:1"), f"http://{name}:1", "throughput",
                             Path(f"/out/{name}/throughput"), select="text or throughput", workers=2, seed=7,
                             pytest_args=["--throughput-shapes", "128/32@2x4"])

    first = command("a")
    second = [arg.replace("/out/b/", "/out/a/").replace("http://b:1", "http://a:1") for arg in command("b")]
    assert first == second
    assert "--throughput-seed=7" in first and "(throughput) and (text or throughput)" in first
    assert "-n" not in first, "measurements never run under xdist"


def test_what_one_engine_leaves_off_on_purpose_is_stated_for_its_run_only() -> None:
    from engine_acceptance.compare.run import _parse_engine

    spec = _parse_engine("llama=http://l:1,not-served=tools+image")
    assert spec.not_served == "tools+image"
    folder = Path("/out/llama/acceptance")
    command = phase_command(spec, "http://l:1", "acceptance", folder, select=None, workers=None, seed=7,
                            pytest_args=[])
    assert "--not-served=tools,image" in command
    other = phase_command(EngineSpec("vllm", url="http://v:1"), "http://v:1", "acceptance", folder, select=None,
                          workers=None, seed=7, pytest_args=[])
    assert not any(arg.startswith("--not-served") for arg in other)


def test_an_engines_own_workers_replace_the_drivers_for_its_functional_checks_and_recall() -> None:
    from engine_acceptance.compare.run import _parse_engine

    llama = _parse_engine("llama=http://l:1,workers=1")
    folder = Path("/out/llama/acceptance")
    own = phase_command(llama, "http://l:1", "acceptance", folder, select=None, workers=4, seed=7, pytest_args=[])
    assert own[own.index("-n") + 1] == "1"
    other = phase_command(EngineSpec("vllm", url="http://v:1"), "http://v:1", "acceptance", folder, select=None,
                          workers=4, seed=7, pytest_args=[])
    assert other[other.index("-n") + 1] == "4"
    # The same number of recall's field-extraction prompts in flight; one worker: one at a time.
    assert "--recall-concurrency=4" in other
    assert not any(arg.startswith("--recall-concurrency") for arg in own)
    measurements = phase_command(llama, "http://l:1", "throughput", folder, select=None, workers=4, seed=7,
                                 pytest_args=[])
    assert "-n" not in measurements, "measurements never run under xdist"


def test_ratio_notes_claim_no_winner_when_ranges_overlap_or_there_is_one_value() -> None:
    base = Spread.of([90.0, 100.0, 110.0])
    assert compare_figures(base, Spread.of([95.0, 105.0, 120.0]), higher_is_better=True, other_name="b",
                           base_name="a") == (pytest.approx(1.05), "ranges overlap: no winner")
    assert compare_figures(base, Spread.of([190.0, 200.0, 210.0]), higher_is_better=True, other_name="b",
                           base_name="a") == (pytest.approx(2.0), "ranges apart: b better")
    # Latency: higher is worse.
    assert compare_figures(base, Spread.of([190.0, 200.0, 210.0]), higher_is_better=False, other_name="b",
                           base_name="a")[1] == "ranges apart: a better"
    assert compare_figures(Spread(1.0), Spread(2.0), higher_is_better=False, other_name="b",
                           base_name="a")[1] == "one value each: no range, no winner claimed"
    assert compare_figures(base, Spread(None), higher_is_better=True, other_name="b",
                           base_name="a") == (None, "not measured on both")


@pytest.mark.parametrize(("args", "message"), [
    (("--reference", "a"), "name at least two engines"),
    (("--reference", "a", "--reference", "a"), "engine names must differ"),
    (("--reference", "a:speed=2", "--reference", "b"), "'speed=2' is not one of ttft_ms=..."),
    (("--reference", "a:inject=no-such", "--reference", "b"), "unknown defect(s): no-such"),
    (("--engine", "a=localhost:8000", "--reference", "b"), "is not an http(s) URL"),
    (("--engine", "a=http://h:1,workers=0", "--reference", "b"), "workers='0' is not a whole number of at least 1"),
    (("--engine", "a=http://h:1,api-key-env=EA_NOT_SET_ANYWHERE", "--reference", "b"),
     "environment variable EA_NOT_SET_ANYWHERE (api-key-env) is not set"),
    (("--reference", "a", "--reference", "b", "--", "-m", "text"), "-m after --: the driver sets it"),
    (("--reference", "a", "--reference", "b", "--", "--engine-url=http://x:1"), "--engine-url after --"),
    (("--reference", "a", "--reference", "b", "--phase", "soak"), "--phase soak needs --soak-minutes N"),
], ids=["one-engine", "same-name", "reference-key", "reference-defect", "url", "workers", "api-key-env", "marker",
        "engine-url", "soak-minutes"])
def test_bad_driver_options_stop_it_with_a_usage_error(tmp_path: Path, args: tuple[str, ...], message: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # In this process (_compare_here): a usage error is decided before anything runs, and a new Python for
    # each of the ten cost a second or two of imports (issue 27).
    code = compare_main(["--out", str(tmp_path / "out"), "--quiet", *args])
    captured = capsys.readouterr()
    assert code == 4, captured.out + captured.err
    assert message in captured.err
    assert not (tmp_path / "out" / "comparison.md").exists()


@pytest.mark.parametrize("option", driver_set_options())
def test_every_option_declared_driver_sets_is_refused_after_the_dashes(tmp_path: Path, option: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code = compare_main(["--out", str(tmp_path / "out"), "--quiet", "--reference", "a", "--reference", "b", "--",
                         f"{option}=x"])
    assert code == 4
    assert f"{option} after --: the driver sets it for each run" in capsys.readouterr().err


def test_the_plugin_options_a_run_gets_from_the_driver_are_declared_driver_sets(tmp_path: Path) -> None:
    # The refusal list is derived from the declarations, so a declaration that forgets the mark
    # would let a user's value silently fight the driver's; --recall-concurrency is a default a user may change.
    spec = EngineSpec("e", url="http://e:1", profile="p", model="m", not_served="tools", workers=2)
    command = phase_command(spec, "http://e:1", "acceptance", tmp_path, select="text", workers=None, seed=1,
                            pytest_args=[])
    declared = {option.name for option in OPTIONS}
    given = {arg.partition("=")[0] for arg in command if arg.partition("=")[0] in declared}
    assert given - {"--recall-concurrency"} <= set(driver_set_options()), given


@pytest.mark.e2e
def test_engine_url_given_twice_is_a_usage_error_pointing_at_the_driver(pytester: pytest.Pytester) -> None:
    result, _ = run_suite(pytester, "--engine-url", "http://127.0.0.1:1", "--engine-url=http://127.0.0.1:2",
                          "-m", "text")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--engine-url: given 2 times; a run tests one engine. To compare engines side by "
                                 "side: python -m engine_acceptance.compare --engine NAME=URL*"])
