"""Running model-written code: a separate, jailed interpreter and a structured verdict.

``run_function(source, function=..., inputs=...)`` runs one function on each input in
``python -I -S -B`` (:mod:`engine_acceptance.sandbox.harness`) and returns a
:class:`SandboxResult` with what every call returned and what became of its input.
The layers, each recorded in ``SandboxResult.layers``:

- a new session and process group, killed as a whole at the wall-clock limit and
  again after every run;
- a scrubbed environment (a fixed allow-list: no API key, no other secret) and a
  private temp dir (mode 0700) as cwd, HOME and TMPDIR, deleted afterwards;
- rlimits on CPU, address space, file size, open files and core dumps;
- Landlock where the kernel offers it: no reads or writes outside the temp dir, no
  TCP bind/connect (ABI >= 4), no signals out of the sandbox (ABI >= 6);
- as root: a fresh unprivileged uid per run. Root ignores RLIMIT_NPROC, so without
  this a fork bomb would be bounded only by the machine; with it the limit holds,
  and every process of that uid (also ones that escaped the process group with
  setsid) is found in /proc and killed. The uid cannot read a root-only Python
  prefix (e.g. pyenv under /root), so only modules the harness loaded before the
  drop (json, ctypes, ...) can be imported. Not root: RLIMIT_NPROC would count all
  of the user's processes, so it is not set, and the result says so;
- stdout and stderr captured up to a cap; past it the pipes are closed, so a
  flood of output ends in EPIPE instead of filling memory.

The verdict comes from JSON lines on a private pipe carrying a random nonce, never
from the exit code or stdout: ``os._exit(0)`` before the checks is "no result".
The allow-list check of the source (:mod:`engine_acceptance.sandbox.code_extraction`)
runs before this module is asked to run anything.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

__all__ = ["CaseRun", "Limits", "SandboxResult", "run_function", "sandbox_processes_left"]

HARNESS = Path(__file__).with_name("harness.py")
# The only variables the sandboxed interpreter sees; everything else is dropped.
_ENV_ALLOWED = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
# Fresh uids are drawn from a range no distribution hands out to users.
_UID_RANGE = (2_100_000_000, 2_140_000_000)
_READ_CHUNK = 65536


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    cpu_s: int = 5
    wall_s: float = 15.0
    memory_bytes: int = 512 * 1024 * 1024
    file_bytes: int = 1024 * 1024
    open_files: int = 64
    # Processes of the sandbox uid, the harness included (only with a uid of its own).
    processes: int = 4
    # stdout and stderr together.
    output_bytes: int = 64 * 1024


@dataclass
class CaseRun:
    """One call of the function, as the sandbox observed it."""

    index: int
    returned: Any = None
    returned_repr: str | None = None
    returned_type: str | None = None
    returned_is_input: bool = False
    input_after: Any = None
    input_after_repr: str | None = None
    error: dict[str, str] | None = None


@dataclass
class SandboxResult:
    """What happened in one sandboxed run; ``ok`` only if every call was observed."""

    # completed | no_result | load_error | killed | sandbox_error
    status: str
    reason: str
    cases: list[CaseRun] = field(default_factory=list)
    layers: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    signal: str | None = None
    stdout: str = ""
    stderr: str = ""
    output_truncated: bool = False
    elapsed_s: float = 0.0
    files_left: list[str] = field(default_factory=list)
    leftover_pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "completed" and not self.output_truncated

    def failure(self) -> str | None:
        """Why the run gives no usable verdict, in one line; None when it does."""
        if self.ok:
            return None
        if self.output_truncated and self.status == "completed":
            return f"the code wrote more than the output cap to stdout/stderr: {self.reason}"
        return f"{self.status}: {self.reason}"

    def to_report(self) -> dict[str, Any]:
        report = asdict(self)
        report["ok"] = self.ok
        return report


def run_function(source: str, *, function: str, inputs: Sequence[Any], limits: Limits = Limits()) -> SandboxResult:
    """Run ``function`` from ``source`` on each input, jailed; never raises for the code's doings."""
    nonce = secrets.token_hex(16)
    workdir = Path(tempfile.mkdtemp(prefix="ea-sandbox-"))
    drop_to = _fresh_identity() if os.geteuid() == 0 else None
    result_r, result_w = os.pipe()
    started = time.monotonic()
    proc: subprocess.Popen[bytes] | None = None
    try:
        for sub in ("home", "tmp"):
            (workdir / sub).mkdir()
        if drop_to:
            for path in (workdir, workdir / "home", workdir / "tmp"):
                os.chown(path, drop_to["uid"], drop_to["gid"])
        env = {**_ENV_ALLOWED, "HOME": str(workdir / "home"), "TMPDIR": str(workdir / "tmp")}
        orders = {
            "nonce": nonce, "result_fd": result_w, "source": source, "function": function,
            "inputs": list(inputs), "workdir": str(workdir), "drop_to": drop_to,
            "limits": {"cpu_s": limits.cpu_s, "memory_bytes": limits.memory_bytes, "file_bytes": limits.file_bytes,
                       "open_files": limits.open_files, "processes": limits.processes},
        }
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-B", str(HARNESS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=workdir, env=env, pass_fds=(result_w,), close_fds=True, start_new_session=True,
        )
        os.close(result_w)
        result_w = -1
        outcome = _collect(proc, json.dumps(orders).encode(), result_r, limits, started)
    finally:
        if result_w >= 0:
            os.close(result_w)
        os.close(result_r)
        if proc is not None:
            _kill_everything(proc.pid, drop_to)
            proc.wait()
        leftovers = sandbox_processes_left(proc.pid if proc else None, drop_to["uid"] if drop_to else None)
        files = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if p.is_file())
        shutil.rmtree(workdir, ignore_errors=True)
    result = _verdict(outcome, nonce, proc, limits)
    result.layers = {
        "process_group": "new session; the group is killed at the wall-clock limit and after the run",
        "environment": f"scrubbed: only {', '.join(sorted([*_ENV_ALLOWED, 'HOME', 'TMPDIR']))}",
        "workdir": "private temp dir (0700) as cwd, HOME and TMPDIR; deleted after the run",
        "wall_clock_s": limits.wall_s,
        "output_cap_bytes": limits.output_bytes,
        "interpreter": f"{sys.executable} -I -S -B",
        **({"uid_drop": {"active": False,
                         "reason": "not root: RLIMIT_NPROC not set (it would count all of this user's processes)"}}
           if not drop_to else {}),
        **result.layers,
    }
    result.elapsed_s = round(time.monotonic() - started, 3)
    result.files_left = files
    result.leftover_pids = leftovers
    return result


