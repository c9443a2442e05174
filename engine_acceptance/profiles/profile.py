"""Engine and model profiles: engine and model differences as data, never as ``if``.

An engine profile says how an engine family reports itself and where it takes
engine-specific options; a model profile says what a served model can do and
how its modes are sent. Both are YAML files checked against JSON schemas in
``fixtures/schemas/`` when loaded; a bad file is a :class:`ProfileError` that
names the file and the field. A profile named (not given as a path) is looked up
in the user's profiles dirs, then in the shipped ``fixtures/profiles/``
(:mod:`engine_acceptance.profiles.sources`), so a team adds its models without
forking the suite.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from engine_acceptance.profiles.refusals import Refusal, RefusalRules, parse_refusals
from engine_acceptance.profiles.sources import SHIPPED, ProfileError, data_files, data_sources, find_data_file
from engine_acceptance.resources import read_yaml
from engine_acceptance.wire.readiness import RouteField
from engine_acceptance.wire.reassembly import CACHED_TOKENS_PATH
from engine_acceptance.wire.tokenize_api import TokenizeApi

__all__ = [
    "DATA_ROOT",
    "CACHED_TOKENS_IN",
    "METRIC_COUNTERS",
    "METRIC_GAUGES",
    "PROFILES_DIR",
    "SCHEMAS_DIR",
    "EngineProfile",
    "ModelProfile",
    "ProfileError",
    "choose_model_profile",
    "load_engine_profile",
    "load_model_profile",
    "available_profiles",
]

# The shipped fixtures/ folder, wherever the suite is installed. Profiles are looked up
# through sources.py (the user's profiles dirs first); these name the shipped data only.
DATA_ROOT = SHIPPED.root
PROFILES_DIR = SHIPPED.models.parent
SCHEMAS_DIR = DATA_ROOT / "schemas"
# The kind of profile each folder holds, as messages name it.
_KIND_OF = {"models": "model", "engines": "engine"}
# The gauges an engine profile may name under features.metric_names, and the counters: the prefix
# cache's (wire/prefix_cache.py reads them around a request) and speculative decoding's
# (load/spec_decode.py reads them around each round of load).
METRIC_GAUGES = ("running", "waiting", "kv_cache_usage")
METRIC_COUNTERS = ("prefix_cache_queries", "prefix_cache_hits", "spec_decode_draft_tokens",
                   "spec_decode_accepted_tokens")
# Where usage reports cached prompt tokens unless the engine profile says otherwise (features.cached_tokens_in).
CACHED_TOKENS_IN = CACHED_TOKENS_PATH


@dataclass(frozen=True)
class EngineProfile:
    name: str
    description: str
    owned_by: tuple[str, ...]
    version_endpoints: tuple[str, ...]
    reasoning_field: str | None
    reasoning_effort_in: str
    features: dict[str, Any]
    source: Path
    # Per probed capability, the 4xx answers that mean "not offered" (profiles/refusals.py).
    refusals: dict[str, tuple[Refusal, ...]] = field(default_factory=dict)
    # What only this engine answers (detect.serves), and where its version is read (detect.version_from).
    serves: tuple[RouteField, ...] = ()
    version_from: RouteField | None = None

    @property
    def refusal_rules(self) -> RefusalRules:
        """What discovery reads: only these answers make a capability "not served"."""
        return RefusalRules(self.name, dict(self.refusals))

    @property
    def tokenize_endpoint(self) -> str | None:
        return self.features.get("tokenize_endpoint")

    @property
    def tokenize_api(self) -> TokenizeApi | None:
        """The tokenize route this profile names and the body it takes; None when it names none."""
        return TokenizeApi(self.tokenize_endpoint, self.tokenize_body) if self.tokenize_endpoint else None

    @property
    def video_content_type(self) -> str | None:
        """The content-part type a video is sent as (``video_url``); None when the profile names none."""
        return self.features.get("video_content_type") or None

    def no_video_reason(self) -> str:
        """Why no video can be sent to this engine, and how to test video all the same."""
        return (f"engine profile {self.name!r} names no video content type: set features.video_content_type "
                "(e.g. video_url) in an engine profile of your own (--profiles-dir) to probe and test video")

    @property
    def tokenize_body(self) -> str:
        """The body its tokenize route takes: ``prompt`` (vLLM's, the default) or ``content`` (llama-server's)."""
        return self.features.get("tokenize_body") or "prompt"

    @property
    def readiness_path(self) -> str:
        """The route that answers 200 once the engine serves (``/health`` unless the profile says otherwise)."""
        return self.features.get("readiness_path") or "/health"

    def _unless_false(self, feature: str) -> bool:
        """A feature that holds unless the profile says ``false`` (the OpenAI behaviour is the default)."""
        return self.features.get(feature, True) is not False

    @property
    def supports_ignore_eos(self) -> bool:
        return bool(self.features.get("ignore_eos"))

    @property
    def rejects_unknown_model(self) -> bool:
        """Whether a request for a model the engine does not serve is refused (SGLang serves it anyway)."""
        return self._unless_false("rejects_unknown_model")

    @property
    def takes_token_id_prompts(self) -> bool:
        """Whether /v1/completions takes a prompt of token ids (llama-cpp-python's takes text only)."""
        return self._unless_false("token_id_prompts")

    @property
    def takes_max_completion_tokens(self) -> bool:
        """Whether ``max_completion_tokens`` is a request field (llama-cpp-python knows only ``max_tokens``)."""
        return self._unless_false("takes_max_completion_tokens")

    @property
    def rejects_max_tokens_zero(self) -> bool:
        """Whether ``max_tokens: 0`` is refused (llama-cpp-python reads it as "no limit")."""
        return self._unless_false("rejects_max_tokens_zero")

    @property
    def closes_connection_after_stream(self) -> bool:
        """Whether the engine closes a connection after each streamed reply (llama-server b11312 does)."""
        return bool(self.features.get("closes_connection_after_stream"))

    @property
    def greedy_depends_on_batch(self) -> bool:
        """Whether a greedy reply may change with the batch it is decoded in (``features.greedy_depends_on_batch``)."""
        return bool(self.features.get("greedy_depends_on_batch"))

    @property
    def error_shape(self) -> str:
        """How a refusal's body is shaped: ``nested`` (OpenAI's, the default) or ``flat`` (SGLang's)."""
        return self.features.get("error_shape") or "nested"

    @property
    def continuous_usage_stats(self) -> str | None:
        """Which stream chunks ``stream_options.continuous_usage_stats`` gives usage: ``every_chunk`` (vLLM),
        ``output_chunks`` (SGLang), or None when the engine does not offer it."""
        return self.features.get("continuous_usage_stats") or None

    @property
    def history_reasoning_field(self) -> str | None:
        """The field an assistant message of the history carries its reasoning back in (interleaved thinking);
        None when the engine takes none. Unset: the field the engine puts reasoning in."""
        if "history_reasoning_field" in self.features:
            return self.features["history_reasoning_field"]
        return self.reasoning_field

    @property
    def thinking_budget_field(self) -> str | None:
        """The (dotted) request field of a thinking token budget; None when the engine takes none."""
        return self.features.get("thinking_budget_field") or None

    @property
    def cached_tokens_in(self) -> str:
        """The dotted path under usage where the engine reports cached prompt tokens."""
        return self.features.get("cached_tokens_in") or CACHED_TOKENS_IN

    def metric_names(self, gauge: str) -> tuple[str, ...]:
        """The names a Prometheus gauge (``running``, ``waiting``, ``kv_cache_usage``) or counter
        (``prefix_cache_queries``, ``prefix_cache_hits``, ``spec_decode_draft_tokens``,
        ``spec_decode_accepted_tokens``) is served under, newest first; empty when the profile names none."""
        known = (*METRIC_GAUGES, *METRIC_COUNTERS)
        if gauge not in known:
            raise ValueError(f"unknown gauge or counter {gauge!r}; known: {', '.join(known)}")
        return tuple((self.features.get("metric_names") or {}).get(gauge, ()))


@dataclass(frozen=True)
class ModelProfile:
    name: str
    description: str
    match: tuple[str, ...]
    capabilities: frozenset[str]
    # None: the profile declares none (the recall size is then the engine's max_model_len).
    context_length: int | None
    reasoning_default_on: bool
    reasoning_markers: tuple[str, ...]
    thinking_modes: dict[str, dict[str, Any]] = field(default_factory=dict)
    reasoning_efforts: tuple[str, ...] = ()
    tokenizer: str | None = None
    source: Path | None = None
    reply_tokens: int = 1024
    # Throughput gate for deployments of this model ([CELL:]METRIC<=VALUE); see throughput_gate.
    throughput_thresholds: tuple[str, ...] = ()
    # Capabilities every deployment of this model must serve (as --expect).
    expect: frozenset[str] = frozenset()
    # Upper bound of a long answer's max_tokens (slow CPU test models); None: the prompt's own.
    max_tokens_cap: int | None = None
    # The tool-accuracy run's settings and thresholds, as written (tool_accuracy.policy reads them).
    tool_accuracy: dict[str, Any] = field(default_factory=dict)
    # Samples per kind of model-behaviour check (answers, thinking, ...); a kind not given takes
    # trials.DEFAULT_SAMPLES. --trials overrides them all.
    trials: dict[str, int] = field(default_factory=dict)
    # The SLO check's objective and cell, as written (load/open_loop/settings.py reads it); empty: none.
    slo: dict[str, Any] = field(default_factory=dict)
    # Capabilities every deployment of this model leaves off on purpose (as --not-served).
    not_served: frozenset[str] = frozenset()
    # engine-acceptance diff's tolerances for this model's runs, as fractions by metric family ("default": all).
    diff_tolerances: dict[str, float] = field(default_factory=dict)
    # What the chat template does with reasoning sent back in the history: keep, current_turn, drop; None: unsaid.
    reasoning_in_history: str | None = None
    # The thinking token budget the checks send; None: the suite's default (DEFAULT_THINKING_BUDGET).
    thinking_budget_tokens: int | None = None
    # The cold/warm TTFT gate of prefix reuse, as written (prefix_cache.warm_ttft_ratio_max); empty: reported only.
    prefix_cache: dict[str, Any] = field(default_factory=dict)

    def has(self, capability: str) -> bool:
        return capability in self.capabilities

    def output_budget(self, asked: int) -> int:
        """The max_tokens a check sends when its prompt asks for ``asked``."""
        return asked if self.max_tokens_cap is None else min(asked, self.max_tokens_cap)

    def lacks_reason(self, capability: str) -> str:
        return f"model profile {self.name!r} ({self.source}) does not list the {capability!r} capability"

    def matches(self, served_name: str) -> bool:
        return any(re.search(pattern, served_name) for pattern in self.match)


def _load_yaml(path: Path, kind: str) -> dict[str, Any]:
    if not path.is_file():
        raise ProfileError(f"{kind} profile file not found: {path}")
    try:
        data = read_yaml(path)
    except yaml.YAMLError as exc:
        raise ProfileError(f"{path}: not valid YAML: {exc}") from exc
    validator = _validator(f"{kind}-profile")
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(part) for part in first.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise ProfileError(f"{path}: field {where}: {first.message}{more}")
    return data


@lru_cache(maxsize=None)
def _validator(schema_name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS_DIR / f"{schema_name}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def _resolve(name_or_path: str, kind_dir: str) -> Path:
    """A path as given, or the file in effect for a profile name (user dirs first, then shipped)."""
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} or candidate.is_file():
        return candidate
    found = find_data_file(_profile_kind(kind_dir), name_or_path)
    if found is None:
        searched = ", ".join(str(source.folder(kind_dir)) for source in data_sources())
        raise ProfileError(f"no {_KIND_OF[kind_dir]} profile named {name_or_path!r} in {searched}; "
                           f"available: {', '.join(available_profiles(kind_dir))}")
    return found.path


def _check_name(data: dict[str, Any], path: Path, name_or_path: str, kind_dir: str) -> None:
    # Found by its file name, a profile must carry that name: the report, the records and
    # --profile all say the name, and a user's file must not pass for another profile.
    if Path(name_or_path) != path and data["name"] != path.stem:
        raise ProfileError(f"{path}: field name: {data['name']!r} differs from the file name; a "
                           f"{_KIND_OF[kind_dir]} profile in {path.parent} must be named like its file, "
                           f"{path.stem!r}")


def _profile_kind(kind_dir: str) -> str:
    if kind_dir not in _KIND_OF:
        raise ValueError(f"unknown kind of profile {kind_dir!r}; known: {', '.join(_KIND_OF)}")
    return kind_dir


def available_profiles(kind_dir: str) -> list[str]:
    """Profile names of one kind (``models`` or ``engines``) in search order: the user's dirs, then shipped.

    Within one folder the names are sorted; a user's file that replaces a shipped one
    appears once, at the user's place.
    """
    return [found.name for found in data_files(_profile_kind(kind_dir))]


def load_engine_profile(name_or_path: str) -> EngineProfile:
    """An engine profile by name (looked up in the profiles dirs, then shipped) or by YAML path."""
    path = _resolve(name_or_path, "engines")
    data = _load_yaml(path, "engine")
    _check_name(data, path, name_or_path, "engines")
    return EngineProfile(
        name=data["name"],
        description=data["description"],
        owned_by=tuple(data["detect"]["owned_by"]),
        version_endpoints=tuple(data["detect"]["version_endpoints"]),
        reasoning_field=data["reasoning_field"],
        reasoning_effort_in=data["reasoning_effort_in"],
        features=dict(data["features"]),
        source=path,
        refusals=parse_refusals(data.get("refusals"), path, ProfileError),
        serves=tuple(_route_field(raw, path, "detect/serves") for raw in data["detect"].get("serves") or ()),
        version_from=(_route_field(data["detect"]["version_from"], path, "detect/version_from")
                      if data["detect"].get("version_from") else None),
    )


def _route_field(raw: dict[str, Any], path: Path, where: str) -> RouteField:
    pattern = raw.get("pattern")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ProfileError(f"{path}: field {where}: {pattern!r} is not a regular expression ({exc})") from exc
    return RouteField(raw["path"], raw["field"], pattern)


def load_model_profile(name_or_path: str) -> ModelProfile:
    """A model profile by name (looked up in the profiles dirs, then shipped) or by YAML path."""
    path = _resolve(name_or_path, "models")
    data = _load_yaml(path, "model")
    _check_name(data, path, name_or_path, "models")
    for pattern in data["match"]:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ProfileError(f"{path}: field match: {pattern!r} is not a regular expression ({exc})") from exc
    for other in ("capabilities", "expect"):
        both = sorted(set(data.get("not_served") or ()) & set(data.get(other) or ()))
        if both:
            raise ProfileError(f"{path}: field not_served: {', '.join(map(repr, both))} also in {other}: a capability "
                               "is either off on purpose or one the model has")
    reasoning = data["reasoning"]
    thinking = data.get("thinking") or {}
    return ModelProfile(
        name=data["name"],
        description=data["description"],
        match=tuple(data["match"]),
        capabilities=frozenset(data["capabilities"]),
        context_length=data.get("context_length"),
        reasoning_default_on=bool(reasoning.get("default_on", False)),
        reasoning_markers=tuple(reasoning["markers"]),
        thinking_modes=dict(thinking.get("modes") or {}),
        reasoning_efforts=tuple(thinking.get("efforts") or ()),
        tokenizer=data.get("tokenizer"),
        reply_tokens=data.get("reply_tokens", 1024),
        source=path,
        throughput_thresholds=tuple((data.get("throughput") or {}).get("thresholds") or ()),
        expect=frozenset(data.get("expect") or ()),
        max_tokens_cap=data.get("max_tokens_cap"),
        tool_accuracy=dict(data.get("tool_accuracy") or {}),
        trials=dict(data.get("trials") or {}),
        slo=dict(data.get("slo") or {}),
        not_served=frozenset(data.get("not_served") or ()),
        diff_tolerances={name: percent / 100.0 for name, percent in (data.get("diff_tolerances") or {}).items()},
        reasoning_in_history=reasoning.get("in_history"),
        thinking_budget_tokens=thinking.get("budget_tokens"),
        prefix_cache=dict(data.get("prefix_cache") or {}),
    )


def choose_model_profile(served_model: str, requested: str | None) -> ModelProfile:
    """The ``--profile`` the user named, else the first whose ``match`` fits, else generic.

    Profiles are tried in search order, so a user's profile whose ``match`` fits the served
    name wins over a shipped one that fits it too.
    """
    if requested:
        return load_model_profile(requested)
    for name in available_profiles("models"):
        profile = load_model_profile(name)
        if profile.matches(served_model):
            return profile
    return load_model_profile("generic")
