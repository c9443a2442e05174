"""Engine and model profiles: engine and model differences as data, never as ``if``.

An engine profile says how an engine family reports itself and where it takes
engine-specific options; a model profile says what a served model can do and
how its modes are sent. Both are YAML files under ``fixtures/profiles/`` checked
against JSON schemas in ``fixtures/schemas/`` when loaded; a bad file is a
:class:`ProfileError` that names the file and the field.
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
from engine_acceptance.errors import UsageError
from engine_acceptance.resources import suite_path

__all__ = [
    "DATA_ROOT",
    "EngineProfile",
    "ModelProfile",
    "ProfileError",
    "choose_model_profile",
    "load_engine_profile",
    "load_model_profile",
    "available_profiles",
]

# The repository's fixtures/ folder (the package is installed editable from the repo).
DATA_ROOT = suite_path("fixtures")
PROFILES_DIR = DATA_ROOT / "profiles"
SCHEMAS_DIR = DATA_ROOT / "schemas"


class ProfileError(UsageError, ValueError):
    """A profile file that is missing, unreadable or does not match its schema."""


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

    @property
    def tokenize_endpoint(self) -> str | None:
        return self.features.get("tokenize_endpoint")

    @property
    def supports_ignore_eos(self) -> bool:
        return bool(self.features.get("ignore_eos"))


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
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    candidate = Path(name_or_path)
    if candidate.suffix in {".yaml", ".yml"} or candidate.is_file():
        return candidate
    return PROFILES_DIR / kind_dir / f"{name_or_path}.yaml"


def available_profiles(kind_dir: str) -> list[str]:
    return sorted(path.stem for path in (PROFILES_DIR / kind_dir).glob("*.yaml"))


def load_engine_profile(name_or_path: str) -> EngineProfile:
    path = _resolve(name_or_path, "engines")
    if not path.is_file() and not Path(name_or_path).suffix:
        raise ProfileError(
            f"no engine profile named {name_or_path!r}; available: {', '.join(available_profiles('engines'))}"
        )
    data = _load_yaml(path, "engine")
    return EngineProfile(
        name=data["name"],
        description=data["description"],
        owned_by=tuple(data["detect"]["owned_by"]),
        version_endpoints=tuple(data["detect"]["version_endpoints"]),
        reasoning_field=data["reasoning_field"],
        reasoning_effort_in=data["reasoning_effort_in"],
        features=dict(data["features"]),
        source=path,
    )


def load_model_profile(name_or_path: str) -> ModelProfile:
    path = _resolve(name_or_path, "models")
    if not path.is_file() and not Path(name_or_path).suffix:
        raise ProfileError(
            f"no model profile named {name_or_path!r}; available: {', '.join(available_profiles('models'))}"
        )
    data = _load_yaml(path, "model")
    for pattern in data["match"]:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ProfileError(f"{path}: field match: {pattern!r} is not a regular expression ({exc})") from exc
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
    )


def choose_model_profile(served_model: str, requested: str | None) -> ModelProfile:
    """The ``--profile`` the user named, else the first whose ``match`` fits, else generic."""
    if requested:
        return load_model_profile(requested)
    for name in available_profiles("models"):
        profile = load_model_profile(name)
        if profile.matches(served_model):
            return profile
    return load_model_profile("generic")