@dataclass
class _Outcome:
    lines: list[bytes] = field(default_factory=list)
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    output_truncated: bool = False
    timed_out: bool = False


def _collect(proc: subprocess.Popen[bytes], orders: bytes, result_r: int, limits: Limits,
             started: float) -> _Outcome:
    """Feed the orders, read the three pipes until the harness is done or the wall clock runs out."""
    outcome = _Outcome()
    assert proc.stdin and proc.stdout and proc.stderr
    try:
        proc.stdin.write(orders)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    selector.register(result_r, selectors.EVENT_READ, "result")
    pending = b""
    deadline = started + limits.wall_s
    while selector.get_map():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            outcome.timed_out = True
            break
        for key, _ in selector.select(timeout=min(remaining, 0.5)):
            fd = key.fileobj if isinstance(key.fileobj, int) else key.fileobj.fileno()
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                selector.unregister(key.fileobj)
                continue
            if key.data == "result":
                pending += chunk
                *complete, pending = pending.split(b"\n")
                outcome.lines.extend(complete)
                continue
            buffer = outcome.stdout if key.data == "stdout" else outcome.stderr
            buffer.extend(chunk)
            if len(outcome.stdout) + len(outcome.stderr) > limits.output_bytes:
                # Close our ends: the writer gets EPIPE instead of filling memory or the disk.
                outcome.output_truncated = True
                for stream in (proc.stdout, proc.stderr):
                    if _registered(selector, stream):
                        selector.unregister(stream)
                    stream.close()
                break
        # The harness is gone and its result pipe drained: nothing more will come.
        if proc.poll() is not None and not _registered(selector, result_r):
            break
    selector.close()
    for stream in (proc.stdout, proc.stderr):
        if not stream.closed:
            stream.close()
    return outcome


def _registered(selector: selectors.BaseSelector, fileobj: Any) -> bool:
    try:
        selector.get_key(fileobj)
        return True
    except KeyError:
        return False


def _fresh_identity() -> dict[str, int]:
    uid = _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])
    return {"uid": uid, "gid": uid}


