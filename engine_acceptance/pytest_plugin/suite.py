"""The shipped suite as a pytest plugin: its markers, its fixture modules, and when it is in play.

Installed, the plugin is loaded by every pytest run in the environment (the ``pytest11``
entry point), including runs of unrelated projects. So it stays passive unless the run
is an acceptance run: the shipped checks are among the paths to collect, ``--engine-url``
is given, or ``-p engine_acceptance`` asks for it. An acceptance run started from a
folder with no tests of its own (no paths, no ``testpaths``) collects the shipped checks,
wherever the package is installed.

Nothing here depends on the checkout's ``pytest.ini``: markers are registered here (the check
groups from the capability registry, then ``requires`` and ``trials``), and
the checks mark their coroutines for pytest-asyncio themselves.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from engine_acceptance.capabilities.registry import CHECK_GROUPS
from engine_acceptance.pytest_plugin import public
from engine_acceptance.resources import suite_path

__all__ = ["ARGUMENT_MARKER_LINES", "FIXTURE_MODULES", "collect_shipped_suite_if_nothing_named", "is_acceptance_run",
           "marker_lines", "register_fixture_modules", "register_markers"]

# Markers that take arguments rather than name a group of checks; the groups are the registry's.
ARGUMENT_MARKER_LINES = (
    "requires(*capabilities): skip unless the deployment serves every capability named",
    "trials(kind, at_least=None): a model-behaviour check sent K times together (K: --trials, the model profile's "
    "trials, or the kind's default; kinds answers, thinking, tools, image, recall); all K must pass, or at least "
    "the share at_least",
)
# fixtures/*.py: pytest fixture modules, registered as plugins by file, so they are found
# the same way in a checkout and in an installed wheel.
FIXTURE_MODULES = ("engine", "recall", "throughput", "tool_accuracy_run", "trials")
PLUGIN_NAME = "engine_acceptance"
# pytest_plugin/public.py: the fixtures checks and fixture modules may use (acceptance, suite_options).
PUBLIC_PLUGIN_NAME = f"{PLUGIN_NAME}.public"


def marker_lines() -> tuple[str, ...]:
    """Every marker the suite registers: the registry's check groups, then the markers with arguments."""
    return tuple(group.marker_line for group in CHECK_GROUPS) + ARGUMENT_MARKER_LINES


def register_markers(config: pytest.Config) -> None:
    for line in marker_lines():
        config.addinivalue_line("markers", line)


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def is_acceptance_run(config: pytest.Config) -> bool:
    """Whether this pytest run is an acceptance run; see the module docstring."""
    if config.option.engine_url is not None:
        return True
    args = list(config.invocation_params.args)
    if any(arg == f"-p{PLUGIN_NAME}" or (arg == PLUGIN_NAME and index and args[index - 1] == "-p")
           for index, arg in enumerate(args)):
        return True
    tests = suite_path("tests")
    for arg in config.args:
        path = Path(config.invocation_params.dir, arg.split("::", 1)[0])
        # A path inside the shipped checks, or a folder holding them (the checkout's root).
        if _inside(path, tests) or (path.is_dir() and _inside(tests, path) and path != Path(path.anchor)):
            return True
    return False


def collect_shipped_suite_if_nothing_named(config: pytest.Config) -> None:
    """No paths and no ``testpaths``: run the shipped checks rather than look for tests in the folder."""
    if config.args_source == pytest.Config.ArgsSource.INVOCATION_DIR:
        config.args[:] = [str(suite_path("tests"))]


def register_fixture_modules(config: pytest.Config) -> None:
    """Register the plugin's public fixtures, then load ``fixtures/*.py`` from the suite, each as a plugin."""
    if config.pluginmanager.get_plugin(PUBLIC_PLUGIN_NAME) is None:
        config.pluginmanager.register(public, PUBLIC_PLUGIN_NAME)
    folder = suite_path("fixtures")
    for name in FIXTURE_MODULES:
        plugin_name = f"{PLUGIN_NAME}.fixtures.{name}"
        if config.pluginmanager.get_plugin(plugin_name) is not None:
            continue
        module_name = f"engine_acceptance_fixtures_{name}"
        module = sys.modules.get(module_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(module_name, folder / f"{name}.py")
            assert spec is not None and spec.loader is not None, folder / f"{name}.py"
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            spec.loader.exec_module(module)
        config.pluginmanager.register(module, plugin_name)
