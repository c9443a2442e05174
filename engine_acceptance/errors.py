"""One error tree for the whole package.

``EngineAcceptanceError`` is the root of every exception class the suite raises on purpose.
Under it, ``UsageError`` is whatever the user can fix in what they gave us (options,
profiles, expectation records, settings files, a missing suite): the plugin maps it to
pytest's usage error, exit code 4, in one place. ``EngineUnavailable`` means the engine
could not be reached or never became ready: exit code 6, before any check runs. The few
other classes under the root name what stopped a measurement (a token count, a prompt
source, a load worker, a reply past the cap): each is caught by name where it happens, or
fails the check it happens in, with the reason. ``assertions.SeveralProblems`` is a check's
failure itself, and also an ``AssertionError`` so pytest and Allure count it failed, not
broken. A failing engine is never an exception of ours: it is a check's failure.

Two classes stay outside the root on purpose: ``pytest_plugin.interrupts.Terminated`` is a
``KeyboardInterrupt`` (under the root it would be an ``Exception``, and an ``except
Exception`` on the way would swallow the stop), and ``assertions.ObservationWarning`` is a
warning category, never raised. ``docs/architecture.md`` draws the whole tree, and
``selftest/test_error_tree.py`` holds the code to it.
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
