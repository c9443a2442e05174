"""The built-in reference engine: a real OpenAI-compatible HTTP server.

It imitates vLLM's or SGLang's conventions, answers with a few honest rules, and
can inject each defect the acceptance suite must catch. It is the suite's default
target when no engine URL is given, and the self-tests' way to prove every check
fails on its defect.

    with start_reference_engine(convention="sglang", defects=["no-done"]) as engine:
        ...  # engine.url == "http://127.0.0.1:PORT"
"""

from __future__ import annotations

from .config import DEFAULT_MAX_MODEL_LEN, DEFAULT_MODEL, LatencyModel, ReferenceEngineConfig
from .conventions import CONVENTIONS, REFERENCE_VERSION, Convention, get_convention
from .defect_names import DEFECTS, UnknownDefectError, validate_defects
from .launcher import RunningReferenceEngine, start_reference_engine
from .server import build_app
from .tokenizer import ReferenceTokenizer, get_tokenizer

__all__ = [
    "CONVENTIONS",
    "DEFAULT_MAX_MODEL_LEN",
    "DEFAULT_MODEL",
    "DEFECTS",
    "REFERENCE_VERSION",
    "Convention",
    "LatencyModel",
    "ReferenceEngineConfig",
    "ReferenceTokenizer",
    "RunningReferenceEngine",
    "UnknownDefectError",
    "build_app",
    "get_convention",
    "get_tokenizer",
    "start_reference_engine",
    "validate_defects",
]
