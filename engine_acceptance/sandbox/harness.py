"""The child side of the sandbox: jail this process, then run one model-written function.

Started by :mod:`engine_acceptance.sandbox.runner` as ``python -I -S -B sandbox_harness.py``
in a new session, with a scrubbed environment and a private temp dir as cwd. It
reads its orders (JSON) from stdin, then, before any untrusted code exists in the
process: sets rlimits, sets no_new_privs, enters a Landlock domain where the kernel
offers one (writes only in the temp dir, no TCP, no signals or abstract sockets
outside the domain), and, when started as root, drops to a unique unprivileged uid
so RLIMIT_NPROC holds and the parent can find and kill every process it left.

Observations go to an inherited pipe (``result_fd``) as JSON lines carrying the
run's nonce, never through stdout or the exit code. Expected values never enter
this process: it reports what the function returned and what became of its input,
and the parent judges. Stdlib only: it must not import the package it is part of.
"""

from __future__ import annotations

import copy
import ctypes
import json
import os
import resource
import sys
from typing import Any

__all__ = ["main"]

# Landlock ABI constants (include/uapi/linux/landlock.h).
_LL_CREATE_RULESET_VERSION = 1
_LL_RULE_PATH_BENEATH = 1
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_ABI1_ALL = (1 << 13) - 1  # EXECUTE .. MAKE_SYM
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP = 1 << 0  # ABI 4
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1
# The new syscalls share their numbers across architectures.
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_PR_SET_NO_NEW_PRIVS = 38

_RECORD_LIMIT = 256 * 1024
_MESSAGE_LIMIT = 500

