"""Configuration of the reference engine: which engine it imitates, what it injects.

One frozen dataclass, validated on construction, so the CLI, the launcher and the
in-process tests all build the same object and an invalid setting fails early.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .conventions import CONVENTIONS
from .defect_names import validate_defects
from .spec_decode import DEFAULT_ACCEPTANCE

__all__ = ["API_KEY_ENV", "DEFAULT_MAX_MODEL_LEN", "DEFAULT_MODEL", "LISTENING_PREFIX", "LatencyModel",
           "ReferenceEngineConfig"]

DEFAULT_MODEL = "reference-model"
DEFAULT_MAX_MODEL_LEN = 32768

# The contract between the command (``__main__``) and the launcher that starts it and reads
# its output: the line that says where it listens, and where the API key is handed over.
# Here, not in either of them: the launcher runs the command's main in a forked engine, so
# the command importing the launcher for these would close a circle.
LISTENING_PREFIX = "engine-acceptance reference engine listening on "
API_KEY_ENV = "REFERENCE_ENGINE_API_KEY"


@dataclass(frozen=True)
class LatencyModel:
    """How long generation takes, so streams have real gaps between chunks.

    The defaults are small: functional tests stay fast, yet time-to-first-token and
    time-per-output-token are measurable and non-zero.
    """

    ttft_ms: float = 2.0
    tpot_ms: float = 1.0
    # Prefill cost grows with the prompt; zero by default so long-context tests are
    # not slowed down unless a throughput run asks for realism.
    prefill_ms_per_1k_tokens: float = 0.0
    # A batched engine decodes slower the more requests share a step: each other
    # request generating at the same time adds this fraction to the per-token time
    # (0.05: 32 requests decode at 1 + 31 * 0.05 = 2.55 x tpot_ms). Zero by default,
    # so throughput runs have an exact ground truth unless they ask for contention.
    batch_slowdown: float = 0.0
    # A knee: past `knee_inflight` requests in flight, each one more adds this many ms to every
    # token (TPOT = tpot_ms + k * max(0, in flight - knee)). Zero by default. With deterministic
    # arrivals the knee of SLO attainment against rate is then known in closed form: in flight =
    # rate x (TTFT + (n - 1) x TPOT) (Little's law), so nothing slows below knee / that duration.
    knee_inflight: int = 0
    tpot_ms_per_inflight_over_knee: float = 0.0

    def __post_init__(self) -> None:
        for name in ("ttft_ms", "tpot_ms", "prefill_ms_per_1k_tokens", "batch_slowdown", "knee_inflight",
                     "tpot_ms_per_inflight_over_knee"):
            value = getattr(self, name)
            if value < 0:
                raise ValueError(f"LatencyModel.{name} must be >= 0, got {value}")

    def ttft_seconds(self, prompt_tokens: int) -> float:
        """Delay before the first output token for a prompt of this length."""
        return (self.ttft_ms + self.prefill_ms_per_1k_tokens * prompt_tokens / 1000.0) / 1000.0

    def tpot_seconds(self, active_requests: int = 1) -> float:
        """Time for one more output token while `active_requests` generate together."""
        others = max(active_requests - 1, 0)
        over_knee = max(active_requests - self.knee_inflight, 0)
        return (self.tpot_ms * (1.0 + self.batch_slowdown * others)
                + self.tpot_ms_per_inflight_over_knee * over_knee) / 1000.0


@dataclass(frozen=True)
class ReferenceEngineConfig:
    """Everything that decides how the reference engine answers."""

    convention: str = "vllm"
    api_key: str | None = None
    defects: frozenset[str] = field(default_factory=frozenset)
    model: str = DEFAULT_MODEL
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    latency: LatencyModel = field(default_factory=LatencyModel)
    # Tokens per streamed delta: a few tokens per chunk, like a detokenizer that
    # flushes on whole characters, keeps event counts realistic but bounded.
    stream_chunk_tokens: int = 4
    # Benchmarks only: every streamed event carries "engine_sent_at", the engine's
    # time.monotonic() just before the write, so a client's timing error can be
    # measured against what the engine really did (same clock on one host).
    stamp_events: bool = False
    # What the deployment serves, for capability discovery: a text-only model refuses
    # every image and video part (vLLM's 400 "<model> is not a multimodal model"); a
    # server started without --enable-auto-tool-choice/--tool-call-parser refuses tools
    # (vLLM's 400); one without /tokenize answers 404 there; a model that never reasons.
    text_only: bool = False
    tool_parser: bool = True
    tokenize: bool = True
    reasoning: bool = True
    # Whether the model reasons when no switch says so; False: only a switch that turns thinking on does
    # (vLLM's qwen3 parser with --default-chat-template-kwargs '{"enable_thinking": false}', as CI's vLLM serves).
    reasoning_by_default: bool = True
    # A server without a structured-output backend refuses response_format json_schema/json_object (400).
    structured_outputs: bool = True
    # A server without the Responses API answers POST /v1/responses with 404 Not Found.
    responses: bool = True
    # A prefix cache that reports its hits (usage.prompt_tokens_details.cached_tokens, /metrics counters);
    # without it nothing is cached and nothing reported, as vLLM with --no-enable-prefix-caching and
    # without --enable-prompt-tokens-details.
    prefix_cache: bool = True
    # Speculative decoding's acceptance, counted at /metrics as vLLM counts it (spec_decode.py); None: the
    # engine does no speculative decoding and serves no such counters.
    spec_decode_acceptance: float | None = DEFAULT_ACCEPTANCE

    def __post_init__(self) -> None:
        if self.convention not in CONVENTIONS:
            raise ValueError(
                f"unknown convention {self.convention!r}; valid: {', '.join(sorted(CONVENTIONS))}"
            )
        # Accept any iterable of names but store the validated frozenset.
        object.__setattr__(self, "defects", validate_defects(self.defects))
        if self.max_model_len < 1:
            raise ValueError(f"max_model_len must be >= 1, got {self.max_model_len}")
        if self.stream_chunk_tokens < 1:
            raise ValueError(f"stream_chunk_tokens must be >= 1, got {self.stream_chunk_tokens}")
        if not self.model:
            raise ValueError("model name must not be empty")
        if self.spec_decode_acceptance is not None and not 0.0 <= self.spec_decode_acceptance <= 1.0:
            raise ValueError(f"spec_decode_acceptance is a share, 0 to 1, got {self.spec_decode_acceptance}")
        if self.api_key == "":
            # An empty key would silently disable auth while looking configured.
            raise ValueError("api_key must be None or a non-empty string")
