"""Taking code out of a model's reply, and deciding whether it may be run at all.

``extract_code`` finds the Python source in a reply (a fenced block, or the bare
reply when it parses). ``check_function_source`` is the allow-list (TEST-PLAN §4)
that runs before the sandbox is asked for anything: exactly one top-level function
with the expected name, no imports, no dunder or private attribute access, no name
that is neither bound in the code nor an allowed builtin (so no ``exec``, ``eval``,
``open``, ``__import__``, ``getattr``...), and only plain statements and
expressions. Code that fails it is a test failure with every reason, never run.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["ALLOWED_BUILTINS", "ExtractedCode", "check_function_source", "extract_code"]

# Builtins a small pure function needs; anything else (open, exec, getattr, ...) is refused.
ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "divmod", "enumerate", "filter", "float", "frozenset", "int",
    "isinstance", "len", "list", "map", "max", "min", "range", "reversed", "round", "set", "sorted", "str",
    "sum", "tuple", "zip", "True", "False", "None", "ValueError", "TypeError", "Exception",
})

# Node types a pure function may contain. Everything absent (Import, With, ClassDef,
# Global, Nonlocal, Yield, Await, async forms, Match, Try...) is refused by name.
_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.FunctionDef, ast.arguments, ast.arg, ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign,
    ast.For, ast.While, ast.If, ast.Break, ast.Continue, ast.Pass, ast.Expr, ast.Assert, ast.Raise, ast.Delete,
    ast.Name, ast.Load, ast.Store, ast.Del, ast.Constant, ast.List, ast.Tuple, ast.Set, ast.Dict,
    ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension, ast.Lambda, ast.IfExp,
    ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.Call, ast.keyword, ast.Subscript, ast.Slice,
    ast.Attribute, ast.Starred, ast.NamedExpr, ast.JoinedStr, ast.FormattedValue,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class ExtractedCode:
    source: str
    # How it was found: "fenced block", "whole reply".
    found_as: str


def extract_code(content: str, *, function: str, reasoning_markers: tuple[str, ...] = ()) -> ExtractedCode | None:
    """The Python source in ``content`` defining ``function``; None when there is none."""
    text = content
    if len(reasoning_markers) >= 2 and reasoning_markers[0] in text and reasoning_markers[1] in text:
        # A leaked reasoning block is not the answer; keep what follows it.
        text = text.rsplit(reasoning_markers[1], 1)[1]
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    defining = [body for lang, body in blocks if lang in ("", "python", "py", "python3")
                and re.search(rf"^\s*def\s+{re.escape(function)}\s*\(", body, re.MULTILINE)]
    if defining:
        return ExtractedCode(defining[0].strip("\n") + "\n", "fenced block")
    stripped = text.strip()
    if stripped and re.search(rf"^def\s+{re.escape(function)}\s*\(", stripped, re.MULTILINE):
        try:
            ast.parse(stripped)
        except SyntaxError:
            return None
        return ExtractedCode(stripped + "\n", "whole reply")
    return None


def check_function_source(source: str, *, function: str) -> list[str]:
    """Every reason ``source`` may not be run; empty when it passes the allow-list."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return [f"not valid Python: {exc.msg} (line {exc.lineno})"]
    problems: list[str] = []
    statements = [node for node in tree.body if not _is_docstring(node)]
    if len(statements) != 1 or not isinstance(statements[0], ast.FunctionDef):
        kinds = ", ".join(type(node).__name__ for node in statements) or "nothing"
        problems.append(f"the code must be exactly one top-level function, found: {kinds}")
    elif statements[0].name != function:
        problems.append(f"the function is named {statements[0].name!r}, not {function!r}")
    bound = _bound_names(tree)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = ", ".join(alias.name for alias in node.names)
            problems.append(f"line {line}: import of {names}")
        elif not isinstance(node, _ALLOWED_NODES):
            problems.append(f"line {line}: {type(node).__name__} is not allowed")
        elif isinstance(node, ast.FunctionDef) and node.decorator_list:
            problems.append(f"line {line}: decorators are not allowed")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            problems.append(f"line {line}: access to the private or dunder attribute {node.attr!r}")
        elif isinstance(node, ast.Name):
            if node.id.startswith("__"):
                problems.append(f"line {line}: use of the dunder name {node.id!r}")
            elif isinstance(node.ctx, ast.Load) and node.id not in bound and node.id not in ALLOWED_BUILTINS:
                problems.append(f"line {line}: {node.id!r} is neither defined in the code nor an allowed builtin")
    return list(dict.fromkeys(problems))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code binds anywhere: parameters, assignments, loop and comprehension targets."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
    # Shadowing a dangerous builtin must not smuggle it in; binding is checked, not the name.
    return bound - {"__builtins__", "__import__"}
