"""MkDocs hook: the README and the client benchmark's page become pages of the site.

Both files live outside ``docs/`` (the README where GitHub and PyPI show it, the benchmark
beside its code), so MkDocs would not see them. This hook adds them as virtual pages,
``index.md`` and ``benchmarks.md``, with their links rewritten from the repository's view
(``docs/running.md``, ``benchmarks/README.md``) to the site's (``running.md``,
``benchmarks.md``). ``mkdocs build --strict`` then checks the README's links into docs/ as it
checks every page's: a link that breaks fails the build. Loaded by mkdocs.yml (``hooks:``);
it needs nothing but MkDocs, and fetches nothing.

It also mends one difference of Markdown dialects on every page: in a table, GitHub needs a
pipe inside backticks escaped (``auto\\|vllm``) and shows it without the backslash, while
Python-Markdown keeps such a pipe in its cell unescaped and would show the backslash.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Repository file -> the page it becomes on the site.
PAGES = {"README.md": "index.md", "benchmarks/README.md": "benchmarks.md"}


def site_links(markdown: str, page_folder: str) -> str:
    """Links written from the repository's view, rewritten to the site's (docs_dir is docs/)."""
    def rewrite(match: re.Match[str]) -> str:
        target = match.group(2)
        if re.match(r"^[a-z]+:|^#", target):
            return match.group(0)
        path, _, anchor = target.partition("#")
        repository_path = str(Path(page_folder, path)) if page_folder else path
        if repository_path in PAGES:
            path = PAGES[repository_path]
        elif repository_path.startswith("docs/"):
            path = repository_path[len("docs/"):]
        return f"{match.group(1)}({path}{'#' + anchor if anchor else ''})"

    return re.sub(r"(\])\(([^)\s]+)\)", rewrite, markdown)


def unescape_table_code_pipes(markdown: str) -> str:
    """``\\|`` inside a code span of a table row, as Python-Markdown wants it: ``|``."""
    def mend(row: str) -> str:
        return re.sub(r"`[^`]*`", lambda code: code.group(0).replace("\\|", "|"), row)

    return "\n".join(mend(line) if line.lstrip().startswith("|") else line for line in markdown.split("\n"))


def on_page_markdown(markdown, page, config, files):
    return unescape_table_code_pipes(markdown)


def on_files(files, config):
    # Imported here so that site_links is usable (and self-tested) without MkDocs installed.
    from mkdocs.structure.files import File

    for source, page in PAGES.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=site_links(text, str(Path(source).parent).strip("."))))
    return files
