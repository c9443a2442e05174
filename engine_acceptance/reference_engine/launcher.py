"""Start the reference engine in a subprocess and know where it listens.

The engine runs as `python -m engine_acceptance.reference_engine --port 0` in its
own process group, so it is a real server on a real socket and a test run can
stop it without touching anything else. Its stdout and stderr go straight to a log
file (a pipe nobody reads would fill up and block the server); the launcher polls
that file for the listening line.

A run starts it once; the self-tests start it some four hundred times, and each start
imports the engine again (about a second of CPU on two cores). They call
:func:`start_from_a_forkserver` first: every later engine is then forked from a
process that has imported it once (``multiprocessing``'s forkserver), with the same
arguments, environment, log file and process group of its own as the command.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType

from .config import API_KEY_ENV, DEFAULT_MODEL, LISTENING_PREFIX, LatencyModel
from .defect_names import validate_defects

__all__ = ["RunningReferenceEngine", "start_from_a_forkserver",
           "start_reference_engine", "started_as_the_command"]

_LISTENING = re.compile(re.escape(LISTENING_PREFIX) + r"(http://\S+)")
_POLL_S = 0.02
# The package's parent directory, so `-m engine_acceptance...` works from any cwd
# even when the package is not installed.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[2])


# What a forked engine would otherwise import after the fork: the CLI and, lazily at the
# first image or video (every run's discovery sends both), the pixel libraries.
_FORKSERVER_PRELOAD = ["engine_acceptance.reference_engine.__main__", "engine_acceptance.reference_engine.pixels"]
_forkserver: multiprocessing.context.ForkServerContext | None = None


def start_from_a_forkserver() -> None:
    """Fork every engine started from now on in this process from a process that has imported it."""
    global _forkserver
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_FORKSERVER_PRELOAD)
    _forkserver = context


@contextlib.contextmanager
def started_as_the_command() -> Iterator[None]:
    """Engines started inside this block start as a run starts them, not from the forkserver.

    For the self-tests that time the client against the engine: a forked engine carries the
    forkserver's whole heap (Pillow, PyAV, numpy), and what it does between stamping an event
    and sending it counts there as the client's error.
    """
    global _forkserver
    forkserver, _forkserver = _forkserver, None
    try:
        yield
    finally:
        _forkserver = forkserver


def _serve_forked(argv: list[str], env: dict[str, str], log_path: str) -> None:
    """The forked engine: what ``python -m engine_acceptance.reference_engine ARGV`` does, in the forked process."""
    os.setsid()  # own process group, as start_new_session gives the command
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    # Line-buffered, as PYTHONUNBUFFERED makes the command: the launcher waits for the listening line.
    sys.stdout = open(1, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    sys.stderr = open(2, "w", encoding="utf-8", errors="replace", buffering=1, closefd=False)
    os.environ.clear()
    os.environ.update(env)
    from .__main__ import main

    sys.exit(main(argv))


class _ForkedProcess:
    """The part of ``subprocess.Popen`` the launcher uses, for an engine forked by the forkserver."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def send_signal(self, signum: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(f"reference engine (pid {self.pid})", timeout or 0.0)
        return self._process.exitcode


