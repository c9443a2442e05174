"""The documentation stays true to the code: the options page, the README's links, the site's nav.

* ``docs/options.md`` is generated from the options the plugin registers
  (``scripts/options_reference.py``); a committed page that differs fails here, naming each
  option, with the command that regenerates it.
* The README is the five-minute read (at most 250 lines) that keeps the two commands CI runs,
  and every relative link in it and in docs/ (a file, or a heading in a Markdown file) exists,
  as GitHub resolves it. ``mkdocs build --strict`` (CI's docs stage) checks them on the site.
* Every page in ``docs/`` is in ``mkdocs.yml``'s nav, so none is built but unreachable.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 250
# The two commands .ci/run runs, as the README gives them to a newcomer.
TWO_COMMANDS = ("python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/pytest",
                ".venv/bin/pytest selftest -n 2")


def _script(name: str) -> ModuleType:
    path = ROOT / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class is made.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


options_reference = _script("options_reference")
mkdocs_hooks = _script("mkdocs_hooks")


# --- the options reference ------------------------------------------------------------------

def test_options_page_is_what_the_plugin_registers():
    generated = options_reference.render(options_reference.record_plugin_options())
    committed = options_reference.PAGE.read_text(encoding="utf-8")
    found = options_reference.differences(committed, generated)
    assert not found, ("docs/options.md differs from the options the plugin registers:\n"
                       + "\n".join(found) + f"\nregenerate it with: {options_reference.REGENERATE}")


def test_every_registered_option_has_its_row():
    recorder = options_reference.record_plugin_options()
    rows = options_reference.rows_by_option(options_reference.render(recorder))
    registered = [option.names[0] for group in recorder.groups.values() for option in group.options]
    assert "--engine-url" in registered and "--load-processes" in registered
    assert list(rows) == registered + [entry.name for entry in recorder.ini]


def test_a_changed_option_is_named_with_both_rows():
    generated = options_reference.render(options_reference.record_plugin_options())
    stale = generated.replace("Seconds for one whole request", "Seconds for a request")
    stale = "\n".join(line for line in stale.splitlines() if not line.startswith("| `--trials "))
    found = options_reference.differences(stale, generated)
    assert [line.split(":")[0] for line in found] == ["--trials", "--request-timeout"]
    assert "Seconds for a request" in found[1] and "Seconds for one whole request" in found[1]
    assert options_reference.differences(generated + "\nedited by hand\n", generated) == [
        "the text around the tables (headings, order, introduction) differs"]


# --- the README -----------------------------------------------------------------------------

def test_readme_is_a_five_minute_read_that_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    for command in TWO_COMMANDS:
        assert command in text, f"the README lost CI's command {command!r}"


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(markdown_file: Path) -> set[str]:
    text = re.sub(r"^(    |\t).*$", "", markdown_file.read_text(encoding="utf-8"), flags=re.M)
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def relative_links(markdown_file: Path) -> list[str]:
    text = markdown_file.read_text(encoding="utf-8")
    return [target for target in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"^[a-z]+:", target)]


def broken_links(markdown_file: Path) -> list[str]:
    broken = []
    for target in relative_links(markdown_file):
        path, _, anchor = target.partition("#")
        linked = (markdown_file.parent / path) if path else markdown_file
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: {linked.name} has no heading #{anchor}")
    return broken


def test_every_relative_link_of_the_readme_exists():
    assert relative_links(README), "the README links its docs/ pages"
    assert broken_links(README) == []


def test_every_relative_link_of_the_docs_pages_exists():
    # As GitHub resolves them; mkdocs build --strict checks them again on the site.
    assert {page.name: broken_links(page) for page in sorted((ROOT / "docs").glob("*.md")) if broken_links(page)} == {}


def test_a_broken_link_or_anchor_is_found(tmp_path):
    (tmp_path / "page.md").write_text("# A page: the title\n\n    # not a heading\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text("[a](page.md#a-page-the-title) [b](page.md#not-a-heading) [c](gone.md) "
                      "[d](https://example.org/x) [e](#missing)\n", encoding="utf-8")
    assert [line.split(":")[0] for line in broken_links(readme)] == ["page.md#not-a-heading", "gone.md", "#missing"]


def test_readme_links_are_rewritten_for_the_site():
    readme = ("[a](docs/running.md#x) [b](benchmarks/README.md) [c](#own) [d](https://h/docs/x.md) "
              "![i](docs/screenshots/p.png)")
    assert mkdocs_hooks.site_links(readme, "") == (
        "[a](running.md#x) [b](benchmarks.md) [c](#own) [d](https://h/docs/x.md) ![i](screenshots/p.png)")


def test_a_pipe_escaped_for_github_in_a_table_is_unescaped_for_the_site():
    page = "| `--engine auto\\|vllm` | a \\| b |\nnot a row `x\\|y`"
    assert mkdocs_hooks.unescape_table_code_pipes(page) == "| `--engine auto|vllm` | a \\| b |\nnot a row `x\\|y`"


# --- the site -------------------------------------------------------------------------------

def nav_pages(nav: list) -> list[str]:
    pages = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_docs_page_is_in_the_nav_and_every_nav_page_exists():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = nav_pages(config["nav"])
    hook_pages = set(mkdocs_hooks.PAGES.values())
    on_disk = {path.name for path in (ROOT / config["docs_dir"]).glob("*.md")}
    assert sorted(on_disk - set(nav)) == []
    assert sorted(set(nav) - on_disk - hook_pages) == []
    assert len(nav) == len(set(nav))
