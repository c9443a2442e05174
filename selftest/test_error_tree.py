"""One error root, read from the source: an error class outside the tree fails here, not in review.

``engine_acceptance/errors.py`` roots every error the suite raises on purpose in
``EngineAcceptanceError``, and ``pytest_configure`` maps the tree to exit codes in one place
(``UsageError`` 4, ``EngineUnavailable`` 6). A class outside the tree escapes that mapping; a
name defined twice makes a traceback ambiguous (``MediaError`` once meant two classes); a class
missing from ``docs/architecture.md`` is one a reader cannot find. The rules, checked with
:mod:`ast` over every ``.py`` file of ``engine_acceptance/`` (the reference engine apart: it
imports nothing of the suite and keeps its own errors), ``fixtures/`` and ``tests/``:

* every exception class derives from ``EngineAcceptanceError``, but for the few in
  :data:`OUTSIDE_THE_ROOT`, each with its reason;
* no exception class name is defined twice (the reference engine's included: one name, one class);
* every exception class is in the Errors tree of ``docs/architecture.md``, on a line with its
  module and under its own base, and the tree names no class the code does not have.

Each rule is a plain function over a source tree, and each is also run on a small tree
written here with the defect it must catch.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "engine_acceptance"
REFERENCE_ENGINE = f"{PACKAGE}.reference_engine"
ERROR_ROOT = f"{PACKAGE}.errors.EngineAcceptanceError"
# Where the suite's own code lives: the package and the shipped checks and fixtures.
SUITE_FOLDERS = (PACKAGE, "fixtures", "tests")
DOCS = Path("docs") / "architecture.md"

# Exception classes of the suite that stay outside the root on purpose. Each must still exist
# and still be outside (a stale entry fails), and each is in the documented tree all the same.
OUTSIDE_THE_ROOT: Mapping[str, str] = {
    f"{PACKAGE}.sigterm.Terminated":
        "a KeyboardInterrupt, so pytest stops the run as on Ctrl-C; under the root it would be an "
        "Exception, and every `except Exception` on the way would swallow the SIGTERM",
    f"{PACKAGE}.assertions.ObservationWarning":
        "a warning category, issued with warnings.warn and never raised",
}


# --- reading the source ------------------------------------------------------------------

@dataclass(frozen=True)
class ClassInfo:
    """One ``class`` statement: its dotted name, where it is, and its bases resolved to dotted names."""

    qualname: str
    path: str
    line: int
    bases: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.qualname.rpartition(".")[2]

    @property
    def module(self) -> str:
        return self.qualname.rpartition(".")[0]

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def in_suite(self) -> bool:
        return not (self.module == REFERENCE_ENGINE or self.module.startswith(f"{REFERENCE_ENGINE}."))

    @property
    def shown_path(self) -> str:
        """The module as the docs name it: relative to ``engine_acceptance/``, else to the checkout."""
        return self.path.removeprefix(f"{PACKAGE}/")


@dataclass
class SourceTree:
    """Every class of a checkout's suite folders, and every module's imported names (for re-exports)."""

    classes: dict[str, ClassInfo]
    imported: dict[str, dict[str, str]]
    # A second class statement of a name its module already has (the first is the one resolved).
    shadowed: list[ClassInfo]

    def canonical(self, qualname: str) -> str:
        """``engine_acceptance.load.GateError`` (a re-export) -> where the class is defined."""
        for _ in range(10):  # a re-export of a re-export is followed; the bound stops an import loop
            if qualname in self.classes:
                return qualname
            module, _, name = qualname.rpartition(".")
            if name not in self.imported.get(module, {}):
                return qualname
            qualname = self.imported[module][name]
        return qualname

    def base_classes(self, cls: ClassInfo) -> list[str]:
        return [self.canonical(base) for base in cls.bases]

    def is_exception(self, qualname: str, seen: frozenset[str] = frozenset()) -> bool:
        qualname = self.canonical(qualname)
        if qualname in seen:
            return False
        if qualname in self.classes:
            return any(self.is_exception(base, seen | {qualname}) for base in self.classes[qualname].bases)
        return _outside_class_is_exception(qualname)

    def derives_from_root(self, qualname: str, seen: frozenset[str] = frozenset()) -> bool:
        qualname = self.canonical(qualname)
        if qualname == ERROR_ROOT:
            return True
        if qualname in seen or qualname not in self.classes:
            return False
        return any(self.derives_from_root(base, seen | {qualname}) for base in self.classes[qualname].bases)

    def exception_classes(self) -> list[ClassInfo]:
        return [cls for qualname, cls in self.classes.items() if self.is_exception(qualname)]

    def shadowed_exception_classes(self) -> list[ClassInfo]:
        return [cls for cls in self.shadowed if any(self.is_exception(base) for base in cls.bases)]


def _outside_class_is_exception(qualname: str) -> bool:
    """A base from builtins or a third-party module: imported to ask (nothing of the suite is)."""
    module, _, name = qualname.rpartition(".")
    if module == "builtins":
        found = getattr(builtins, name, None)
    elif module.partition(".")[0] in SUITE_FOLDERS:
        return False  # a suite name the scan did not find: not a class statement
    else:
        try:
            found = getattr(importlib.import_module(module), name, None)
        except ImportError:
            return False
    return isinstance(found, type) and issubclass(found, BaseException)


def module_name(path: Path, root: Path) -> str:
    """``engine_acceptance/wire/client.py`` -> ``engine_acceptance.wire.client`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_names(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> dotted name, for every import anywhere in the module (late ones too)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = alias.name
                else:
                    head = alias.name.partition(".")[0]
                    names[head] = head
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                source = f"{package}.{source}" if source else package
            for alias in node.names:
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
    return names


def _resolve(expr: ast.expr, module: str, imported: Mapping[str, str], local: set[str]) -> str:
    dotted = ast.unparse(expr)
    head, dot, rest = dotted.partition(".")
    if head in imported:
        return imported[head] + dot + rest
    if head in local:
        return f"{module}.{dotted}"
    if not dot and isinstance(getattr(builtins, head, None), type):
        return f"builtins.{head}"
    return f"{module}.{dotted}"


def read_source(root: Path, folders: Iterable[str] = SUITE_FOLDERS) -> SourceTree:
    """Every class statement under ``folders`` of ``root`` (nested ones too), bases resolved."""
    source = SourceTree(classes={}, imported={}, shadowed=[])
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            module = module_name(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            imported = _imported_names(tree, module, path.name == "__init__.py")
            source.imported[module] = imported
            local = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    bases = tuple(_resolve(base, module, imported, local) for base in node.bases)
                    info = ClassInfo(f"{module}.{node.name}", path.relative_to(root).as_posix(), node.lineno, bases)
                    if info.qualname in source.classes:
                        source.shadowed.append(info)
                    else:
                        source.classes[info.qualname] = info
    return source


# --- the rules ---------------------------------------------------------------------------------

def outside_the_root(source: SourceTree, exempt: Mapping[str, str] = OUTSIDE_THE_ROOT) -> list[str]:
    """Exception classes of the suite that do not derive from the root, and stale exemptions."""
    problems = []
    for cls in source.exception_classes():
        if not cls.in_suite or cls.qualname == ERROR_ROOT or cls.qualname in exempt:
            continue
        if not source.derives_from_root(cls.qualname):
            bases = ", ".join(base.rpartition(".")[2] for base in cls.bases)
            problems.append(f"{cls.where}: {cls.name} derives from {bases}, not from EngineAcceptanceError")
    for qualname in exempt:
        if qualname not in source.classes or not source.is_exception(qualname):
            problems.append(f"OUTSIDE_THE_ROOT names {qualname}, which is no exception class of the suite")
        elif source.derives_from_root(qualname):
            cls = source.classes[qualname]
            problems.append(f"{cls.where}: {cls.name} derives from EngineAcceptanceError: drop it from "
                            "OUTSIDE_THE_ROOT")
    return problems


def defined_twice(source: SourceTree) -> list[str]:
    """Exception class names given to more than one class (the reference engine's included)."""
    by_name: dict[str, list[ClassInfo]] = {}
    for cls in source.exception_classes() + source.shadowed_exception_classes():
        by_name.setdefault(cls.name, []).append(cls)
    return [f"{name} is defined {len(found)} times: {', '.join(cls.where for cls in found)}"
            for name, found in sorted(by_name.items()) if len(found) > 1]


@dataclass(frozen=True)
class TreeLine:
    """One class in the documented tree: its name, the module shown beside it, its parent in the tree."""

    name: str
    shown_path: str
    parent: str | None
    line: int


# A tree line: drawing characters, the class name, then its module (``load/gate.py``).
_TREE_LINE = re.compile(r"^    (?P<indent>[│├└─ ]*)(?P<name>[A-Z]\w*)\s+(?P<path>[\w/]+\.py)\b")


def errors_section(docs_text: str) -> tuple[list[str], int]:
    """The lines of the ``## Errors`` section and the 1-based number of its first line."""
    lines = docs_text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "## Errors"), None)
    if start is None:
        return [], 0
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end], start + 1


def documented_tree(docs_text: str) -> list[TreeLine]:
    """The classes the Errors section draws, each with the class it sits under (by indent)."""
    section, first = errors_section(docs_text)
    found: list[TreeLine] = []
    stack: list[tuple[int, str]] = []  # (indent, name) of the open ancestors
    for offset, text in enumerate(section):
        match = _TREE_LINE.match(text)
        if not match:
            if not text.startswith("    "):
                stack = []  # a paragraph between two trees ends the first one
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        found.append(TreeLine(match["name"], match["path"], stack[-1][1] if stack else None, first + offset))
        stack.append((indent, match["name"]))
    return found


def missing_from_docs(source: SourceTree, docs_text: str, docs_name: str = DOCS.as_posix()) -> list[str]:
    """Suite exception classes the Errors tree lacks, shows in another module or under another base;
    and classes the tree shows that the code does not have."""
    tree = {line.name: line for line in documented_tree(docs_text)}
    ours = {cls.name: cls for cls in source.exception_classes() if cls.in_suite}
    problems = []
    for name, cls in sorted(ours.items()):
        drawn = tree.get(name)
        if drawn is None:
            problems.append(f"{cls.where}: {name} is not in {docs_name}'s Errors tree")
            continue
        if drawn.shown_path != cls.shown_path:
            problems.append(f"{cls.where}: {name} is in {cls.shown_path}, {docs_name}:{drawn.line} says "
                            f"{drawn.shown_path}")
        parent = next((base.rpartition(".")[2] for base in source.base_classes(cls)
                       if base in source.classes and source.is_exception(base)), None)
        if drawn.parent != parent:
            problems.append(f"{cls.where}: {name} derives from {parent or 'no class of ours'}, {docs_name}:"
                            f"{drawn.line} draws it under {drawn.parent or 'nothing'}")
    for name, drawn in sorted(tree.items()):
        if name not in ours:
            problems.append(f"{docs_name}:{drawn.line}: the Errors tree names {name} ({drawn.shown_path}), "
                            "which is no exception class of the suite")
    return problems


# --- the rules on this checkout ----------------------------------------------------------------

@pytest.fixture(scope="module")
def checkout() -> SourceTree:
    source = read_source(ROOT)
    # Not a vacuous pass: the scan found the root and the tree under it.
    assert ERROR_ROOT in source.classes and len(source.exception_classes()) > 10
    return source


def test_every_error_class_of_the_suite_derives_from_engine_acceptance_error(checkout: SourceTree) -> None:
    assert outside_the_root(checkout) == []


def test_no_error_class_name_is_defined_twice(checkout: SourceTree) -> None:
    assert defined_twice(checkout) == []


def test_the_errors_tree_in_the_architecture_doc_is_the_code(checkout: SourceTree) -> None:
    assert missing_from_docs(checkout, (ROOT / DOCS).read_text(encoding="utf-8")) == []


# --- each rule on a small tree with the defect -----------------------------------------------

_ERRORS = '''\
class EngineAcceptanceError(Exception):
    """Root."""


class UsageError(EngineAcceptanceError):
    """Exit 4."""
'''

_DOCS = '''\
# Architecture

## Errors

    EngineAcceptanceError       errors.py: the root
    ├── UsageError              errors.py: exit 4
    │   └── GateError           load/gate.py
    └── SeveralProblems         assertions.py

Outside the root, on purpose:

    Terminated                  sigterm.py

## Installed as a plugin

    NotAnError                  elsewhere.py
'''


def _write(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def _small_tree(tmp_path: Path, **extra: str) -> SourceTree:
    files = {
        f"{PACKAGE}/__init__.py": "",
        f"{PACKAGE}/errors.py": _ERRORS,
        f"{PACKAGE}/load/__init__.py": "from engine_acceptance.load.gate import GateError\n",
        f"{PACKAGE}/load/gate.py": "from engine_acceptance.errors import UsageError\n\n\n"
                                   "class GateError(UsageError):\n    pass\n",
        # Through a re-export and an alias, still under the root; AssertionError kept for pytest.
        f"{PACKAGE}/assertions.py": "from engine_acceptance import errors as e\n\n\n"
                                    "class SeveralProblems(e.EngineAcceptanceError, AssertionError):\n    pass\n",
        f"{PACKAGE}/sigterm.py": "class Terminated(KeyboardInterrupt):\n    pass\n",
        f"{PACKAGE}/plain.py": "class NotAnError:\n    pass\n",
        **{name.replace("__", "/") + ".py": text for name, text in extra.items()},
    }
    return read_source(_write(tmp_path, files))


_EXEMPT = {f"{PACKAGE}.sigterm.Terminated": "a KeyboardInterrupt"}


def test_a_clean_small_tree_passes_every_rule(tmp_path: Path) -> None:
    source = _small_tree(tmp_path)
    assert outside_the_root(source, _EXEMPT) == []
    assert defined_twice(source) == []
    assert missing_from_docs(source, _DOCS) == []


@pytest.mark.parametrize(("module", "code", "problem"), [
    ("stray", "class StrayError(ValueError):\n    pass\n",
     "engine_acceptance/stray.py:1: StrayError derives from ValueError, not from EngineAcceptanceError"),
    # Under a stray class: outside the root all the same.
    ("stray", "class StrayError(RuntimeError):\n    pass\n\n\nclass Deeper(StrayError):\n    pass\n",
     "engine_acceptance/stray.py:5: Deeper derives from StrayError, not from EngineAcceptanceError"),
    # A third-party base is an exception too.
    ("stray", "import json\n\n\nclass StrayError(json.JSONDecodeError):\n    pass\n",
     "engine_acceptance/stray.py:4: StrayError derives from JSONDecodeError, not from EngineAcceptanceError"),
    # A check's module is the suite's code as much as the package is.
    ("tests__test_x", "class CheckError(Exception):\n    pass\n",
     "tests/test_x.py:1: CheckError derives from Exception, not from EngineAcceptanceError"),
], ids=["builtin-base", "under-a-stray-class", "third-party-base", "in-tests"])
def test_an_error_class_outside_the_root_fails_naming_it(tmp_path: Path, module: str, code: str,
                                                         problem: str) -> None:
    name = module if "__" in module else f"{PACKAGE}__{module}"
    source = _small_tree(tmp_path, **{name: code})
    assert problem in outside_the_root(source, _EXEMPT)


def test_the_reference_engine_keeps_its_own_errors_outside_the_root(tmp_path: Path) -> None:
    source = _small_tree(tmp_path, **{f"{PACKAGE}__reference_engine__protocol": "class RequestError(Exception):\n"
                                                                                 "    pass\n"})
    assert outside_the_root(source, _EXEMPT) == []


def test_a_stale_exemption_fails(tmp_path: Path) -> None:
    source = _small_tree(tmp_path)
    exempt = {**_EXEMPT, f"{PACKAGE}.gone.GoneError": "moved away",
              f"{PACKAGE}.load.gate.GateError": "once outside"}
    assert outside_the_root(source, exempt) == [
        "OUTSIDE_THE_ROOT names engine_acceptance.gone.GoneError, which is no exception class of the suite",
        "engine_acceptance/load/gate.py:4: GateError derives from EngineAcceptanceError: drop it from "
        "OUTSIDE_THE_ROOT",
    ]


def test_a_name_defined_twice_fails_naming_both_places(tmp_path: Path) -> None:
    # The suite's MediaError and the reference engine's: two classes, one name.
    source = _small_tree(tmp_path, **{
        f"{PACKAGE}__media__library": "from engine_acceptance.errors import UsageError\n\n\n"
                                      "class MediaError(UsageError):\n    pass\n",
        f"{PACKAGE}__reference_engine__protocol": "class MediaError(Exception):\n    pass\n",
    })
    assert defined_twice(source) == [
        "MediaError is defined 2 times: engine_acceptance/media/library.py:4, "
        "engine_acceptance/reference_engine/protocol.py:1"]


def test_a_name_defined_twice_in_one_module_fails(tmp_path: Path) -> None:
    source = _small_tree(tmp_path, **{f"{PACKAGE}__load__gate": "from engine_acceptance.errors import UsageError\n"
                                                                "class GateError(UsageError):\n    pass\n"
                                                                "class GateError(UsageError):\n    pass\n"})
    assert defined_twice(source) == [
        "GateError is defined 2 times: engine_acceptance/load/gate.py:2, engine_acceptance/load/gate.py:4"]


def test_a_class_missing_from_the_docs_fails_naming_it(tmp_path: Path) -> None:
    source = _small_tree(tmp_path, **{f"{PACKAGE}__load__soak": "from engine_acceptance.errors import UsageError\n"
                                                                "class SoakSettingsError(UsageError):\n    pass\n"})
    assert missing_from_docs(source, _DOCS) == [
        "engine_acceptance/load/soak.py:2: SoakSettingsError is not in docs/architecture.md's Errors tree"]


def test_a_class_the_docs_place_in_another_module_fails(tmp_path: Path) -> None:
    source = _small_tree(tmp_path)
    docs = _DOCS.replace("GateError           load/gate.py", "GateError           load/settings.py")
    assert missing_from_docs(source, docs) == [
        "engine_acceptance/load/gate.py:4: GateError is in load/gate.py, docs/architecture.md:7 says load/settings.py"]


def test_a_class_the_docs_draw_under_another_base_fails(tmp_path: Path) -> None:
    source = _small_tree(tmp_path)
    docs = _DOCS.replace("    │   └── GateError           load/gate.py\n", "").replace(
        "    └── SeveralProblems         assertions.py\n",
        "    └── SeveralProblems         assertions.py\n        └── GateError       load/gate.py\n")
    assert missing_from_docs(source, docs) == [
        "engine_acceptance/load/gate.py:4: GateError derives from UsageError, docs/architecture.md:8 draws it "
        "under SeveralProblems"]


def test_a_class_the_docs_name_but_the_code_lacks_fails(tmp_path: Path) -> None:
    source = _small_tree(tmp_path)
    docs = _DOCS.replace("    └── SeveralProblems", "    ├── HistoryError            allure_history.py\n"
                                                    "    └── SeveralProblems")
    assert missing_from_docs(source, docs) == [
        "docs/architecture.md:8: the Errors tree names HistoryError (allure_history.py), "
        "which is no exception class of the suite"]