def _kill_everything(pgid: int, drop_to: dict[str, int] | None) -> None:
    """SIGKILL the process group, then (own uid) every process of the sandbox uid until none is left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if not drop_to:
        return
    # The uid is ours alone, so this also reaches children that left the group with setsid.
    # RLIMIT_NPROC bounds how many can be forked between two sweeps, so this converges.
    for _ in range(200):
        pids = _pids_of_uid(drop_to["uid"])
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)


def _proc_status(pid: str) -> dict[str, str]:
    fields = {}
    try:
        with open(f"/proc/{pid}/status", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        return {}
    return fields


def _live_pids(match: Any) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        status = _proc_status(entry)
        # Zombies are already dead; they wait only for their parent (or init) to reap them.
        if status and not status.get("State", "").startswith("Z") and match(entry, status):
            pids.append(int(entry))
    return pids


def _pids_of_uid(uid: int) -> list[int]:
    return _live_pids(lambda _pid, status: status.get("Uid", "").split()[:1] == [str(uid)])


def _pids_in_group(pgid: int) -> list[int]:
    def in_group(pid: str, _status: dict[str, str]) -> bool:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
                # Field 5 is the process group; the command name (field 2) may hold spaces.
                return int(handle.read().rsplit(")", 1)[1].split()[2]) == pgid
        except (OSError, IndexError, ValueError):
            return False

    return _live_pids(in_group)


def sandbox_processes_left(pgid: int | None, uid: int | None) -> list[int]:
    """Live processes of the sandbox uid (or, without one, of its process group)."""
    if uid is not None:
        return _pids_of_uid(uid)
    return _pids_in_group(pgid) if pgid is not None else []


def _signal_name(code: int | None) -> str | None:
    if code is None or code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _verdict(outcome: _Outcome, nonce: str, proc: subprocess.Popen[bytes] | None, limits: Limits) -> SandboxResult:
    records = []
    foreign = 0
    for line in outcome.lines:
        try:
            record = json.loads(line)
        except ValueError:
            foreign += 1
            continue
        if isinstance(record, dict) and record.get("nonce") == nonce:
            records.append(record)
        else:
            foreign += 1
    code = proc.returncode if proc else None
    result = SandboxResult(
        status="no_result", reason="",
        exit_code=code if code is not None and code >= 0 else None, signal=_signal_name(code),
        stdout=outcome.stdout[: limits.output_bytes].decode("utf-8", "replace"),
        stderr=outcome.stderr[: limits.output_bytes].decode("utf-8", "replace"),
        output_truncated=outcome.output_truncated,
    )
    for record in records:
        kind = record.get("kind")
        if kind in ("ready", "sandbox_error"):
            result.layers.update(record.get("layers") or {})
        if kind == "case":
            result.cases.append(_case(record))
    kinds = [record.get("kind") for record in records]
    ended = f"exit code {code}" if code is not None and code >= 0 else f"killed by {_signal_name(code)}"
    if "sandbox_error" in kinds:
        error = next(r for r in records if r.get("kind") == "sandbox_error")["error"]
        result.status, result.reason = "sandbox_error", f"a sandbox layer could not be set, nothing was run: " \
                                                        f"{error['type']}: {error['message']}"
    elif "load_error" in kinds:
        error = next(r for r in records if r.get("kind") == "load_error")["error"]
        result.status, result.reason = "load_error", f"the code did not load: {error['type']}: {error['message']}"
    elif "done" in kinds:
        result.status, result.reason = "completed", f"{len(result.cases)} call(s) observed"
    elif outcome.timed_out:
        result.status = "killed"
        result.reason = (f"wall-clock limit of {limits.wall_s:g}s reached after {len(result.cases)} call(s); "
                         f"the process group and uid were killed")
    elif result.signal in ("SIGXCPU", "SIGKILL"):
        # SIGXCPU at the soft CPU limit, SIGKILL at the hard one (or from the kernel's OOM killer).
        result.status = "killed"
        result.reason = f"{ended} (CPU time limit {limits.cpu_s}s) after {len(result.cases)} call(s)"
    else:
        result.status = "no_result"
        result.reason = (f"the process ended ({ended}) before the checks finished: "
                         f"{len(result.cases)} call(s) observed, no end-of-run record")
    if foreign:
        result.reason += f"; {foreign} line(s) on the result pipe without this run's nonce were ignored"
    if outcome.output_truncated:
        result.reason += f"; output passed the cap of {limits.output_bytes} bytes and the pipes were closed"
    return result


def _case(record: dict[str, Any]) -> CaseRun:
    run = CaseRun(index=int(record.get("index", -1)), error=record.get("error"))
    returned = record.get("returned") or {}
    run.returned = returned.get("json")
    run.returned_repr = returned.get("repr")
    run.returned_type = record.get("returned_type")
    run.returned_is_input = bool(record.get("returned_is_input"))
    after = record.get("input_after") or {}
    run.input_after = after.get("json")
    run.input_after_repr = after.get("repr")
    return run
