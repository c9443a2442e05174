"""The architecture rules, read from the source: a broken layer fails here, not in review.

``docs/architecture.md`` draws the package as layers (its "Layers" section, the same table
as :data:`LAYERS` here): the leaf types at the bottom, ``wire``, then profiles and media, the
libraries, the pytest side, the tools on top, and the reference engine apart, a test double
the suite may start but never lean on. These rules are what keeps that drawing true. They
are checked with :mod:`ast` over every ``.py`` file, so nothing is imported and the test
needs no engine:

* no module imports a layer above its own (``tests/`` and ``fixtures/`` sit with the pytest
  plugin); imports inside functions and under ``if TYPE_CHECKING:`` count, because a type
  import is a dependency all the same and a late import only hides one;
* every module of the package is placed in a layer, and the doc's table is the test's;
* only the modules that launch the built-in engine import
  ``engine_acceptance.reference_engine`` (:data:`REFERENCE_ENGINE_LAUNCHERS`, each with
  its reason), and the engine imports nothing of the suite;
* only ``engine_acceptance/pytest_plugin/`` imports pytest: the library stays usable and
  testable without it (imports inside functions count, they run all the same);
* the package's modules import each other without a circle, counting every import (in
  functions and under ``if TYPE_CHECKING:`` too: both only hide a circle, they do not break it);
* every third-party module the package, ``fixtures/`` or ``tests/`` imports comes from a
  distribution ``pyproject.toml`` declares, not one that happens to be installed as
  another package's dependency;
* the suite's own requests go over one HTTP stack, aiohttp (``wire/http.py``): only the
  SDK's client (:data:`OTHER_HTTP_CLIENT_USERS`) imports another HTTP client library
  (httpx, urllib's), and the reference engine is apart.

Each rule is a plain function over a source tree, and each is also run on a small tree
written here with the defect it must catch.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "engine_acceptance"
REFERENCE_ENGINE = f"{PACKAGE}.reference_engine"
PYTEST_PLUGIN = f"{PACKAGE}.pytest_plugin"
PYTEST_MODULES = ("pytest", "_pytest")
# Folders whose third-party imports must be declared: what an installed plugin ships.
SHIPPED_FOLDERS = (PACKAGE, "fixtures", "tests")

# The only modules outside the reference engine that may import it: the ones that start
# it (or check what will be asked of it before starting it). Everything else reaches the
# built-in engine the way it reaches vLLM, over HTTP, and gets its tokenizer as data.
REFERENCE_ENGINE_LAUNCHERS: Mapping[str, str] = {
    f"{PYTEST_PLUGIN}.engine_setup": "starts the built-in engine when no --engine-url is given",
    f"{PYTEST_PLUGIN}.option_catalog": "rejects an --inject name the built-in engine does not know, before starting it",
    f"{PYTEST_PLUGIN}.options": "turns --reference-latency into the built-in engine's latency model",
    f"{PACKAGE}.compare.run": "starts one built-in engine for each compared target named 'builtin'",
}


# HTTP client libraries other than aiohttp, the one stack of the suite's own requests
# (engine_acceptance/wire/http.py), and the only modules that may import them, each with its reason.
OTHER_HTTP_CLIENTS = ("httpx", "httpx2", "urllib.request", "requests", "http.client")
OTHER_HTTP_CLIENT_USERS: Mapping[str, str] = {
    f"{PACKAGE}.wire.client": "the openai SDK's client: the SDK's httpx transport is part of what the SDK checks test",
}


# The layers, bottom first: a module may import its own layer and the ones below it, never
# one above. Names end in "/" (a folder: every module under it) or ".py" (one module), relative
# to engine_acceptance/ except tests/ and fixtures/ (the checkout's, beside the pytest plugin);
# "__init__.py" is the package's own. The most specific name wins: capabilities/registry.py
# is data every layer from wire up reads, the rest of capabilities/ plans with profiles and
# media. docs/architecture.md's "Layers" section shows the same table (checked below).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("L0", ("__init__.py", "errors.py", "resources.py", "failure_categories.py", "proportions.py", "option_spec.py",
            "reporting/")),
    ("L1", ("capabilities/registry.py",)),
    ("L2", ("wire/",)),
    ("L3", ("profiles/", "media/")),
    ("L4", ("capabilities/",)),
    ("L5", ("session.py", "assertions.py", "progress.py", "provenance.py", "trials.py", "shortfalls.py",
            "allure_history.py", "report_attachments.py", "sigterm.py", "run_bundle.py", "load/", "recall/", "sandbox/",
            "tool_accuracy/")),
    ("L6", ("pytest_plugin/", "tests/", "fixtures/")),
    ("L7", ("compare/", "diff/", "cli.py")),
)
# In no layer: imports nothing of the suite and is imported only by its launchers (rules above).
APART = ("reference_engine/",)
# Folders of the checkout, outside the package, that the layer rules read too.
CHECKOUT_FOLDERS = ("tests", "fixtures")
ARCHITECTURE_DOC = ROOT / "docs" / "architecture.md"

# --- reading the source ------------------------------------------------------------------

AT_LOAD = "at load"
IN_FUNCTION = "inside a function"
TYPE_ONLY = "under if TYPE_CHECKING"

@dataclass(frozen=True)
class Import:
    """One import statement (or ``importlib.import_module("...")`` call), resolved to absolute names."""

    path: Path
    line: int
    # The module named after ``import`` or ``from``, made absolute.
    module: str
    # The names after ``from M import``; empty for ``import M``.
    names: tuple[str, ...]
    # AT_LOAD: runs when the module is loaded; IN_FUNCTION: when a function is called;
    # TYPE_ONLY: never (under ``if TYPE_CHECKING:``, for type checkers).
    when: str

    @property
    def at_load(self) -> bool:
        return self.when == AT_LOAD

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root)}:{self.line}"

    @property
    def top_level(self) -> str:
        return self.module.partition(".")[0]


def module_name(path: Path, root: Path) -> str:
    """``engine_acceptance/wire/client.py`` -> ``engine_acceptance.wire.client`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def python_files(root: Path, folder: str) -> list[Path]:
    return sorted(path for path in (root / folder).rglob("*.py") if "__pycache__" not in path.parts)


def package_modules(root: Path) -> dict[str, Path]:
    """Every module of the package by dotted name."""
    return {module_name(path, root): path for path in python_files(root, PACKAGE)}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _nodes(node: ast.AST, when: str) -> Iterator[tuple[ast.AST, str]]:
    """Every node under ``node``, with when it runs: :data:`AT_LOAD`, :data:`IN_FUNCTION` or :data:`TYPE_ONLY`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # Decorators and defaults run with the enclosing code; the body only when called.
            for part in (*getattr(child, "decorator_list", ()), child.args):
                yield part, when
                yield from _nodes(part, when)
            inner = when if when == TYPE_ONLY else IN_FUNCTION
            for statement in ([child.body] if isinstance(child, ast.Lambda) else child.body):
                yield statement, inner
                yield from _nodes(statement, inner)
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for statement in child.body:
                yield statement, TYPE_ONLY
                yield from _nodes(statement, TYPE_ONLY)
            for statement in child.orelse:
                yield statement, when
                yield from _nodes(statement, when)
        else:
            yield child, when
            yield from _nodes(child, when)


def _relative_base(module: str, is_package: bool, level: int) -> str:
    package = module if is_package else module.rpartition(".")[0]
    for _ in range(level - 1):
        package = package.rpartition(".")[0]
    return package


def imports_in(path: Path, root: Path) -> list[Import]:
    """Every import in one file, wherever it sits, with absolute module names."""
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node, when in _nodes(tree, AT_LOAD):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, alias.name, (), when) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = _relative_base(module, is_package, node.level)
                target = f"{base}.{target}" if target else base
            found.append(Import(path, node.lineno, target, tuple(alias.name for alias in node.names), when))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__")))):
            found.append(Import(path, node.lineno, node.args[0].value, (), when))
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _loads_reference_engine(found: Import) -> bool:
    """``import engine_acceptance.reference_engine...`` or ``from engine_acceptance import reference_engine``."""
    return _within(found.module, REFERENCE_ENGINE) or (found.module == PACKAGE and "reference_engine" in found.names)


# --- the rules ---------------------------------------------------------------------------

def reference_engine_imports(root: Path, launchers: Iterable[str]) -> list[str]:
    """Imports of the reference engine from outside it, other than by the launchers."""
    allowed = set(launchers)
    problems = []
    for name, path in package_modules(root).items():
        if _within(name, REFERENCE_ENGINE) or name in allowed:
            continue
        for found in imports_in(path, root):
            if _loads_reference_engine(found):
                problems.append(f"{found.where(root)} imports {found.module}: {name} is not a launcher of the "
                                f"built-in engine, so it must reach it over HTTP and take its tokenizer as data")
    return problems


def stale_launchers(root: Path, launchers: Iterable[str]) -> list[str]:
    """Allow-list entries that name no module, or a module that no longer imports the engine."""
    modules = package_modules(root)
    problems = []
    for name in launchers:
        if name not in modules:
            problems.append(f"{name} is allowed to import the reference engine but no such module exists")
        elif not any(_loads_reference_engine(found) for found in imports_in(modules[name], root)):
            problems.append(f"{name} is allowed to import the reference engine but no longer does: drop it "
                            f"from the allow-list")
    return problems


def reference_engine_reaches_out(root: Path) -> list[str]:
    """Imports of the suite from inside the reference engine (it must stand alone, like a real engine)."""
    problems = []
    for name, path in package_modules(root).items():
        if not _within(name, REFERENCE_ENGINE):
            continue
        for found in imports_in(path, root):
            if _within(found.module, PACKAGE) and not _within(found.module, REFERENCE_ENGINE):
                problems.append(f"{found.where(root)} imports {found.module}: the reference engine must not "
                                f"depend on the suite it is a test double for")
    return problems


def pytest_imports(root: Path) -> list[str]:
    """Imports of pytest (or its internals) from outside the pytest plugin subpackage."""
    problems = []
    for name, path in package_modules(root).items():
        if _within(name, PYTEST_PLUGIN):
            continue
        for found in imports_in(path, root):
            if found.top_level in PYTEST_MODULES:
                how = "" if found.at_load else f" ({found.when}, which counts all the same)"
                problems.append(f"{found.where(root)} imports {found.module}{how}: only {PYTEST_PLUGIN} may "
                                f"import pytest, so the library stays usable without it")
    return problems


def _other_http_client(found: Import) -> str | None:
    """The HTTP client library one import loads (``from urllib import request`` too), or None."""
    for client in OTHER_HTTP_CLIENTS:
        if _within(found.module, client):
            return client
        parent, _, leaf = client.rpartition(".")
        if parent and found.module == parent and leaf in found.names:
            return client
    return None


def other_http_client_imports(root: Path, allowed: Mapping[str, str]) -> list[str]:
    """Imports of an HTTP client other than aiohttp by the package, ``tests/`` or ``fixtures/``, but the
    allowed modules and the reference engine; and allowed modules that no longer import one."""
    problems = []
    users = set()
    for name, path in layered_modules(root).items():
        if _within(name, REFERENCE_ENGINE):
            continue
        for found in imports_in(path, root):
            client = _other_http_client(found)
            if client is None:
                continue
            users.add(name)
            if name not in allowed:
                problems.append(f"{found.where(root)} imports {found.module}: the suite's own requests go through "
                                f"aiohttp ({PACKAGE}/wire/http.py); {client} is only for the SDK's client")
    problems += [f"{name} is allowed to import an HTTP client other than aiohttp but no longer does: drop it "
                 f"from the allow-list" for name in allowed if name not in users]
    return problems


def imported_modules(found: Import, modules: Mapping[str, Path]) -> set[str]:
    """The package modules one import names: ``from pkg import sub`` the submodule, ``from pkg import name`` pkg."""
    targets = {f"{found.module}.{item}" if f"{found.module}.{item}" in modules else found.module
               for item in found.names} or {found.module}
    return targets & modules.keys()


def import_graph(root: Path) -> dict[str, dict[str, Import]]:
    """Module -> the package modules it imports anywhere (and the first import that does it).

    Every import counts: at load, inside a function, under ``if TYPE_CHECKING:``. A late or
    type-only import keeps a circle from failing at load; the modules still depend on each
    other, so the circle is reported all the same.
    """
    modules = package_modules(root)
    graph: dict[str, dict[str, Import]] = {name: {} for name in modules}
    for name, path in modules.items():
        for found in imports_in(path, root):
            if not _within(found.module, PACKAGE):
                continue
            for target in imported_modules(found, modules):
                if target != name:
                    graph[name].setdefault(target, found)
    return graph


def _strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (no recursion limit on a deep package)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def _cycle_through(start: str, members: set[str], graph: Mapping[str, Iterable[str]]) -> list[str]:
    """A shortest path from ``start`` back to itself inside one strongly connected component."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node]):
                if target not in members:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if target not in previous:
                    previous[target] = node
                    following.append(target)
        frontier = following
    raise AssertionError(f"{start} is in a cycle yet no path leads back to it")


def import_cycles(root: Path) -> list[str]:
    """Each import cycle as a readable chain: ``a (a.py:3 imports b) -> b (b.py:9 imports a) -> back to a``."""
    graph = import_graph(root)
    chains = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        cycle = _cycle_through(component[0], set(component), graph)
        steps = [f"{module} ({_where_and_when(graph[module][target], root)} imports {target})"
                 for module, target in zip(cycle, cycle[1:])]
        others = f"; {len(component)} modules are tangled in all: {', '.join(component)}" \
            if len(component) > len(cycle) - 1 else ""
        chains.append(" -> ".join(steps) + f" -> back to {cycle[0]}{others}")
    return chains


def _where_and_when(found: Import, root: Path) -> str:
    return found.where(root) + ("" if found.at_load else f", {found.when}")


# --- layers ---

def _layer_prefix(name: str) -> str:
    """A table name as a dotted prefix: ``wire/`` -> ``engine_acceptance.wire``, ``tests/`` -> ``tests``."""
    if name == "__init__.py":
        return PACKAGE
    dotted = name.removesuffix("/").removesuffix(".py").replace("/", ".")
    return dotted if dotted.partition(".")[0] in CHECKOUT_FOLDERS else f"{PACKAGE}.{dotted}"


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> tuple[int, str] | None:
    """(position, layer name) of the most specific table entry that covers ``module``; None if none does."""
    best: tuple[int, int, str] | None = None
    for position, (layer, names) in enumerate(layers):
        for name in names:
            prefix = _layer_prefix(name)
            covers = module == prefix if name == "__init__.py" else _within(module, prefix)
            if covers and (best is None or len(prefix) > best[0]):
                best = (len(prefix), position, layer)
    return None if best is None else (best[1], best[2])


def _is_apart(module: str) -> bool:
    return any(_within(module, _layer_prefix(name)) for name in APART)


def layered_modules(root: Path) -> dict[str, Path]:
    """The package's modules and the checkout's tests/ and fixtures/ modules, by dotted name."""
    modules = dict(package_modules(root))
    for folder in CHECKOUT_FOLDERS:
        if (root / folder).is_dir():
            modules.update({module_name(path, root): path for path in python_files(root, folder)})
    return modules


def unplaced_modules(root: Path, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> list[str]:
    """Modules of the package that no layer covers (and that are not apart)."""
    return [f"{name} ({path.relative_to(root)}) is in no layer: add it to LAYERS in selftest/test_layout.py "
            f"and to the table of docs/architecture.md, at the layer its imports put it"
            for name, path in package_modules(root).items()
            if not _is_apart(name) and layer_of(name, layers) is None]


def upward_imports(root: Path, layers: Sequence[tuple[str, Sequence[str]]] = LAYERS) -> list[str]:
    """Imports of a higher layer, wherever they sit (at load, in a function, under TYPE_CHECKING)."""
    package = package_modules(root)
    problems = []
    for name, path in layered_modules(root).items():
        placed = layer_of(name, layers)
        if placed is None:
            continue
        for found in imports_in(path, root):
            if not _within(found.module, PACKAGE):
                continue
            for target in sorted(imported_modules(found, package)):
                reached = layer_of(target, layers)
                if reached is None or reached[0] <= placed[0]:
                    continue
                how = "" if found.at_load else f" ({found.when}, which counts all the same)"
                problems.append(f"{found.where(root)} imports {target} ({reached[1]}){how}: {name} is in "
                                f"{placed[1]} and may import only its own layer and the ones below")
    return problems


_DOC_LAYER_LINE = re.compile(r"^ {4}(L\d|apart)\s+(\S.*)$")


def documented_layers(doc: Path) -> tuple[list[tuple[str, tuple[str, ...]]], tuple[str, ...]]:
    """The table of the doc's "Layers" section: (layer, names) from the top line down, and what is apart.

    In the section's indented block, each line ``    L<n>  name name ...`` is one layer; a name
    ends in ``/`` or ``.py``, and the first word that does not ends the names (a comment).
    """
    text = doc.read_text(encoding="utf-8")
    section = text.partition("\n## Layers\n")[2].partition("\n## ")[0]
    layers: list[tuple[str, tuple[str, ...]]] = []
    apart: tuple[str, ...] = ()
    for line in section.splitlines():
        match = _DOC_LAYER_LINE.match(line)
        if not match:
            continue
        names = []
        for word in match.group(2).split():
            if not word.endswith(("/", ".py")):
                break
            names.append(word)
        if match.group(1) == "apart":
            apart = tuple(names)
        else:
            layers.append((match.group(1), tuple(names)))
    return layers, apart


def _normalise(distribution: str) -> str:
    return re.sub(r"[-_.]+", "-", distribution).lower()


def declared_distributions(pyproject: Path) -> set[str]:
    """The normalised names in ``[project] dependencies``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return {_normalise(Requirement(line).name) for line in project.get("dependencies", [])}


def _required_by(distribution: str, declared: Iterable[str]) -> list[str]:
    """Declared distributions that pull ``distribution`` in: why it is installed at all."""
    wanted = _normalise(distribution)
    pulling = []
    for name in sorted(declared):
        try:
            requirements = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        if any(_normalise(Requirement(line).name) == wanted and "extra ==" not in line for line in requirements):
            pulling.append(name)
    return pulling


def undeclared_imports(root: Path, folders: Iterable[str], pyproject: Path,
                       providers: Mapping[str, list[str]] | None = None) -> list[str]:
    """Third-party modules imported in ``folders`` that no declared distribution provides."""
    providers = importlib.metadata.packages_distributions() if providers is None else providers
    declared = declared_distributions(pyproject)
    local = {path.stem if path.is_file() else path.name for path in root.iterdir()
             if path.suffix == ".py" or (path.is_dir() and any(path.glob("*.py")))}
    where: dict[str, list[str]] = {}
    for folder in folders:
        for path in python_files(root, folder):
            for found in imports_in(path, root):
                top = found.top_level
                if top and top not in sys.stdlib_module_names and top not in local:
                    where.setdefault(top, []).append(found.where(root))
    problems = []
    for module, places in sorted(where.items()):
        seen = ", ".join(places[:3]) + (f" and {len(places) - 3} more" if len(places) > 3 else "")
        distributions = sorted(set(providers.get(module, [])))
        if not distributions:
            problems.append(f"{module} (imported at {seen}) is provided by no installed distribution, so "
                            f"pyproject.toml cannot be declaring it")
        elif not {_normalise(d) for d in distributions} & declared:
            pulled = sorted({name for d in distributions for name in _required_by(d, declared)})
            verb = "requires" if len(pulled) == 1 else "require"
            why = f", installed only because {' and '.join(pulled)} {verb} it" if pulled else ""
            problems.append(f"{module} (imported at {seen}) comes from {' or '.join(distributions)}, which "
                            f"pyproject.toml [project] dependencies does not declare{why}")
    return problems


def _report(problems: list[str]) -> str:
    return f"{len(problems)} violation(s):\n" + "\n".join(f"  {problem}" for problem in problems)


# --- the rules, on this repository -------------------------------------------------------

def test_only_the_launchers_import_the_reference_engine() -> None:
    problems = reference_engine_imports(ROOT, REFERENCE_ENGINE_LAUNCHERS)
    assert not problems, _report(problems)


def test_every_allowed_launcher_exists_and_still_imports_the_reference_engine() -> None:
    problems = stale_launchers(ROOT, REFERENCE_ENGINE_LAUNCHERS)
    assert not problems, _report(problems)


def test_the_reference_engine_imports_nothing_of_the_suite() -> None:
    problems = reference_engine_reaches_out(ROOT)
    assert not problems, _report(problems)


def test_only_the_pytest_plugin_imports_pytest() -> None:
    problems = pytest_imports(ROOT)
    assert not problems, _report(problems)


def test_package_modules_import_each_other_without_cycles() -> None:
    cycles = import_cycles(ROOT)
    assert not cycles, _report(cycles)


def test_no_module_imports_a_layer_above_its_own() -> None:
    problems = upward_imports(ROOT, LAYERS)
    assert not problems, _report(problems)


def test_every_module_of_the_package_is_in_a_layer() -> None:
    problems = unplaced_modules(ROOT, LAYERS)
    assert not problems, _report(problems)


def test_the_architecture_doc_shows_the_layers_the_test_enforces() -> None:
    layers, apart = documented_layers(ARCHITECTURE_DOC)
    # The doc draws the top layer first, as one reads a stack.
    assert list(reversed(layers)) == [(layer, tuple(names)) for layer, names in LAYERS], (
        f"docs/architecture.md's Layers table differs from LAYERS in selftest/test_layout.py: {layers}")
    assert apart == APART, f"docs/architecture.md sets apart {apart}, the test {APART}"


def test_the_suites_own_requests_use_one_http_stack() -> None:
    problems = other_http_client_imports(ROOT, OTHER_HTTP_CLIENT_USERS)
    assert not problems, _report(problems)


def test_every_third_party_import_comes_from_a_declared_distribution() -> None:
    problems = undeclared_imports(ROOT, SHIPPED_FOLDERS, ROOT / "pyproject.toml")
    assert not problems, _report(problems)


def test_no_self_test_module_shares_a_name_with_a_check_module() -> None:
    # The end-to-end self-tests run the suite in their own Python (selftest/suite_runner.py),
    # where pytest imports each tests/ module by its basename: a self-test module of the same
    # name, already imported, makes that check module fail to collect ("import file mismatch").
    checks = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    clashes = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "selftest").rglob("test_*.py")
                     if path.name in checks)
    assert not clashes, f"self-test modules named like a check module of tests/: {clashes}"


def test_the_scan_sees_the_whole_package() -> None:
    """A scanner that read nothing would pass every rule: it must see the modules the rules are about."""
    modules = package_modules(ROOT)
    assert {f"{REFERENCE_ENGINE}.launcher", f"{PYTEST_PLUGIN}.plugin", f"{PACKAGE}.wire.client"} <= modules.keys()
    assert len(import_graph(ROOT)[f"{PACKAGE}.wire.token_count"]) >= 2, "token_count imports wire.http and errors"


# --- each rule catches its defect ----------------------------------------------------------

def _tree(root: Path, files: Mapping[str, str], dependencies: Iterable[str] = ()) -> Path:
    for relative, text in {f"{PACKAGE}/__init__.py": "", **files}.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    listed = ", ".join(f'"{name}"' for name in dependencies)
    (root / "pyproject.toml").write_text(f'[project]\nname = "x"\ndependencies = [{listed}]\n', encoding="utf-8")
    return root


def test_a_function_level_import_of_the_reference_engine_is_caught(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/reference_engine/__init__.py": "",
        f"{PACKAGE}/reference_engine/tokenizer.py": "",
        f"{PACKAGE}/recall/__init__.py": "",
        f"{PACKAGE}/recall/haystack.py":
            "def main():\n    from engine_acceptance.reference_engine.tokenizer import get_tokenizer\n",
        f"{PACKAGE}/launch.py": "from engine_acceptance.reference_engine import tokenizer\n",
        f"{PACKAGE}/sneaky.py": "from engine_acceptance import reference_engine\n",
        f"{PACKAGE}/plain.py": "import json\n",
    })
    problems = reference_engine_imports(root, [f"{PACKAGE}.launch"])
    assert [problem.split(" imports ")[0] for problem in problems] == [
        f"{PACKAGE}/recall/haystack.py:2", f"{PACKAGE}/sneaky.py:1"], problems
    assert stale_launchers(root, [f"{PACKAGE}.launch"]) == []
    stale = stale_launchers(root, [f"{PACKAGE}.plain", f"{PACKAGE}.sneaky", f"{PACKAGE}.gone"])
    assert [problem.split(" is ")[0] for problem in stale] == [f"{PACKAGE}.plain", f"{PACKAGE}.gone"], stale


def test_the_reference_engine_importing_the_suite_is_caught(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/wire/__init__.py": "",
        f"{PACKAGE}/wire/client.py": "",
        f"{PACKAGE}/reference_engine/__init__.py": "from .server import x\n",
        f"{PACKAGE}/reference_engine/server.py": "from ..wire import client\n",
    })
    assert [p.split(" imports ")[0] for p in reference_engine_reaches_out(root)] == [
        f"{PACKAGE}/reference_engine/server.py:1"]


def test_pytest_outside_the_plugin_is_caught_even_inside_a_function(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/pytest_plugin/__init__.py": "",
        f"{PACKAGE}/pytest_plugin/plugin.py": "import pytest\n",
        f"{PACKAGE}/assertions.py": "def fail():\n    import pytest\n    pytest.fail('x')\n",
        f"{PACKAGE}/settings.py": "from _pytest.config import Config\n",
        f"{PACKAGE}/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pytest import Item\n",
    })
    problems = pytest_imports(root)
    assert [problem.split(" imports ")[0] for problem in problems] == [
        f"{PACKAGE}/assertions.py:2", f"{PACKAGE}/settings.py:1", f"{PACKAGE}/typed.py:3"], problems
    assert "inside a function" in problems[0] and "TYPE_CHECKING" in problems[2]


def test_an_http_client_beside_aiohttp_is_caught_outside_the_sdk_client(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/wire/__init__.py": "",
        f"{PACKAGE}/wire/client.py": "import aiohttp\nimport httpx2 as httpx\n",
        f"{PACKAGE}/wire/http.py": "import aiohttp\nimport urllib.parse\n",
        f"{PACKAGE}/wire/readiness.py": "import urllib.error\nimport urllib.request\n",
        f"{PACKAGE}/wire/token_count.py": "def post():\n    import httpx\n",
        f"{PACKAGE}/wire/probe.py": "from urllib import parse, request\n",
        f"{PACKAGE}/reference_engine/__init__.py": "",
        f"{PACKAGE}/reference_engine/vision.py": "import urllib.request\n",
        "fixtures/__init__.py": "",
        "fixtures/engine.py": "from http.client import HTTPConnection\n",
    })
    problems = other_http_client_imports(root, {f"{PACKAGE}.wire.client": "the SDK"})
    assert [problem.split(": ")[0] for problem in problems] == [
        f"{PACKAGE}/wire/probe.py:1 imports urllib",
        f"{PACKAGE}/wire/readiness.py:2 imports urllib.request",
        f"{PACKAGE}/wire/token_count.py:2 imports httpx",
        "fixtures/engine.py:1 imports http.client",
    ], problems
    # An allowed module that dropped its import is named, so that the allowance goes too.
    assert other_http_client_imports(root, {f"{PACKAGE}.wire.http": "x", f"{PACKAGE}.wire.client": "the SDK"})[-1] \
        .startswith(f"{PACKAGE}.wire.http is allowed to import an HTTP client other than aiohttp but no longer does")


def test_an_import_cycle_is_reported_as_a_chain(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/wire/__init__.py": "",
        f"{PACKAGE}/wire/client.py": "from engine_acceptance.wire.health import lost\n",
        f"{PACKAGE}/wire/health.py": "from . import readiness\n",
        f"{PACKAGE}/wire/readiness.py": "from engine_acceptance.wire.client import EngineTarget\n",
        f"{PACKAGE}/c.py": "import engine_acceptance.d\n",
        f"{PACKAGE}/d.py": "import json\n",
    })
    assert import_cycles(root) == [
        f"{PACKAGE}.wire.client ({PACKAGE}/wire/client.py:1 imports {PACKAGE}.wire.health) -> "
        f"{PACKAGE}.wire.health ({PACKAGE}/wire/health.py:1 imports {PACKAGE}.wire.readiness) -> "
        f"{PACKAGE}.wire.readiness ({PACKAGE}/wire/readiness.py:1 imports {PACKAGE}.wire.client) -> "
        f"back to {PACKAGE}.wire.client"]


def test_a_cycle_closed_by_a_late_or_a_type_only_import_is_a_cycle_all_the_same(tmp_path: Path) -> None:
    # The two ways this package used to hide a circle: the second import under TYPE_CHECKING
    # (wire/client.py <-> wire/health.py), or inside a function (the reference engine's launcher).
    root = _tree(tmp_path, {
        f"{PACKAGE}/a.py": "import engine_acceptance.b\n",
        f"{PACKAGE}/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from engine_acceptance.a import x\n",
        f"{PACKAGE}/launcher.py": "def start():\n    from engine_acceptance.command import main\n",
        f"{PACKAGE}/command.py": "from engine_acceptance.launcher import PREFIX\n",
    })
    assert import_cycles(root) == [
        f"{PACKAGE}.a ({PACKAGE}/a.py:1 imports {PACKAGE}.b) -> {PACKAGE}.b ({PACKAGE}/b.py:3, under if "
        f"TYPE_CHECKING imports {PACKAGE}.a) -> back to {PACKAGE}.a",
        f"{PACKAGE}.command ({PACKAGE}/command.py:1 imports {PACKAGE}.launcher) -> {PACKAGE}.launcher "
        f"({PACKAGE}/launcher.py:2, inside a function imports {PACKAGE}.command) -> back to {PACKAGE}.command"]


_SMALL_LAYERS = (("L0", ("__init__.py", "errors.py")), ("L1", ("wire/",)), ("L2", ("profiles/", "media/")),
                 ("L3", ("pytest_plugin/", "tests/", "fixtures/")))


def test_an_upward_import_is_caught_wherever_it_sits(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/errors.py": "",
        f"{PACKAGE}/wire/__init__.py": "",
        f"{PACKAGE}/wire/client.py": "from engine_acceptance.errors import X\nfrom engine_acceptance.wire import sse\n",
        f"{PACKAGE}/wire/sse.py": "",
        f"{PACKAGE}/wire/readiness.py": "from engine_acceptance.profiles.profile import EngineProfile\n",
        f"{PACKAGE}/wire/health.py": "def f():\n    from engine_acceptance.media import library\n",
        f"{PACKAGE}/wire/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from engine_acceptance.profiles import profile\n",
        f"{PACKAGE}/profiles/__init__.py": "",
        f"{PACKAGE}/profiles/profile.py": "from engine_acceptance.media import library\nimport engine_acceptance.wire.client\n",
        f"{PACKAGE}/media/__init__.py": "",
        f"{PACKAGE}/media/library.py": "from engine_acceptance.pytest_plugin.keys import session_key\n",
        f"{PACKAGE}/pytest_plugin/__init__.py": "",
        f"{PACKAGE}/pytest_plugin/keys.py": "",
        "fixtures/__init__.py": "",
        "fixtures/engine.py": "from engine_acceptance.pytest_plugin.keys import session_key\n",
        "tests/test_x.py": "from engine_acceptance.pytest_plugin import keys\nfrom engine_acceptance.wire import client\n",
    })
    problems = upward_imports(root, _SMALL_LAYERS)
    assert [problem.split(": ")[0] for problem in problems] == [
        f"{PACKAGE}/media/library.py:1 imports {PACKAGE}.pytest_plugin.keys (L3)",
        f"{PACKAGE}/wire/health.py:2 imports {PACKAGE}.media.library (L2) (inside a function, which counts all the same)",
        f"{PACKAGE}/wire/readiness.py:1 imports {PACKAGE}.profiles.profile (L2)",
        f"{PACKAGE}/wire/typed.py:3 imports {PACKAGE}.profiles.profile (L2) (under if TYPE_CHECKING, which counts all "
        f"the same)",
    ], problems
    assert f"{PACKAGE}.wire.readiness is in L1" in problems[2]
    # A module of no layer is named, so that it gets one.
    assert unplaced_modules(root, _SMALL_LAYERS) == []
    (root / PACKAGE / "tools.py").write_text("", encoding="utf-8")
    assert [problem.split(" (")[0] for problem in unplaced_modules(root, _SMALL_LAYERS)] == [f"{PACKAGE}.tools"]


def test_the_most_specific_layer_entry_wins() -> None:
    assert layer_of(f"{PACKAGE}.capabilities.registry") == (1, "L1")
    assert layer_of(f"{PACKAGE}.capabilities.probes.media") == (4, "L4")
    assert layer_of(PACKAGE) == (0, "L0")
    assert layer_of(f"{PACKAGE}.errors") == (0, "L0")
    assert layer_of("tests.test_text") == layer_of("fixtures.engine") == layer_of(f"{PYTEST_PLUGIN}.plugin") == (6, "L6")
    assert layer_of(f"{REFERENCE_ENGINE}.server") is None


def test_the_doc_table_is_read_top_down_names_first(tmp_path: Path) -> None:
    doc = tmp_path / "architecture.md"
    doc.write_text("# A\n\n## Layers\n\nText.\n\n    L1  compare/  cli.py      the tools\n"
                   "    L0  errors.py  __init__.py\n\n    apart  reference_engine/   the engine\n\n"
                   "## Next\n\n    L9  ignored/\n", encoding="utf-8")
    assert documented_layers(doc) == ([("L1", ("compare/", "cli.py")), ("L0", ("errors.py", "__init__.py"))],
                                      ("reference_engine/",))


def test_a_package_reexporting_its_submodules_is_not_a_cycle(tmp_path: Path) -> None:
    """``pkg/__init__`` importing ``.sub`` while ``sub`` imports ``.other`` is how Python packages work."""
    root = _tree(tmp_path, {
        f"{PACKAGE}/reference_engine/__init__.py": "from .launcher import start\nfrom .config import X\n",
        f"{PACKAGE}/reference_engine/launcher.py": "from .config import X\n",
        f"{PACKAGE}/reference_engine/config.py": "X = 1\n",
    })
    assert import_cycles(root) == []


def test_an_undeclared_distribution_is_caught_and_says_who_pulled_it_in(tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        f"{PACKAGE}/client.py": "import json\nimport openai\nimport httpx2 as httpx\nfrom . import x\n",
        "fixtures/__init__.py": "",
        "fixtures/engine.py": "import yaml\nfrom engine_acceptance import client\nimport fixtures\n",
        "tests/test_x.py": "def test():\n    import no_such_module_anywhere\n",
    }, dependencies=["openai>=3", "PyYAML>=6"])
    providers = {"openai": ["openai"], "httpx2": ["httpx2"], "yaml": ["PyYAML"]}
    problems = undeclared_imports(root, SHIPPED_FOLDERS, root / "pyproject.toml", providers)
    assert [problem.split(" (")[0] for problem in problems] == ["httpx2", "no_such_module_anywhere"], problems
    assert f"{PACKAGE}/client.py:3" in problems[0] and "does not declare" in problems[0]
    assert "tests/test_x.py:2" in problems[1] and "no installed distribution" in problems[1]


@pytest.mark.parametrize("requirement, name", [
    ("PyYAML>=6", "pyyaml"), ("allure_pytest>=2.13,<3", "allure-pytest"), ("zope.interface", "zope-interface"),
], ids=["capitals", "underscore", "dot"])
def test_declared_names_are_compared_normalised(tmp_path: Path, requirement: str, name: str) -> None:
    pyproject = _tree(tmp_path, {}, dependencies=[requirement]) / "pyproject.toml"
    assert declared_distributions(pyproject) == {name}


def test_every_error_class_of_the_suite_belongs_to_the_one_error_tree() -> None:
    # The plugin maps UsageError to exit 4 and EngineUnavailable to exit 6 in one place
    # (pytest_plugin/plugin.py): an error class outside the tree would escape that mapping.
    import importlib
    import inspect
    import pkgutil

    import engine_acceptance
    from engine_acceptance.errors import EngineAcceptanceError

    outside = []
    for info in pkgutil.walk_packages(engine_acceptance.__path__, f"{PACKAGE}."):
        if info.name.startswith(f"{PACKAGE}.reference_engine") or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, cls in inspect.getmembers(module, inspect.isclass):
            # A warning (ObservationWarning) reports without failing, and a check's failure (an
            # AssertionError: assertions.SeveralProblems) is the check's verdict: not errors of the tree.
            if (cls.__module__ == info.name and issubclass(cls, Exception)
                    and not issubclass(cls, (Warning, AssertionError))
                    and not issubclass(cls, EngineAcceptanceError)):
                outside.append(f"{info.name}.{name}")
    assert not outside, f"error classes outside engine_acceptance.errors.EngineAcceptanceError: {outside}"
