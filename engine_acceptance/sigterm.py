"""A CI kill (SIGTERM) becomes a KeyboardInterrupt, so a run stopped from outside ends like Ctrl-C.

Python's default for SIGTERM is to die on the spot: no ``gate.json``, the built-in
reference engine left running in its own process group. Pipelines stop jobs with SIGTERM
(a cancelled job, a timeout, ``docker stop``), so the pytest plugin and ``compare`` route
it into :class:`Terminated`, a KeyboardInterrupt subclass, and their own interrupt paths
run. A check that catches signals itself (the soak ends early with a report) raises
:class:`Terminated` once its report is written. Nothing here needs pytest.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

__all__ = ["Terminated", "install_sigterm_handler", "restore_sigterm_handler"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; handled as an interrupt (the verdict reads "interrupted (SIGTERM)")."""

    signal_name = "SIGTERM"


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM while the run is winding down is ignored: the first one is
    # already being handled, and raising again would cut the writing of the verdict.
    # A CI that will not wait sends SIGKILL, which nothing can hold up.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated("SIGTERM received: the run was stopped from outside")


def install_sigterm_handler() -> Any:
    """Route SIGTERM into KeyboardInterrupt handling; returns the handler it replaced.

    Only the main thread may set signal handlers; elsewhere (pytest run in a thread
    by an embedding tool) nothing is changed and None is returned.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _on_sigterm)


def restore_sigterm_handler(previous: Any) -> None:
    if previous is None or threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, previous)
