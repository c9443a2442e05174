"""Runs the acceptance suite through pytester, for end-to-end self-tests.

Every capability's self-tests use it the same way: start the suite against the
built-in reference engine (optionally with ``--inject DEFECT``) and compare the
set of failed test ids with the checks that exist for that defect.

A run is in this worker's Python (``pytester.runpytest_inprocess``): the suite's own pytest
session, plugin, options, engine start, verdict and exit code, without a Python start and the
import of the suite (openai, allure, the plugin: about three seconds on two cores, most of a
short run's time; issue 27). What a new process would have and this one must not keep, the run
resets: the suite's caches and the engines it saw die (``_fresh_caches``), and the modules it
imported (pytester restores ``sys.modules`` after each run; ``selftest/conftest.py`` loads the
one library that must not be loaded twice). The built-in engine still runs in its own process.
``in_process=False`` runs it as a user does, in a new process: the whole-suite run that proves
the parallel run, the API key and the report does, and so do the interrupt and soak
self-tests, which signal the suite's process group (their own ``subprocess``).
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

__all__ = ["ENGINE_WITHOUT_VIDEO", "NO_LATENCY", "REPO", "SMALLER_MEASUREMENTS", "engine_without_video", "failed",
           "run_suite"]

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "engine_acceptance"

# Every measurement of the default command, each still run end to end, at a smaller size: one
# throughput round, one image and the video cell of the media matrix with two requests each, 40
# of the 319 tool-accuracy cases (every shape) and recall at 65,536 tokens, not the reference
# profile's million. For the self-tests that run the whole suite for another reason (a convention,
# an API key, a defect that must fail its one check and nothing else): the default command at its
# full size is CI's first stage (.ci/run, README command 1), and each measurement's own self-tests
# prove what it catches. The verdict says each cut as a SHORTFALL line; none fails the gate.
# The built-in engine's latency model (2 ms to a first token, 1 ms a token) is a throughput run's
# ground truth; in a run of functional checks it is only waiting, about half of such a run: the
# 154 functional checks took 22.5 s against 10.1 s at 0,0, the same CPU, the same outcomes. The
# proofs whose point is not a timing run so (the default command keeps the model, CI's first stage).
NO_LATENCY = ("--reference-latency=0,0",)

SMALLER_MEASUREMENTS = ("--throughput-rounds=1", "--media-shapes=image-512@1x2,video-16frames@1x2",
                        "--tool-accuracy-cases=40", "--recall-tokens=65536")


# The engine profile engine_without_video writes: generic's, naming no way to send a video.
ENGINE_WITHOUT_VIDEO = "plain-serve"


def engine_without_video(folder: Path) -> str:
    """A profiles dir (for ``--profiles-dir``) holding :data:`ENGINE_WITHOUT_VIDEO`: the generic engine profile
    with ``video_content_type: null``, so no video can be sent, probed or checked."""
    text = (REPO / "fixtures" / "profiles" / "engines" / "generic.yaml").read_text(encoding="utf-8")
    assert "  video_content_type: video_url\n" in text, "generic.yaml no longer names video_url"
    (folder / "engines").mkdir(parents=True, exist_ok=True)
    (folder / "engines" / f"{ENGINE_WITHOUT_VIDEO}.yaml").write_text(
        text.replace("name: generic", f"name: {ENGINE_WITHOUT_VIDEO}").replace(
            "  video_content_type: video_url\n", "  video_content_type: null\n"), encoding="utf-8")
    return str(folder)


def run_suite(pytester: pytest.Pytester, *args: str,
              in_process: bool = True) -> tuple[pytest.RunResult, dict[str, str]]:
    """Run the acceptance suite; return the result and each test's outcome by id."""
    junit = pytester.path / "junit.xml"
    arguments = (
        "-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO), str(REPO / "tests"),
        # Hypothesis's plugin imports hypothesis (a second) for nothing: the suite does not use it.
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", f"--alluredir={pytester.path / 'allure-results'}",
        f"--junitxml={junit}", *args,
    )
    if in_process:
        _fresh_caches()
        result = pytester.runpytest_inprocess(*arguments)
    else:
        result = pytester.runpytest_subprocess(*arguments)
    return result, _outcomes(junit)


# Caches that a new process would fill with the same values: what they hold depends only on files
# shipped inside the package (JSON schemas, test media, prompts) or on nothing at all, never on a
# file a self-test writes. Emptied before every run they cost about 0.25 s of CPU a run (the two
# profile schemas checked again, 94 ms each; the CA bundle read again, 53 ms; cProfile of
# selftest/e2e/test_e2e_responses.py), over some three hundred in-process runs.
KEPT_CACHES = frozenset({
    "engine_acceptance.profiles.profile._validator",
    "engine_acceptance.profiles.tool_schemas._load",
    "engine_acceptance.profiles.expectations._check_pattern",
    "engine_acceptance.wire.client.tls_context",
    "engine_acceptance.media.library._font",
    "engine_acceptance.media.library._generated",
    "engine_acceptance.media.library._committed_manifest",
    "engine_acceptance.reporting.charts.pyplot",
    "engine_acceptance.resources.suite_root",
})


def _fresh_caches() -> None:
    """Empty the ``functools`` caches of the suite's modules, as a new process has them.

    A self-test may rewrite a profile, a record file or a baseline between two runs at the
    same path; a cache filled by the first run must not answer the second. Only
    :data:`KEPT_CACHES` stay: a new process would fill them with the same values.
    """
    # An engine a run saw die is remembered by URL (wire/health.py); a new process knows none.
    from engine_acceptance.wire import health

    health.forget()
    for name, module in list(sys.modules.items()):
        if name == PACKAGE or name.startswith(f"{PACKAGE}.") or name.startswith("fixtures."):
            for value in list(vars(module).values()):
                clear = getattr(value, "cache_clear", None)
                # By where the function is defined: other modules import it under their own names.
                where = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
                if callable(clear) and where not in KEPT_CACHES:
                    clear()


def _outcomes(junit: Path) -> dict[str, str]:
    if not junit.exists():
        return {}
    outcomes = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]
        test_id = f"{module}.py::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[test_id] = ("failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds
                             else "passed")
    return outcomes


def failed(outcomes: dict[str, str]) -> set[str]:
    return {test_id for test_id, outcome in outcomes.items() if outcome == "failed"}
