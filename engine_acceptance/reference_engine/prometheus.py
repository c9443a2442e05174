"""``GET /metrics``: a few Prometheus figures, named the way the imitated engine names them.

vLLM serves Prometheus text at ``/metrics`` (SGLang too, with ``--enable-metrics``); the
suite's soak reads memory and queue figures there at its start and its end. The
reference engine serves the same kind of figures, measured for real: requests
generating now, requests waiting (always 0: it never queues), and its process's
resident memory. Names per convention are data here, as in ``conventions.py``.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

if TYPE_CHECKING:
    from .server import ReferenceEngine

__all__ = ["METRIC_NAMES", "metrics_handler", "render_metrics", "resident_memory_bytes"]

# Convention -> (requests generating now, requests waiting), as vLLM and SGLang name them.
METRIC_NAMES: dict[str, tuple[str, str]] = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs"),
}


def resident_memory_bytes() -> int:
    """This process's resident set size (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def render_metrics(convention: str, model: str, running: int) -> str:
    """Prometheus text exposition of the reference engine's figures."""
    running_name, waiting_name = METRIC_NAMES[convention]
    label = f'model_name="{model}"'
    lines = [
        f"# HELP {running_name} Number of requests generating now.",
        f"# TYPE {running_name} gauge",
        f"{running_name}{{{label}}} {float(running)}",
        f"# HELP {waiting_name} Number of requests waiting to be processed.",
        f"# TYPE {waiting_name} gauge",
        f"{waiting_name}{{{label}}} 0.0",
        "# HELP process_resident_memory_bytes Resident memory size in bytes.",
        "# TYPE process_resident_memory_bytes gauge",
        f"process_resident_memory_bytes {float(resident_memory_bytes())}",
    ]
    return "\n".join(lines) + "\n"


def metrics_handler(engine: "ReferenceEngine") -> Callable[[web.Request], Awaitable[web.Response]]:
    async def metrics(request: web.Request) -> web.Response:
        body = render_metrics(engine.config.convention, engine.config.model, engine.load.active)
        return web.Response(text=body, content_type="text/plain", charset="utf-8")

    return metrics