def _terminate(process: subprocess.Popen[bytes] | _ForkedProcess, timeout: float) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class RunningReferenceEngine:
    """A started reference engine; stop it with `.stop()` or a `with` block."""

    def __init__(self, process: subprocess.Popen[bytes] | _ForkedProcess, url: str, log_path: Path) -> None:
        self.process = process
        self.url = url  # e.g. http://127.0.0.1:41234, without /v1
        self.log_path = log_path
        # If the owner forgets to stop it, do it at garbage collection or exit.
        self._finalizer = weakref.finalize(self, _terminate, process, 5.0)

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM, wait up to `timeout`, then SIGKILL. Returns the exit code."""
        self._finalizer.detach()
        _terminate(self.process, timeout)
        return self.process.returncode

    def read_log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def __enter__(self) -> RunningReferenceEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RunningReferenceEngine(url={self.url!r}, pid={self.pid})"


def start_reference_engine(
    *,
    convention: str = "vllm",
    api_key: str | None = None,
    defects: Iterable[str] = (),
    model: str = DEFAULT_MODEL,
    max_model_len: int | None = None,
    latency: LatencyModel | None = None,
    stream_chunk_tokens: int | None = None,
    stamp_events: bool = False,
    text_only: bool = False,
    tool_parser: bool = True,
    tokenize: bool = True,
    reasoning: bool = True,
    reasoning_by_default: bool = True,
    structured_outputs: bool = True,
    responses: bool = True,
    prefix_cache: bool = True,
    host: str = "127.0.0.1",
    startup_timeout: float = 30.0,
    log_dir: str | os.PathLike[str] | None = None,
) -> RunningReferenceEngine:
    """Start a reference engine on a free port and wait until it listens.

    Raises ValueError for an unknown defect before starting anything, and
    RuntimeError (with the engine's output) if it exits or does not come up in time.
    """
    chosen = sorted(validate_defects(defects))
    command = [sys.executable, "-m", "engine_acceptance.reference_engine",
               "--host", host, "--port", "0", "--convention", convention, "--model", model]
    if chosen:
        command += ["--inject", *chosen]
    if max_model_len is not None:
        command += ["--max-model-len", str(max_model_len)]
    if latency is not None:
        command += ["--ttft-ms", str(latency.ttft_ms), "--tpot-ms", str(latency.tpot_ms),
                    "--prefill-ms-per-1k", str(latency.prefill_ms_per_1k_tokens),
                    "--batch-slowdown", str(latency.batch_slowdown), "--knee-inflight", str(latency.knee_inflight),
                    "--tpot-per-inflight-ms", str(latency.tpot_ms_per_inflight_over_knee)]
    if stream_chunk_tokens is not None:
        command += ["--stream-chunk-tokens", str(stream_chunk_tokens)]
    if stamp_events:
        command += ["--stamp-events"]
    # What the deployment serves (see ReferenceEngineConfig): all of it unless told otherwise.
    if text_only:
        command += ["--text-only"]
    if not tool_parser:
        command += ["--no-tool-parser"]
    if not tokenize:
        command += ["--no-tokenize"]
    if not reasoning:
        command += ["--no-reasoning"]
    if not reasoning_by_default:
        command += ["--reasoning-on-request"]
    if not structured_outputs:
        command += ["--no-structured-outputs"]
    if not responses:
        command += ["--no-responses"]
    if not prefix_cache:
        command += ["--no-prefix-cache"]

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_IMPORT_ROOT, env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    env.pop(API_KEY_ENV, None)
    if api_key is not None:
        # Through the environment, not argv: argv is visible to every local user.
        env[API_KEY_ENV] = api_key

    directory = Path(log_dir) if log_dir is not None else Path(tempfile.mkdtemp(prefix="reference-engine-"))
    directory.mkdir(parents=True, exist_ok=True)
    log_path = directory / "reference-engine.log"
    with open(log_path, "wb") as log_file:
        if _forkserver is None:
            process: subprocess.Popen[bytes] | _ForkedProcess = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: signals aimed at us miss it
            )
        else:
            # Daemonic: a worker that exits stops the engines it left, instead of waiting for them.
            forked = _forkserver.Process(target=_serve_forked, args=(command[3:], env, str(log_path)), daemon=True,
                                         name="reference-engine")
            forked.start()
            process = _ForkedProcess(forked)

    deadline = time.monotonic() + startup_timeout
    while True:
        output = log_path.read_text(encoding="utf-8", errors="replace")
        match = _LISTENING.search(output)
        if match:
            return RunningReferenceEngine(process, match.group(1), log_path)
        if process.poll() is not None:
            raise RuntimeError(
                f"reference engine exited with code {process.returncode} before listening;"
                f" command: {' '.join(command)}\n--- output ({log_path}) ---\n{output}"
            )
        if time.monotonic() > deadline:
            _terminate(process, 5.0)
            raise RuntimeError(
                f"reference engine did not report listening within {startup_timeout} s;"
                f" command: {' '.join(command)}\n--- output ({log_path}) ---\n{output}"
            )
        time.sleep(_POLL_S)
