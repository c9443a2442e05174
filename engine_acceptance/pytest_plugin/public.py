"""What checks and fixture modules may use of the plugin: two session fixtures and one function.

Like pytest-xdist's ``worker_id`` fixture, this is the whole of the plugin's surface for
``tests/`` and ``fixtures/``; the stash keys, the hooks and the other modules of
``pytest_plugin/`` are internals that may change. docs/architecture.md ("What checks may
use") lists this surface with the library modules the checks import.

* ``acceptance`` (fixture): the engine under test, built once before any check
  (:class:`~engine_acceptance.session.AcceptanceSession`: its target, identity, profiles,
  discovery result, key and redactor).
* ``suite_options`` (fixture): the run's command line, parsed and frozen
  (:class:`~engine_acceptance.pytest_plugin.options.AcceptanceOptions`).
* :func:`suite_options_of`: the same options where no fixture reaches
  (``pytest_generate_tests``).
* ``AcceptanceOptions``, ``AcceptanceSession``: the types of the two fixtures, for annotations.

The plugin registers this module in every acceptance run (controller and xdist workers)
beside the fixture modules of ``fixtures/``.
"""

from __future__ import annotations

import pytest

from engine_acceptance.pytest_plugin.keys import options_key, session_key
from engine_acceptance.pytest_plugin.options import AcceptanceOptions
from engine_acceptance.session import AcceptanceSession

__all__ = ["AcceptanceOptions", "AcceptanceSession", "acceptance", "suite_options", "suite_options_of"]


def suite_options_of(config: pytest.Config) -> AcceptanceOptions | None:
    """The run's options, for ``pytest_generate_tests``; None when the plugin is not in play for this run."""
    return config.stash.get(options_key, None)


@pytest.fixture(scope="session")
def suite_options(pytestconfig: pytest.Config) -> AcceptanceOptions:
    """The run's command line, parsed and frozen: the same object in every check of the run."""
    options = suite_options_of(pytestconfig)
    if options is None:
        pytest.fail("engine-acceptance has no options for this run (was the plugin loaded?)")
    return options


@pytest.fixture(scope="session")
def acceptance(pytestconfig: pytest.Config) -> AcceptanceSession:
    """The engine under test, what it serves, and the profiles chosen: built once, before any check."""
    session = pytestconfig.stash.get(session_key, None)
    if session is None:
        pytest.fail("engine-acceptance has no engine for this run (was the plugin loaded, or was this --collect-only?)")
    return session
