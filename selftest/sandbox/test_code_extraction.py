"""Self-tests of code extraction and the allow-list that runs before the sandbox."""

from __future__ import annotations

import pytest

from engine_acceptance.sandbox.code_extraction import check_function_source, extract_code

GOOD = "def unique_sorted(values):\n    return sorted(set(values))\n"


@pytest.mark.parametrize(
    ("content", "found_as"),
    [
        (f"```python\n{GOOD}```", "fenced block"),
        (f"Here you go:\n\n```py\n{GOOD}```\nDone.", "fenced block"),
        (f"```\n{GOOD}```", "fenced block"),
        (GOOD, "whole reply"),
        (f"<think>\nuse a set\n</think>\n\n```python\n{GOOD}```", "fenced block"),
    ],
    ids=["python-fence", "py-fence-with-prose", "bare-fence", "whole-reply", "after-leaked-reasoning"],
)
def test_code_is_extracted(content: str, found_as: str) -> None:
    code = extract_code(content, function="unique_sorted", reasoning_markers=("<think>", "</think>"))
    assert code is not None and code.found_as == found_as
    assert code.source == GOOD


def test_the_block_defining_the_function_is_chosen() -> None:
    content = f"```python\nprint(unique_sorted([1]))\n```\n```python\n{GOOD}```"
    assert extract_code(content, function="unique_sorted").source == GOOD


@pytest.mark.parametrize("content", ["I cannot write code.", "```python\ndef other(x):\n    return x\n```",
                                     "def unique_sorted(values) return values"],
                         ids=["no-code", "other-function", "not-python"])
def test_no_code_is_none(content: str) -> None:
    assert extract_code(content, function="unique_sorted") is None


@pytest.mark.parametrize(
    "source",
    [
        GOOD,
        "def unique_sorted(values):\n    \"\"\"Sorted unique values.\"\"\"\n    seen = set()\n    out = []\n"
        "    for v in values:\n        if v not in seen:\n            seen.add(v)\n            out.append(v)\n"
        "    out.sort()\n    return out\n",
        "def unique_sorted(values):\n    return sorted({v for v in values}, key=lambda v: v)\n",
    ],
    ids=["set-sorted", "loop-and-sort", "comprehension-and-lambda"],
)
def test_plain_functions_pass_the_allow_list(source: str) -> None:
    assert check_function_source(source, function="unique_sorted") == []


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("import os\ndef unique_sorted(values):\n    return values\n", "import of os"),
        ("def unique_sorted(values):\n    from os import environ\n    return values\n", "import of environ"),
        ("def unique_sorted(values):\n    return open('x').read()\n", "'open' is neither defined"),
        ("def unique_sorted(values):\n    return eval('values')\n", "'eval' is neither defined"),
        ("def unique_sorted(values):\n    return exec('1')\n", "'exec' is neither defined"),
        ("def unique_sorted(values):\n    return __import__('os')\n", "dunder name '__import__'"),
        ("def unique_sorted(values):\n    return values.__class__\n", "attribute '__class__'"),
        ("def unique_sorted(values):\n    return getattr(values, 'copy')()\n", "'getattr' is neither defined"),
        ("def helper(v):\n    return v\ndef unique_sorted(values):\n    return values\n", "exactly one top-level"),
        ("def sort_unique(values):\n    return values\n", "named 'sort_unique'"),
        ("class unique_sorted:\n    pass\n", "ClassDef is not allowed"),
        ("def unique_sorted(values):\n    with values:\n        pass\n", "With is not allowed"),
        ("def unique_sorted(values):\n    global x\n    return values\n", "Global is not allowed"),
        ("@cache\ndef unique_sorted(values):\n    return values\n", "decorators"),
        ("def unique_sorted(values):\n    yield values\n", "Yield is not allowed"),
        ("def unique_sorted(values) return\n", "not valid Python"),
    ],
    ids=["import", "import-from", "open", "eval", "exec", "dunder-import", "dunder-attribute", "getattr",
         "two-functions", "wrong-name", "class", "with", "global", "decorator", "generator", "syntax-error"],
)
def test_the_allow_list_refuses_with_the_reason(source: str, reason: str) -> None:
    problems = check_function_source(source, function="unique_sorted")
    assert any(reason in problem for problem in problems), problems