_HARNESS_PID = os.getpid()
_state: dict[str, Any] = {"fd": None, "nonce": ""}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _emit(record: dict[str, Any]) -> None:
    """One JSON line on the result pipe; only the harness process itself may write."""
    fd = _state["fd"]
    if fd is None or os.getpid() != _HARNESS_PID:
        return
    data = (json.dumps({"nonce": _state["nonce"], **record}) + "\n").encode()
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _forget_result_pipe_in_child() -> None:
    # A process forked by the untrusted code must never speak for the harness.
    fd, _state["fd"] = _state["fd"], None
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _set_rlimits(limits: dict[str, int]) -> dict[str, Any]:
    applied = {}
    table = {
        "RLIMIT_CORE": (resource.RLIMIT_CORE, 0, 0),
        # SIGXCPU at the soft limit, SIGKILL one second later if it is caught.
        "RLIMIT_CPU": (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        "RLIMIT_AS": (resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"]),
        "RLIMIT_FSIZE": (resource.RLIMIT_FSIZE, limits["file_bytes"], limits["file_bytes"]),
        "RLIMIT_NOFILE": (resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"]),
    }
    for name, (which, soft, hard) in table.items():
        resource.setrlimit(which, (soft, hard))
        applied[name] = soft
    return applied


def _no_new_privs(libc: ctypes.CDLL) -> None:
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")


def _landlock(libc: ctypes.CDLL, workdir: str) -> dict[str, Any]:
    """Enter a Landlock domain; report what it restricts, or why there is none."""
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_LL_CREATE_RULESET_VERSION))
    if abi < 0:
        errno = ctypes.get_errno()
        return {"active": False, "reason": f"kernel offers no Landlock ({os.strerror(errno)})"}
    handled_fs = _FS_ABI1_ALL
    if abi >= 2:
        handled_fs |= _FS_REFER
    if abi >= 3:
        handled_fs |= _FS_TRUNCATE
    if abi >= 5:
        handled_fs |= _FS_IOCTL_DEV
    attr = _RulesetAttr(handled_fs, 0, 0)
    size = 8  # ABI 1-3: handled_access_fs only
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP  # no rule: every bind/connect denied
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        size = 24
    ruleset = libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        # The temp dir is the only place the code may touch; nothing else is readable either.
        dir_fd = os.open(workdir, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            rule = _PathBeneathAttr(handled_fs, dir_fd)
            if libc.syscall(_SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_LL_RULE_PATH_BENEATH),
                            ctypes.byref(rule), ctypes.c_uint32(0)) != 0:
                raise OSError(ctypes.get_errno(), "landlock_add_rule failed")
        finally:
            os.close(dir_fd)
        if libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return {
        "active": True,
        "abi": abi,
        "filesystem": "read, write and execute only inside the temp dir",
        "tcp": "bind and connect denied" if abi >= 4 else "not restricted (ABI < 4)",
        "scope": "signals and abstract unix sockets confined to the sandbox" if abi >= 6
        else "not scoped (ABI < 6)",
    }


def _drop_privileges(uid: int, gid: int, processes: int) -> dict[str, Any]:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    # Root ignores RLIMIT_NPROC; a fresh uid of our own makes the limit exact.
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    return {"uid": uid, "gid": gid, "RLIMIT_NPROC": processes}


def _encode(value: Any) -> dict[str, Any]:
    """A returned value as JSON when it is plain data of sane size, else its capped repr."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError, MemoryError) as exc:
        return {"repr": _short(_safe_repr(value)), "json_error": type(exc).__name__}
    if len(text) > _RECORD_LIMIT:
        return {"repr": _short(text), "json_error": f"too large ({len(text)} characters)"}
    return {"json": value}


def _safe_repr(value: Any) -> str:
    try:
        return repr(value)
    except BaseException as exc:  # a hostile __repr__ must not take the harness down
        return f"<unrepresentable {type(value).__name__}: {type(exc).__name__}>"


def _short(text: str) -> str:
    return text if len(text) <= _MESSAGE_LIMIT else text[:_MESSAGE_LIMIT] + "…"


def _error(exc: BaseException) -> dict[str, str]:
    return {"type": type(exc).__name__, "message": _short(str(exc))}


def _run(orders: dict[str, Any]) -> None:
    namespace: dict[str, Any] = {"__name__": "sandboxed_answer"}
    try:
        exec(compile(orders["source"], "<model-written code>", "exec"), namespace)  # noqa: S102 - the point
        function = namespace.get(orders["function"])
        if not callable(function):
            raise NameError(f"the code defines no callable named {orders['function']!r}")
    except BaseException as exc:
        _emit({"kind": "load_error", "error": _error(exc)})
        return
    for index, case_input in enumerate(orders["inputs"]):
        argument = copy.deepcopy(case_input)
        try:
            returned = function(argument)
        except BaseException as exc:
            _emit({"kind": "case", "index": index, "error": _error(exc)})
            continue
        _emit({
            "kind": "case",
            "index": index,
            "returned": _encode(returned),
            "returned_type": type(returned).__name__,
            "returned_is_input": returned is argument,
            "input_after": _encode(argument),
        })
    _emit({"kind": "done"})


def main() -> None:
    orders = json.loads(sys.stdin.buffer.read())
    _state["fd"], _state["nonce"] = orders["result_fd"], orders["nonce"]
    os.register_at_fork(after_in_child=_forget_result_pipe_in_child)
    layers: dict[str, Any] = {}
    try:
        layers["rlimits"] = _set_rlimits(orders["limits"])
        libc = ctypes.CDLL(None, use_errno=True)
        _no_new_privs(libc)
        layers["no_new_privs"] = True
        layers["landlock"] = _landlock(libc, orders["workdir"])
        drop = orders.get("drop_to")
        layers["uid_drop"] = (_drop_privileges(drop["uid"], drop["gid"], orders["limits"]["processes"])
                              if drop else {"active": False})
    except BaseException as exc:
        # A layer the orders ask for could not be set: refuse to run anything.
        _emit({"kind": "sandbox_error", "layers": layers, "error": _error(exc)})
        return
    _emit({"kind": "ready", "layers": layers})
    _run(orders)


if __name__ == "__main__":
    main()
