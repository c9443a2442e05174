"""A JSON document written whole or not at all: a pipeline never reads half of one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["write_json"]


def write_json(path: str | Path, data: Any, *, indent: int | None = None, trailing_newline: bool = False) -> Path:
    """``data`` as UTF-8 JSON at ``path`` (folders made), through a temporary file replaced at once.

    ``indent=None`` writes it compact (no spaces), for files read by programs only.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    separators = None if indent is not None else (",", ":")
    text = json.dumps(data, ensure_ascii=False, indent=indent, separators=separators)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(text + ("\n" if trailing_newline else ""), encoding="utf-8")
    tmp.replace(target)
    return target
