"""One error tree for the whole package.

``EngineAcceptanceError`` is the root. Under it, ``UsageError`` is whatever the user can
fix in what they gave us (options, profiles, expectation records, settings files, a
missing suite): the plugin maps it to pytest's usage error, exit code 4, in one place.
``EngineUnavailable`` means the engine could not be reached or never became ready: exit
code 6, before any check runs. Everything else that goes wrong is a check's failure,
reported by the check, not an exception of ours.
"""

from __future__ import annotations

__all__ = ["EngineAcceptanceError", "UsageError", "EngineUnavailable", "ENGINE_UNAVAILABLE_EXIT_CODE"]

# pytest uses 0-5; 6 is ours, so a pipeline can tell "engine down" from "checks failed".
ENGINE_UNAVAILABLE_EXIT_CODE = 6


class EngineAcceptanceError(Exception):
    """Root of every error this package raises on purpose."""


class UsageError(EngineAcceptanceError):
    """Bad input from the user: an option, a profile, a record, a settings file (exit 4)."""


class EngineUnavailable(EngineAcceptanceError):
    """The engine did not answer or did not become ready (exit 6)."""
