"""End to end: the suite against an engine that misbehaves on the wire, and one that is lost.

For each transport fault of the reference engine (``faults.py``) the acceptance
suite runs a few text checks: the checks whose requests meet the fault must fail
with a message naming it, within the configured timeouts, with the raw bytes that
arrived attached (capped); the checks the fault does not touch must still run and
pass; and the run must end with a summary and a ``gate.json`` that agree.

Timeouts are small (seconds) so the faults that hang cost little. The elapsed
times checked against them are the issue's demand ("finishing within the
configured timeouts"); each gets a slack for a loaded machine, said where it is.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from allure_results import read_results
from bare_server import serving
from suite_runner import REPO, failed, run_suite

from engine_acceptance.wire import health as engine_health
from engine_acceptance.wire.client import MAX_REPLY_BYTES, RawStreamingClient, SdkChatClient
from engine_acceptance.wire.types import ClientTimeouts, EngineTarget
from engine_acceptance.reference_engine.faults import HUGE_REPLY_BYTES
from engine_acceptance.reference_engine.launcher import start_reference_engine
from engine_acceptance.report_attachments import RAW_ATTACH_LIMIT

pytestmark = pytest.mark.e2e

# Three checks in file order: one that sends no chat request, then two that each send
# one chat request, non-streamed and streamed.
SELECTION = ("-m", "text", "-k", "models_endpoint or reply_has_content or max_tokens_cuts", "-p", "no:randomly")
MODELS = "test_text.py::test_models_endpoint_lists_the_served_model"
CONTENT = "test_text.py::test_reply_has_content_and_a_valid_finish_reason"
MAX_TOKENS = "test_text.py::test_max_tokens_cuts_the_reply_with_finish_reason_length"
STREAMED = {f"{CONTENT}[streamed]", f"{MAX_TOKENS}[streamed]"}
NON_STREAMED = {f"{CONTENT}[non-streamed]", f"{MAX_TOKENS}[non-streamed]"}
# What an asyncio timer may overrun on a busy 2-core machine before the client acts on it.
TIMER_SLACK_S = 2.0


@dataclass(frozen=True)
class Fault:
    name: str
    affected: frozenset[str]
    message: str  # a phrase every affected check's failure must contain
    idle_s: float = 30.0
    total_s: float = 60.0
    limit: str | None = None  # the timeout that must end each affected request: "idle" or "total"
    raw_attached: bool = True  # bytes arrive before the failure, so the raw bytes are attached
    # --probe-timeout: the capability probes (non-streamed, before any check) meet the fault too. Where it
    # holds them (a hang, a drip, 32 MiB read by each), they are found broken after a second, not at the
    # request timeout; no selected check depends on what they find.
    probe_s: float = 60.0


FAULTS = [
    Fault("stream-stall", frozenset(STREAMED), "idle timeout: the reply stalled mid-way", idle_s=1.0, limit="idle"),
    # A stream's status is due at once (idle timeout); a non-streamed reply may take the whole request
    # timeout to generate (test_slow_engine.py checks which limit ends each).
    Fault("never-answer", frozenset(STREAMED | NON_STREAMED),
          "timeout: the engine accepted the request and sent no response", idle_s=1.0, total_s=2.0,
          raw_attached=False, probe_s=1.0),
    Fault("stream-reset", frozenset(STREAMED), "Connection reset by peer"),
    Fault("sse-bad-json", frozenset(STREAMED), "stream with an unusable event: event data is not JSON"),
    Fault("error-body-200", frozenset(STREAMED | NON_STREAMED), "HTTP 200"),
    Fault("503-storm", frozenset(STREAMED | NON_STREAMED), "HTTP 503"),
    Fault("huge-reply", frozenset(STREAMED | NON_STREAMED), "larger than the 32 MiB cap", probe_s=1.0),
    # A byte a second: the idle timeout (2 s: a second over the drip's gaps) never fires, the total (3 s) must.
    Fault("slow-drip", frozenset(STREAMED | NON_STREAMED), "total timeout: the request took longer than 3s "
          "although bytes kept arriving", idle_s=2.0, total_s=3.0, limit="total", probe_s=1.0),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.name for fault in FAULTS])
def test_fault_fails_the_affected_checks_naming_it_and_the_run_completes(pytester: pytest.Pytester,
                                                                        fault: Fault) -> None:
    result, outcomes = run_suite(pytester, *SELECTION, "--inject", fault.name, "--connect-timeout", "5",
                                 "--idle-timeout", str(fault.idle_s), "--request-timeout", str(fault.total_s),
                                 "--probe-timeout", str(fault.probe_s))
    output = result.stdout.str()[-4000:]
    assert set(outcomes) == {MODELS} | STREAMED | NON_STREAMED, output
    # The affected checks fail; every other check still ran and passed.
    assert failed(outcomes) == fault.affected, output
    assert {t for t, o in outcomes.items() if o == "passed"} == set(outcomes) - fault.affected, output
    assert result.ret == 1
    # The terminal summary and gate.json agree with what happened.
    counted = result.parseoutcomes()
    assert counted.get("failed", 0) == len(fault.affected) and counted.get("passed", 0) == 5 - len(fault.affected)
    gate = json.loads((pytester.path / "gate.json").read_text())
    assert gate["gate"] == "fail" and gate["interrupted"] is None
    assert {check["id"].split("tests/", 1)[-1] for check in gate["failing_checks"]} == fault.affected

    reports = read_results(pytester.path / "allure-results")
    for test_id in fault.affected:
        report = reports[test_id.split("::", 1)[1]]
        assert report.status == "failed" and fault.message in report.message, (test_id, report.message)
        assert report.responses(), f"{test_id}: its request is not in the report"
        for response in report.responses():
            elapsed = response["elapsed_s"]
            assert elapsed <= fault.total_s + TIMER_SLACK_S, f"{test_id} took {elapsed}s: past the total timeout"
            if fault.limit == "idle":
                assert elapsed < fault.total_s, f"{test_id}: the idle timeout should have ended it, not the total"
                assert elapsed <= fault.idle_s + TIMER_SLACK_S, f"{test_id} took {elapsed}s: past the idle timeout"
        raw = report.attachment_texts("raw response bytes")
        if fault.raw_attached:
            assert raw, f"{test_id}: the raw bytes that arrived are not attached"
            # Capped: never the whole reply (huge-reply sends 512 MiB).
            assert all(len(text.encode()) <= RAW_ATTACH_LIMIT + 64 for text in raw)
    if fault.name == "huge-reply":
        # The attachment of a reply cut at the cap says it was cut.
        raw = reports["test_reply_has_content_and_a_valid_finish_reason[non-streamed]"].attachment_texts(
            "raw response bytes")
        assert raw and raw[0].endswith("…[truncated]")


@pytest.mark.parametrize("stream", [False, True], ids=["non-streamed", "streamed"])
def test_huge_reply_is_abandoned_at_the_cap_by_both_clients_never_held_whole(stream: bool) -> None:
    """Several hundred MB must never sit in memory: each client stops reading at MAX_REPLY_BYTES."""
    with start_reference_engine(defects=["huge-reply"]) as engine:
        target = EngineTarget(engine.url, "reference-model", timeouts=ClientTimeouts(connect=5, idle=30, total=120))
        body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 64}

        async def sdk() -> object:
            async with SdkChatClient(target) as client:
                return await client.chat(body, stream=stream)

        async def raw() -> object:
            async with RawStreamingClient(target) as client:
                return await client.post("/v1/chat/completions", {**body, "model": target.model, "stream": stream})

        for send in (sdk, raw):
            tracemalloc.start()
            try:
                exchange = asyncio.run(send())
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert exchange.error_kind == "protocol" and "larger than the 32 MiB cap" in exchange.error
            # Reading stopped at the cap (one more read at most), far short of the 512 MiB sent.
            assert exchange.bytes_received <= MAX_REPLY_BYTES + (1 << 20)
            assert peak < HUGE_REPLY_BYTES // 2, f"{send.__name__}: {peak / 2**20:.0f} MiB held for one reply"
            assert not exchange.ok


def test_503_storm_is_not_retried(pytester: pytest.Pytester) -> None:
    """Each check sends its request once: the engine logs exactly one 503 per chat request."""
    with start_reference_engine(defects=["503-storm"]) as engine:
        result, outcomes = run_suite(pytester, *SELECTION, "--engine-url", engine.url)
        log = engine.read_log()
    assert failed(outcomes) == STREAMED | NON_STREAMED, result.stdout.str()[-3000:]
    # One chat request per affected check, and one per capability probe before the run (tools,
    # image and video each with and without the media, structured outputs, a plain chat, the prefix
    # cache's first prompt, a thinking budget; the thinking switches are tried only after a plain reply,
    # the prefix cache's second prompt only after its first): a retrying client would show more.
    assert log.count("fault 503-storm: 503 for POST /v1/chat/completions") == len(STREAMED | NON_STREAMED) + 9, log


def _waited(report) -> bool:
    """Whether a request of this check really waited for a timeout (the client's own record)."""
    return any(response.get("error_kind") == "timeout" for response in report.responses())


def test_engine_crash_fails_every_remaining_check_at_once_naming_the_time(pytester: pytest.Pytester) -> None:
    """media-crash kills the engine on the first corrupt sample; nothing after may wait for a timeout."""
    result, outcomes = run_suite(pytester, "-m", "corrupt_media or text", "--inject", "media-crash",
                                 "--idle-timeout", "60", "--request-timeout", "120", "-p", "no:randomly")
    assert result.ret == 1, result.stdout.str()[-3000:]
    reports = read_results(pytester.path / "allure-results")
    failures = {test_id: reports[test_id.split("::", 1)[1]] for test_id in failed(outcomes)}
    assert len(failures) > 10
    for test_id, report in failures.items():
        assert "engine unreachable since" in report.message, (test_id, report.message)
        assert not _waited(report), f"{test_id} waited for a timeout on an engine known to be gone"


def _wait_for(predicate, what: str, limit_s: float = 120.0) -> None:
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_frozen_engine_costs_one_timeout_per_worker_then_every_check_fails_fast(tmp_path: Path) -> None:
    """An engine that stops answering (SIGSTOP: the port still accepts, nothing replies) mid-run.

    Each xdist worker waits out one timeout (the idle timeout for a stream, the request
    timeout for a non-streamed reply), probes /health, gets no answer, and fails
    everything it has left at once: at most one timeout per worker.
    """
    workers = 2
    alluredir = tmp_path / "allure-results"
    with start_reference_engine() as engine:
        command = [sys.executable, "-m", "pytest", "-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO),
                   # Hypothesis's plugin imports hypothesis (a second a process) for nothing, as in run_suite.
                   str(REPO / "tests"), "-p", "no:cacheprovider", "-p", "no:randomly", "-p", "no:hypothesispytest",
                   f"--alluredir={alluredir}", f"--gate-json={tmp_path / 'gate.json'}", "-m", "text",
                   "-k", "not models_endpoint",
                   "--engine-url", engine.url, "--connect-timeout", "2", "--idle-timeout", "2",
                   # A non-streamed check waits out the request timeout: short, as it is waited for.
                   "--request-timeout", "3", "-n", str(workers)]
        with open(tmp_path / "out.txt", "wb") as out:
            suite = subprocess.Popen(command, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: any(alluredir.glob("*-result.json")), "the first finished check")
            os.kill(engine.pid, signal.SIGSTOP)
            suite.wait(timeout=300)
        finally:
            os.kill(engine.pid, signal.SIGCONT)
            if suite.poll() is None:
                suite.kill()
    output = (tmp_path / "out.txt").read_text(errors="replace")
    assert suite.returncode == 1, output[-3000:]
    reports = read_results(alluredir)
    failures = {name: r for name, r in reports.items() if r.status in ("failed", "broken")}
    assert failures, output[-3000:]
    waited = [name for name, report in failures.items() if _waited(report)]
    assert 1 <= len(waited) <= workers, waited
    for name, report in failures.items():
        assert "engine unreachable since" in report.message, (name, report.message)
    gate = json.loads((tmp_path / "gate.json").read_text())
    assert gate["gate"] == "fail" and len(gate["failing_checks"]) == len(failures)


def test_engine_health_reports_nothing_while_the_engine_answers() -> None:
    """A reset that the engine survives (stream-reset) must not be taken for a lost engine."""
    with start_reference_engine(defects=["stream-reset"]) as engine:
        target = EngineTarget(engine.url, "reference-model", timeouts=ClientTimeouts(connect=2, idle=2, total=5))

        async def twice() -> list:
            async with SdkChatClient(target) as client:
                body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}
                return [await client.chat(body, stream=True), await client.chat(body, stream=False)]

        try:
            reset, after = asyncio.run(twice())
        finally:
            engine_health.forget(engine.url)
    assert reset.error_kind == "connection" and "engine unreachable" not in reset.error
    assert after.ok, after.describe_failure()


