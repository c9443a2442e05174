"""The checks and fixture modules reach the plugin through its public surface only, and the engine handle is one.

docs/architecture.md ("What checks may use") lists the surface: the fixtures and names of
``engine_acceptance.pytest_plugin.public`` and library modules. Any other import of
``pytest_plugin`` from ``tests/`` or ``fixtures/`` (a stash key, a hook module) fails here,
naming the file and line. The session's target and redactor are built once, not per access.
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine_acceptance.pytest_plugin import public
from engine_acceptance.session import AcceptanceSession
from engine_acceptance.wire.types import ClientTimeouts
from engine_acceptance.profiles.profile import load_engine_profile, load_model_profile
from engine_acceptance.wire.readiness import EngineInfo

ROOT = Path(__file__).resolve().parent.parent.parent
PLUGIN = "engine_acceptance.pytest_plugin"
PUBLIC = f"{PLUGIN}.public"


def private_plugin_imports(root: Path, folder: str) -> list[str]:
    """Every import of ``pytest_plugin`` under ``root/folder`` other than of its public module, as ``path:line``."""
    found = []
    for path in sorted((root / folder).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module:
                modules = [node.module] if node.module != PLUGIN else [f"{PLUGIN}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                if (module == PLUGIN or module.startswith(PLUGIN + ".")) and module != PUBLIC:
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {module}")
    return found


def test_checks_and_fixture_modules_import_only_the_public_surface_of_the_plugin() -> None:
    found = private_plugin_imports(ROOT, "tests") + private_plugin_imports(ROOT, "fixtures")
    assert not found, "use pytest_plugin.public or a library module instead: " + "; ".join(found)


def test_the_rule_catches_a_stash_key_import(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "from engine_acceptance.pytest_plugin.keys import options_key\n"
        "from engine_acceptance.pytest_plugin import interrupts\n"
        "from engine_acceptance.pytest_plugin.public import suite_options_of\n")
    found = private_plugin_imports(tmp_path, "tests")
    assert found == ["tests/test_x.py:1 imports engine_acceptance.pytest_plugin.keys",
                     "tests/test_x.py:2 imports engine_acceptance.pytest_plugin.interrupts"]


def test_public_names_are_what_the_docs_list() -> None:
    assert sorted(public.__all__) == ["AcceptanceOptions", "AcceptanceSession", "acceptance", "suite_options",
                                      "suite_options_of"]


def test_the_session_builds_its_target_and_redactor_once() -> None:
    engine = EngineInfo(url="http://127.0.0.1:1", kind="vllm", kind_source="--engine", version=None, model="m",
                        models=["m"])
    session = AcceptanceSession(engine=engine, engine_profile=load_engine_profile("vllm"),
                                declared_profile=load_model_profile("reference"), api_key="k",
                                timeouts=ClientTimeouts())
    assert session.target is session.target and session.redactor is session.redactor
    assert (session.target.base_url, session.target.model, session.target.api_key) == ("http://127.0.0.1:1", "m", "k")
    again = AcceptanceSession.from_dict(session.to_dict())
    assert again.target == session.target
