"""Writes docs/options.md from the options the plugin registers, so the reference cannot drift.

    python scripts/options_reference.py           # rewrite docs/options.md
    python scripts/options_reference.py --check   # exit 1, naming each option that differs

The plugin's ``pytest_addoption`` hook (the one the ``pytest11`` entry point loads) is called
with a recording stand-in for pytest's parser: it keeps each option's names and keyword
arguments in the order they are registered, without pytest's private parser classes. The
page is rendered from those records alone: the help text is the same text ``pytest --help``
shows. ``selftest/test_docs.py`` fails when the committed page is not what this writes.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "options.md"
REGENERATE = "python scripts/options_reference.py"


@dataclass
class RecordedOption:
    """One ``addoption`` call: its flags and argparse keywords."""

    names: tuple[str, ...]
    attrs: dict[str, Any]


@dataclass
class RecordedGroup:
    """One ``parser.getgroup`` group, in the order its options were added."""

    name: str
    description: str
    options: list[RecordedOption] = field(default_factory=list)

    def addoption(self, *names: str, **attrs: Any) -> None:
        self.options.append(RecordedOption(names, attrs))

    # pytest's OptionGroup has both spellings; the second skips its lower-case-name check.
    _addoption = addoption


@dataclass
class RecordedIni:
    """One ``parser.addini`` call."""

    name: str
    help: str
    type: Any = None
    default: Any = None


class OptionRecorder:
    """Stands in for ``pytest.Parser``: the three calls a plugin's ``pytest_addoption`` makes."""

    def __init__(self) -> None:
        self.groups: dict[str, RecordedGroup] = {}
        self.ini: list[RecordedIni] = []

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> RecordedGroup:
        if name not in self.groups:
            self.groups[name] = RecordedGroup(name, description or name)
        elif description and self.groups[name].description == name:
            self.groups[name].description = description
        return self.groups[name]

    def addoption(self, *names: str, **attrs: Any) -> None:
        # Options added to the parser itself land in pytest's "custom options" group.
        self.getgroup("custom options", "Custom options").addoption(*names, **attrs)

    def addini(self, name: str, help: str, type: Any = None, default: Any = None, **_: Any) -> None:
        self.ini.append(RecordedIni(name, help, type, default))


def record_plugin_options() -> OptionRecorder:
    """Every option and ini key the plugin's ``pytest_addoption`` registers."""
    from engine_acceptance.pytest_plugin import plugin

    recorder = OptionRecorder()
    plugin.pytest_addoption(recorder)
    return recorder


# --- rendering ------------------------------------------------------------------------------

def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def _help_text(option: RecordedOption) -> str:
    # argparse formats help with %-style fields, so the source writes a literal % as %%.
    help_text = option.attrs.get("help", "")
    fields = {"default": option.attrs.get("default"), "metavar": option.attrs.get("metavar"),
              "dest": _dest(option), "prog": "pytest"}
    try:
        return help_text % fields
    except (KeyError, TypeError, ValueError):
        return help_text.replace("%%", "%")


def _dest(option: RecordedOption) -> str:
    long_names = [name for name in option.names if name.startswith("--")]
    return option.attrs.get("dest") or (long_names or option.names)[0].lstrip("-").replace("-", "_")


def _usage(option: RecordedOption) -> str:
    """The option as ``pytest --help`` writes it: its flags, then what it takes."""
    attrs = option.attrs
    flags = ", ".join(option.names)
    if attrs.get("action") in ("store_true", "store_false", "count", "help", "version"):
        return flags
    if attrs.get("metavar"):
        takes = attrs["metavar"]
    elif attrs.get("choices"):
        takes = "{" + ",".join(str(choice) for choice in attrs["choices"]) + "}"
    else:
        takes = _dest(option).upper()
    return f"{flags} {takes}"


def _default(option: RecordedOption) -> str:
    action = option.attrs.get("action")
    default = option.attrs.get("default")
    if action == "store_true":
        return "off"
    if default is None or default == [] or default == ():
        return "none"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return str(default)


def option_row(option: RecordedOption) -> str:
    """One option's table row; the self-test compares the page row by row."""
    return (f"| `{_cell(_usage(option))}` | {_cell(_default(option))} | "
            f"{_cell(_help_text(option))} |")


def _ini_type(entry: RecordedIni) -> str:
    return getattr(entry.type, "__name__", None) or (entry.type or "string")


def render(recorder: OptionRecorder) -> str:
    lines = [
        "# Options reference",
        "",
        "<!-- Generated from the options the plugin registers: do not edit by hand.",
        f"     Regenerate with: {REGENERATE} -->",
        "",
        "Every command-line option and ini key the `engine_acceptance` plugin registers, with its",
        "default and the help text `pytest --help` shows. This page is generated from the plugin's",
        f"`pytest_addoption` by `{REGENERATE}`; a self-test",
        "(`selftest/test_docs.py`) fails when it differs from what the plugin registers.",
        "How the main options fit together, with examples: [Running against an engine](running.md).",
    ]
    for group in recorder.groups.values():
        lines += ["", f"## {group.description}", "", "| option | default | meaning |", "|---|---|---|"]
        lines += [option_row(option) for option in group.options]
    if recorder.ini:
        lines += ["", "## Ini keys", "",
                  "Set in `pytest.ini`, `pyproject.toml` (`[tool.pytest.ini_options]`) or with `-o KEY=VALUE`.",
                  "", "| key | type | meaning |", "|---|---|---|"]
        lines += [f"| `{entry.name}` | {_cell(str(_ini_type(entry)))} | {_cell(entry.help)} |" for entry in recorder.ini]
    return "\n".join(lines) + "\n"


_ROW_OPTION = re.compile(r"^\| `(-[^` ,]+)")


def rows_by_option(page: str) -> dict[str, str]:
    """Each table row of a rendered page, keyed by its first flag (``--engine-url``) or ini key."""
    rows: dict[str, str] = {}
    for line in page.splitlines():
        match = _ROW_OPTION.match(line) or re.match(r"^\| `([a-z_]+)` \|", line)
        if match:
            rows[match.group(1)] = line
    return rows


def differences(committed: str, generated: str) -> list[str]:
    """What differs, one line per option or ini key (and one for the text around the tables)."""
    old, new = rows_by_option(committed), rows_by_option(generated)
    found = [f"{name}: registered, missing from the page" for name in new if name not in old]
    found += [f"{name}: on the page, no longer registered" for name in old if name not in new]
    found += [f"{name}: differs\n    page:      {old[name]}\n    generated: {new[name]}"
              for name in new if name in old and old[name] != new[name]]
    if not found and committed != generated:
        found.append("the text around the tables (headings, order, introduction) differs")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    generated = render(record_plugin_options())
    if args.check:
        committed = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
        found = differences(committed, generated)
        for line in found:
            print(line)
        if found:
            print(f"{PAGE.relative_to(ROOT)} is out of date; regenerate with: {REGENERATE}")
        return 1 if found else 0
    PAGE.write_text(generated, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
