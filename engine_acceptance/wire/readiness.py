"""Readiness and engine detection, done once before any test runs.

TEST-PLAN §0: ``/health`` must answer 200 within the readiness budget, the served
model must be listed, and the engine's kind and version go into the report. An
engine that cannot be reached ends the run here with one message, instead of
every test waiting for its own timeout. The requests go through
:func:`~engine_acceptance.wire.http.fetch_sync` (aiohttp on a loop and a thread of its
own), which keeps this synchronous and independent of the event loop the tests use.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from engine_acceptance.errors import EngineUnavailable
from engine_acceptance.wire import http

__all__ = ["EngineInfo", "EngineUnavailable", "KnownEngine", "RouteField", "detect_engine", "wait_until_ready"]

PROGRESS_EVERY_S = 10.0
# Where readiness is judged when the engine has no /health route (llama.cpp's Python server).
MODELS_READINESS_PATH = "/v1/models"


@dataclass(frozen=True)
class RouteField:
    """A field of what ``GET path`` answers (JSON, ``field`` a dotted path), and the pattern its value matches.

    An engine is told apart by what it serves (llama.cpp's ``llama-server`` answers ``GET /props``
    with its ``build_info``, llama-cpp-python's server titles its OpenAPI document), and its
    version read from such a field: ``pattern``'s first group when it has one, else the value.
    """

    path: str
    field: str
    pattern: str | None = None

    def read(self, answer: http.Answer) -> str | None:
        """The field's value as text when the answer is 200 JSON that has it (and it matches), else None."""
        value: Any = answer.json() if answer.status == 200 else None
        for key in self.field.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if value is None or isinstance(value, (dict, list)):
            return None
        text = str(value)
        if self.pattern is None:
            return text
        found = re.search(self.pattern, text)
        if found is None:
            return None
        return found.group(1) if found.groups() else text

    def describe(self) -> str:
        return f"GET {self.path} {self.field}"


class KnownEngine(Protocol):
    """How to recognise one kind of engine and read its version: plain values, not a profile.

    The engine profiles carry these fields and the plugin hands them in as they are; the
    wire layer reads only the values, so it needs nothing of ``profiles/`` above it.
    """

    @property
    def name(self) -> str: ...

    @property
    def owned_by(self) -> Sequence[str]: ...

    @property
    def version_endpoints(self) -> Sequence[str]: ...

    @property
    def serves(self) -> Sequence[RouteField]: ...

    @property
    def version_from(self) -> RouteField | None: ...


@dataclass
class EngineInfo:
    url: str
    kind: str
    kind_source: str
    version: str | None
    model: str
    models: list[str]
    owned_by: str | None = None
    max_model_len: int | None = None
    ready_after_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EngineInfo":
        return cls(**data)


# How much of an answer is read: a model list or a version document is a few KB.
ANSWER_LIMIT_BYTES = 1 << 20


def _get(url: str, *, timeout: float, api_key: str | None = None) -> http.Answer:
    # Each wait bounded by the probe timeout, as urllib's socket timeout bounded them before;
    # proxies from the environment, as urllib read them.
    return http.fetch_sync("GET", url, timeout=http.per_wait_timeout(connect=timeout, read=timeout),
                           headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
                           limit=ANSWER_LIMIT_BYTES)


def wait_until_ready(
    base_url: str,
    *,
    readiness_timeout: float,
    startup_timeout: float,
    probe_timeout: float,
    progress: Callable[[str], None] = lambda message: None,
    path: str = "/health",
    api_key: str | None = None,
) -> float:
    """Poll ``path`` (``/health`` unless the engine profile names another) until 200; return the seconds it took.

    A server without a ``/health`` route (llama.cpp's Python server answers it 404) is up:
    readiness is then judged by ``/v1/models`` answering 200 instead (with the API key,
    which such a server may require there).

    ``startup_timeout`` is how long a refused connection is tolerated (an engine
    still loading weights has not bound its port yet); with 0, nothing listening
    means the URL is wrong and the run stops at once. ``readiness_timeout`` bounds
    the wait for an engine that answers but is not ready, or does not answer.
    """
    url = base_url.rstrip("/") + path
    started = time.monotonic()
    deadline_refused = started + startup_timeout
    deadline = started + max(readiness_timeout, startup_timeout)
    last_progress = started
    last: http.Answer | None = None
    while True:
        remaining = deadline - time.monotonic()
        last = _get(url, timeout=max(0.5, min(probe_timeout, remaining)), api_key=api_key)
        now = time.monotonic()
        if last.status == 200:
            return now - started
        if last.status == 404 and path != MODELS_READINESS_PATH:
            progress(f"GET {url} answered 404 (no such route): judging readiness by GET {MODELS_READINESS_PATH}")
            path = MODELS_READINESS_PATH
            url = base_url.rstrip("/") + path
            continue
        if last.refused and now >= deadline_refused:
            hint = "" if startup_timeout else " (if it is still starting, give --startup-timeout SECONDS to wait for it)"
            raise EngineUnavailable(f"engine unreachable: nothing answers at {base_url} ({last.error}){hint}")
        if now >= deadline:
            state = f"HTTP {last.status}" if last.status else last.error
            raise EngineUnavailable(
                f"engine not ready: GET {url} did not answer 200 within {readiness_timeout:g}s (last: {state})"
            )
        if now - last_progress >= PROGRESS_EVERY_S:
            state = f"HTTP {last.status}" if last.status else last.error
            progress(f"waiting for {url}: {now - started:.0f}s so far, last answer: {state}")
            last_progress = now
        time.sleep(min(1.0, max(0.0, deadline - now)))


def detect_engine(
    base_url: str,
    *,
    api_key: str | None,
    requested_kind: str,
    requested_model: str | None,
    engine_profiles: Sequence[KnownEngine],
    probe_timeout: float,
) -> EngineInfo:
    """Find the served model, the engine kind (vllm/sglang/generic) and its version."""
    base = base_url.rstrip("/")
    models_answer = _get(base + "/v1/models", timeout=probe_timeout, api_key=api_key)
    if models_answer.status in (401, 403):
        which = "no API key was given" if not api_key else "the API key was rejected"
        raise EngineUnavailable(
            f"GET {base}/v1/models answered HTTP {models_answer.status}: {which} (use --api-key or ENGINE_API_KEY)"
        )
    payload = models_answer.json()
    if models_answer.status != 200 or not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
        state = f"HTTP {models_answer.status}" if models_answer.status else models_answer.error
        raise EngineUnavailable(f"GET {base}/v1/models did not list models ({state}: {models_answer.body[:200]!r})")
    entries = [entry for entry in payload["data"] if isinstance(entry, dict) and entry.get("id")]
    models = [str(entry["id"]) for entry in entries]
    if requested_model:
        if requested_model not in models:
            raise EngineUnavailable(f"--model {requested_model!r} is not served at {base}; it serves: {models}")
        model = requested_model
    elif len(models) == 1:
        model = models[0]
    else:
        raise EngineUnavailable(f"{base} serves {len(models)} models {models}; choose one with --model")
    entry = next(item for item in entries if item["id"] == model)
    owned_by = entry.get("owned_by")
    max_model_len = entry.get("max_model_len") if isinstance(entry.get("max_model_len"), int) else None

    by_name = {profile.name: profile for profile in engine_profiles}
    notes: list[str] = []
    answers = _Answers(base, api_key, probe_timeout)
    if requested_kind != "auto":
        kind, source = requested_kind, "--engine"
    else:
        kind, source = _detect_kind(owned_by, engine_profiles, answers)
    version = None
    profile = by_name.get(kind)
    for endpoint in profile.version_endpoints if profile else ():
        answer = answers.get(endpoint)
        body = answer.json()
        if answer.status == 200 and isinstance(body, dict) and body.get("version"):
            version = str(body["version"])
            break
        notes.append(f"GET {endpoint}: {answer.status or answer.error}")
    source_of_version = profile.version_from if profile is not None else None
    if version is None and source_of_version is not None:
        answer = answers.get(source_of_version.path)
        version = source_of_version.read(answer)
        if version is None:
            notes.append(f"{source_of_version.describe()}: {answer.status or answer.error}, no version there")
    return EngineInfo(
        url=base,
        kind=kind,
        kind_source=source,
        version=version,
        model=model,
        models=models,
        owned_by=owned_by,
        max_model_len=max_model_len,
        notes=notes,
    )


class _Answers:
    """GETs of one engine during detection, each route asked once (with the API key: llama-server's /props needs it)."""

    def __init__(self, base: str, api_key: str | None, probe_timeout: float) -> None:
        self.base, self.api_key, self.probe_timeout = base, api_key, probe_timeout
        self._seen: dict[str, http.Answer] = {}

    def get(self, path: str) -> http.Answer:
        if path not in self._seen:
            self._seen[path] = _get(self.base + path, timeout=self.probe_timeout, api_key=self.api_key)
        return self._seen[path]

    def serves(self, profile: KnownEngine) -> str | None:
        """What the engine answered that the profile's ``serves`` describes, or None if any of it is missing."""
        found = []
        for route in profile.serves:
            value = route.read(self.get(route.path))
            if value is None:
                return None
            found.append(f"{route.describe()} {value[:40]!r}")
        return ", ".join(found)


def _detect_kind(owned_by: str | None, profiles: Sequence[KnownEngine], answers: _Answers) -> tuple[str, str]:
    """The engine's kind, and what told it.

    ``owned_by`` alone does not decide where a profile says what its engine serves: llama.cpp's
    ``llama-server`` and another server saying the same ``owned_by`` are told apart by their routes.
    A profile whose routes answer is chosen even when ``owned_by`` says something else (a gateway
    may rewrite the model list); then the version endpoints; else generic.
    """
    for profile in profiles:
        if owned_by and owned_by in profile.owned_by:
            if not profile.serves:
                return profile.name, f"owned_by={owned_by}"
            served = answers.serves(profile)
            if served is not None:
                return profile.name, f"owned_by={owned_by}, {served}"
    for profile in profiles:
        served = answers.serves(profile) if profile.serves else None
        if served is not None:
            return profile.name, served
    for profile in profiles:
        for endpoint in profile.version_endpoints:
            if answers.get(endpoint).status == 200:
                return profile.name, f"GET {endpoint}"
    return "generic", "no engine-specific endpoint answered"
