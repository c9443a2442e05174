"""The capability registry: every entry resolves, and what other files list agrees with it.

The registry (engine_acceptance/capabilities/registry.py) is the one list of capabilities;
these keep what cannot import it (the JSON schemas of the profiles, the checks' markers)
and what it names by string (the probes) equal to it.
"""

from __future__ import annotations

import ast
import inspect
import json

from engine_acceptance.capabilities import registry
from engine_acceptance.capabilities.discovery import resolve_probe
from engine_acceptance.capabilities.registry import (
    CAPABILITIES,
    CHECK_GROUPS,
    GROUP_MARKERS,
    PROFILE_VOCABULARY,
    capability_of_marker,
    probed_capabilities,
)
from engine_acceptance.profiles.profile import SCHEMAS_DIR
from engine_acceptance.resources import suite_path


def _schema(name: str) -> dict:
    return json.loads((SCHEMAS_DIR / name).read_text(encoding="utf-8"))


def test_every_probed_capability_names_a_probe_function_that_resolves() -> None:
    for entry in probed_capabilities():
        function = resolve_probe(entry.probe)
        assert inspect.iscoroutinefunction(function), f"{entry.name}: {entry.probe} is not an async function"


def test_names_are_unique_and_report_ranks_number_the_probes() -> None:
    names = [entry.name for entry in CAPABILITIES]
    assert len(names) == len(set(names))
    assert len(GROUP_MARKERS) == len(set(GROUP_MARKERS))
    assert sorted(entry.probe.report_rank for entry in probed_capabilities()) == list(range(len(probed_capabilities())))


def test_every_capability_marker_is_a_check_group_of_one_capability() -> None:
    markers = [marker for entry in CAPABILITIES for marker in entry.markers]
    assert len(markers) == len(set(markers)), "a marker tests one capability"
    assert set(markers) <= set(GROUP_MARKERS)
    assert capability_of_marker().keys() == set(markers)


def test_the_model_profile_schema_lists_the_profile_capabilities() -> None:
    schema = _schema("model-profile.schema.json")
    for field in ("capabilities", "expect", "not_served"):
        assert tuple(schema["properties"][field]["items"]["enum"]) == PROFILE_VOCABULARY, field


def test_the_engine_profile_schema_takes_refusals_for_every_probed_capability() -> None:
    keys = _schema("engine-profile.schema.json")["properties"]["refusals"]["properties"].keys()
    assert set(keys) == {entry.name for entry in probed_capabilities()}


def test_every_marker_the_checks_use_is_registered() -> None:
    """A check group's marker in tests/ that the registry lacks would fail --strict-markers; one the checks
    never use is a group with no checks."""
    used: set[str] = set()
    for path in sorted(suite_path("tests").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr == "mark" and isinstance(node.value.value, ast.Name)
                    and node.value.value.id == "pytest"):
                used.add(node.attr)
    groups = set(GROUP_MARKERS)
    assert groups <= used, f"check groups no check carries: {sorted(groups - used)}"


def test_the_registry_imports_nothing_of_the_package_but_errors() -> None:
    tree = ast.parse(inspect.getsource(registry))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    ours = {name for name in imported if name.startswith("engine_acceptance")}
    assert ours <= {"engine_acceptance.errors"}, ours


def test_a_stated_intent_names_the_command() -> None:
    assert "--not-served image" in registry.stated_intent("image")
    assert "--tokenizer FILE" in registry.stated_intent("tokenize")


def test_every_check_group_registers_a_described_marker() -> None:
    assert all(group.description and group.marker_line.startswith(f"{group.marker}: ") for group in CHECK_GROUPS)


def test_every_core_check_pattern_names_a_collected_check_of_its_capability(pytester) -> None:
    """A core check renamed or moved would leave its capability untestable: "tested" needs a core pass."""
    from suite_runner import REPO

    from engine_acceptance.profiles.expectations import check_id
    from engine_acceptance.pytest_plugin.collection import capabilities_tested_by

    collected: list[tuple[str, set[str]]] = []

    class Collector:
        def pytest_collection_finish(self, session) -> None:
            collected.extend((check_id(item.nodeid), capabilities_tested_by(item)) for item in session.items)

    pytester.inline_run("-c", str(REPO / "pytest.ini"), "--rootdir", str(REPO), str(REPO / "tests"),
                        "--collect-only", "-p", "no:cacheprovider", plugins=[Collector()])
    assert len(collected) > 100, f"the suite's checks were not collected ({len(collected)})"
    for entry in CAPABILITIES:
        assert entry.core_checks or not entry.in_profiles, f"{entry.name}: a model capability needs core checks"
        for pattern in entry.core_checks:
            covering = [check for check, covers in collected
                        if entry.name in covers and registry.Capability(entry.name, entry.found_by,
                                                                         core_checks=(pattern,)).is_core(check)]
            assert covering, f"{entry.name}: core check {pattern!r} names no collected check that covers it"