def test_sdk_reading_of_a_huge_error_body_is_capped_too() -> None:
    """The SDK reads a 4xx/5xx body whole before raising; the client's response hook bounds that read.

    No fault of the reference engine sends a huge error, so a bare aiohttp server does:
    this tests the client's reading, not an acceptance check.
    """
    async def huge_error(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=500, headers={"Content-Type": "application/json"})
        await response.prepare(request)
        try:
            await response.write(b'{"error": {"message": "')
            for _ in range(HUGE_REPLY_BYTES // (1 << 20)):
                await response.write(b"e" * (1 << 20))
        except ConnectionError:
            pass
        return response

    async def scenario() -> object:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", huge_error)
        async with serving(app) as url:
            target = EngineTarget(url, "m", timeouts=ClientTimeouts(5, 30, 120))
            async with SdkChatClient(target) as client:
                return await client.chat({"messages": [{"role": "user", "content": "hi"}]}, stream=False)

    exchange = asyncio.run(scenario())
    assert exchange.status == 500 and exchange.error_kind == "protocol"
    assert "HTTP 500 reply is larger than the 32 MiB cap" in exchange.error


def test_error_body_200_in_the_flat_sglang_shape_fails_too(pytester: pytest.Pytester) -> None:
    """SGLang (and older vLLM) write errors flat ({"object": "error", ...}): still not a reply."""
    result, outcomes = run_suite(pytester, *SELECTION, "--inject", "error-body-200", "--convention", "sglang")
    assert failed(outcomes) == STREAMED | NON_STREAMED, result.stdout.str()[-3000:]
    reports = read_results(pytester.path / "allure-results")
    assert "HTTP 200 with an error body instead of a reply" in reports[
        "test_reply_has_content_and_a_valid_finish_reason[non-streamed]"].message
    assert "error event in stream" in reports["test_reply_has_content_and_a_valid_finish_reason[streamed]"].message
