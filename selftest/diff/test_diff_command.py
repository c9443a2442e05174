"""The diff's command line: its exit codes under --fail-on, its outputs, and both entry points."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from diff_bundles import CHECK_IDS, bundle, cell, check, write

from engine_acceptance import cli
from engine_acceptance.diff.command import main


@pytest.fixture
def clean(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "base", bundle(1)), write(tmp_path / "new", bundle(2))


def _new(tmp_path: Path, **changes: Any) -> Path:
    return write(tmp_path / "changed", bundle(2, **changes))


def _improved(tmp_path: Path) -> Path:
    document = bundle(2)
    check(document, CHECK_IDS[2])["outcome"] = "stale_record"
    return write(tmp_path / "improved", document)


def test_fail_on_regression_is_the_default_and_exits_1_only_on_a_regression(
        tmp_path: Path, clean: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    base, new = clean
    slower = _new(tmp_path, cells=[cell(2, slower=1.3)])
    assert main([str(base), str(new)]) == 0
    assert main([str(base), str(slower)]) == 1
    assert "--fail-on=regression: exit 1" in capsys.readouterr().out
    assert main([str(base), str(_improved(tmp_path))]) == 0
    assert main([str(base), str(slower), "--fail-on=never"]) == 0


def test_fail_on_any_change_exits_1_on_an_improvement_but_not_on_noise(tmp_path: Path, clean: tuple[Path, Path]) -> None:
    base, new = clean
    assert main([str(base), str(new), "--fail-on=any-change"]) == 0
    assert main([str(base), str(_improved(tmp_path)), "--fail-on=any-change"]) == 1


def test_a_bad_bundle_or_option_exits_2_with_the_path_named(
        tmp_path: Path, clean: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    base, _ = clean
    assert main([str(base), str(tmp_path / "missing")]) == 2
    assert f"{tmp_path / 'missing'} does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main([str(base), str(base), "--tolerance=latency=3"])
    assert raised.value.code == 2 and "unknown metric 'latency'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as raised:
        main([str(base), str(base), "--fail-on=sometimes"])
    assert raised.value.code == 2


def test_a_tolerance_on_the_command_line_decides_significance(tmp_path: Path, clean: tuple[Path, Path]) -> None:
    base, _ = clean
    slower = _new(tmp_path, cells=[cell(2, slower=1.3)])
    assert main([str(base), str(slower), "--tolerance=60"]) == 0
    assert main([str(base), str(slower), "--tolerance=60", "--tolerance=ttft=10"]) == 1


def test_markdown_puts_regressions_first_and_folds_the_comparisons_without_news(
        tmp_path: Path, clean: tuple[Path, Path]) -> None:
    base, _ = clean
    document = bundle(2, cells=[cell(2, slower=1.3)])
    check(document, CHECK_IDS[0]).update(outcome="failed", reason="AssertionError: | a pipe")
    markdown = tmp_path / "diff.md"
    main([str(base), str(write(tmp_path / "failing", document)), f"--markdown={markdown}"])
    text = markdown.read_text()
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["## engine-acceptance diff", "### 1. Verdict and capabilities",
                        "### 2. Checks whose outcome changed", "### 3. Performance", "### 4. Rates", "### Not compared"]
    assert "| REGRESSION | tests/test_text.py::test_answer[streamed] | outcome | passed | failed |" in text
    assert "AssertionError: \\| a pipe" in text  # a pipe cannot break the table
    assert text.index("| REGRESSION (significant) | throughput 128/128@4 | P50 TTFT |") > text.index("### 3.")
    assert "<details><summary>Every comparison without a significant change" in text


def test_json_and_html_hold_every_finding_and_a_chart_per_significantly_changed_metric(
        tmp_path: Path, clean: tuple[Path, Path]) -> None:
    base, _ = clean
    slower = _new(tmp_path, cells=[cell(2, slower=1.3)])
    out_json, out_html = tmp_path / "diff.json", tmp_path / "out" / "diff.html"
    main([str(base), str(slower), f"--json={out_json}", f"--html={out_html}"])
    document = json.loads(out_json.read_text())
    assert document["summary"]["regressions"] == 18
    significant = [f for f in document["findings"] if f["significant"]]
    assert all(f["low"] is not None and f["high"] is not None for f in significant)
    page = out_html.read_text()
    # TTFT, TPOT, E2E, ITL (each with its four percentiles) and the two per-round throughputs.
    assert page.count("data:image/png;base64,") == 6 and "tool_schema_valid" in page


def test_engine_acceptance_diff_reaches_the_diff(clean: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    base, new = clean
    assert cli.main(["diff", str(base), str(new)]) == 0
    assert capsys.readouterr().out.startswith("engine-acceptance diff\nBASE: vllm 0.1.0+reference")


def test_python_dash_m_runs_the_diff(clean: tuple[Path, Path]) -> None:
    import subprocess
    import sys

    base, new = clean
    done = subprocess.run([sys.executable, "-m", "engine_acceptance.diff", str(base), str(new), "--fail-on=never"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "No significant change" in done.stdout, done.stderr


def test_markdown_folds_at_most_200_comparisons_and_says_where_the_rest_are(tmp_path: Path) -> None:
    cells = [cell(seed, key=f"128/128@{seed}") for seed in range(1, 16)]  # 15 cells of 18 comparisons
    base, new = write(tmp_path / "base", bundle(1, cells=cells)), write(tmp_path / "new", bundle(2, cells=cells))
    markdown = tmp_path / "diff.md"
    main([str(base), str(new), f"--markdown={markdown}"])
    text = markdown.read_text()
    assert "Every comparison without a significant change (272)" in text  # and 2 rates
    assert "72 more not shown here: --json and --html list every comparison." in text
    assert text.count("| unchanged |") == 200 and len(text) < 65536
