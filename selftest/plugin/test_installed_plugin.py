"""The plugin as installed (its ``pytest11`` entry point), driven through pytester from empty folders.

Each run is a new Python as a user's is, but the bad options': those stop at their options, so
they run in this process, where pytest.main loads the entry points again for each run.

- outside an acceptance run it stays passive: another project's tests run as before,
  no engine starts, no verdict is written;
- ``pytest --engine-url=URL`` in a folder with no tests runs the shipped checks;
- ``pytest -p engine_acceptance`` asks for the suite explicitly;
- markers come from the plugin, not from the checkout's ``pytest.ini``;
- bad option values stop the run with exit 4 and the option named.
"""

from __future__ import annotations

import pytest

from engine_acceptance.pytest_plugin.suite import marker_lines
from engine_acceptance.reference_engine.config import LatencyModel
from engine_acceptance.reference_engine.launcher import start_reference_engine

pytestmark = pytest.mark.e2e


def test_another_projects_tests_run_untouched(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_other="def test_one():\n    assert 1\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    output = result.stdout.str() + result.stderr.str()
    assert "engine-acceptance:" not in output and "GATE" not in output, output
    assert not (pytester.path / "gate.json").exists()


def test_engine_url_in_an_empty_folder_runs_the_shipped_checks(pytester: pytest.Pytester) -> None:
    # Answering at once: what is proven is which checks run, not how fast the engine streams (issue 27).
    with start_reference_engine(latency=LatencyModel(ttft_ms=0, tpot_ms=0)) as engine:
        result = pytester.runpytest_subprocess(f"--engine-url={engine.url}", "-m", "streaming", "-p",
                                               "no:cacheprovider", "--strict-markers")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["*GATE: PASS*"])
    assert (pytester.path / "gate.json").exists()


def test_p_engine_acceptance_without_a_url_uses_the_built_in_engine(pytester: pytest.Pytester) -> None:
    # The engine answering at once, one sample per check: what is proven is which engine answers (issue 27).
    result = pytester.runpytest_subprocess("-p", "engine_acceptance", "-m", "text and not usage", "-p",
                                           "no:cacheprovider", "--reference-latency=0,0", "--trials=1")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.stdout.fnmatch_lines(["*THE BUILT-IN REFERENCE ENGINE*", "*GATE: PASS*"])


def test_the_plugin_registers_its_markers(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--markers", "-p", "no:cacheprovider")
    names = [line.split(":", 1)[0] for line in marker_lines()]
    result.stdout.fnmatch_lines([f"@pytest.mark.{name}*" for name in names])


@pytest.mark.parametrize(("args", "message"), [
    (("--engine-url=ftp://host:1",), "*--engine-url: 'ftp://host:1' is not an http(s) URL*"),
    (("--engine-url=http://u:p@host:1",), "*--engine-url: put credentials in --api-key*"),
    (("--request-timeout=0",), "*--request-timeout: '0' must be a positive number of seconds*"),
    (("--inject=no-such-defect",), "*--inject: unknown defect 'no-such-defect'; known: *"),
    (("--recall-tokens=12",), "*--recall-tokens: '12' is below the minimum of*"),
    (("--engine-url=http://127.0.0.1:9", "--inject=early-eos"), "*apply to the built-in reference engine only*"),
    (("--expect=teleportation",), "*--expect*teleportation*"),
], ids=["url-scheme", "url-credentials", "timeout", "defect", "recall-tokens", "inject-with-url", "expect"])
def test_a_bad_option_stops_the_run_with_exit_4_naming_it(pytester: pytest.Pytester, args: tuple[str, ...],
                                                          message: str) -> None:
    # In this process (the module's docstring says why): a new Python for each of the seven cost two to
    # three seconds of imports (issue 27).
    result = pytester.runpytest_inprocess("-p", "engine_acceptance", "-p", "no:cacheprovider", *args)
    assert result.ret == 4, result.stdout.str() + result.stderr.str()
    result.stderr.fnmatch_lines([message])


def test_an_absolute_path_given_as_a_separate_word_is_an_option_value(pytester: pytest.Pytester,
                                                                      tokenizer_json) -> None:
    # Once the rootdir moved to such a path and the checkout's conftest (which loaded the
    # plugin) was never read: "unrecognized arguments: --tokenizer". The entry point has
    # registered the options before pytest looks at the arguments.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--collect-only", "-q", "-m", "text",
                                           "--engine-url", "http://127.0.0.1:9", "--tokenizer", str(tokenizer_json))
    assert result.ret == 0, result.stdout.str() + result.stderr.str()
    assert "unrecognized arguments" not in result.stderr.str()
    result.stdout.fnmatch_lines(["*test_text.py::*"])
