"""Where profiles and expectation records come from: the user's folders first, then the suite's.

A team keeps its own model profiles, engine profiles and expectation records in its own
repository and names the folder with ``--profiles-dir DIR`` (repeatable; the ini key
``profiles_dirs`` too), so nobody forks the suite to add a model. Such a folder holds any of
``models/``, ``engines/`` and ``expectations/`` (``*.yaml`` files, the same schemas as the
shipped ones). The search order is the user's folders in the order given, then the shipped
data (``fixtures/profiles/models``, ``fixtures/profiles/engines``, ``fixtures/expectations``,
wherever the suite is installed). A file found earlier in that order replaces a later one of
the same name: a team's ``models/generic.yaml`` replaces the shipped generic profile. That is
said in the report header (:func:`describe_sources`), never silent.

The folders are registered once per process with :func:`use_profile_dirs`; the pytest
plugin does it in every process, xdist workers included, before any profile is loaded.
Nothing here is cached: every lookup lists the folders again (a handful of files), so
registering other folders, as the self-tests do, takes effect at once and no stale
listing survives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from engine_acceptance.errors import UsageError
from engine_acceptance.resources import suite_path

__all__ = [
    "KINDS",
    "SHIPPED",
    "DataFile",
    "DataSource",
    "ProfileError",
    "data_files",
    "data_sources",
    "describe_sources",
    "find_data_file",
    "profile_dirs",
    "use_profile_dirs",
]

# The three kinds of data, each a sub-folder of a user's profiles dir.
KINDS = ("models", "engines", "expectations")
# How each kind is named in messages (singular, plural).
_NOUNS = {"models": ("model profile", "model profiles"), "engines": ("engine profile", "engine profiles"),
          "expectations": ("record file", "record files")}


class ProfileError(UsageError):
    """A profile, a record file or a profiles dir that is missing, unreadable or does not match its schema."""


@dataclass(frozen=True)
class DataSource:
    """One place profiles and records are read from: a user's profiles dir or the shipped data."""

    root: Path
    models: Path
    engines: Path
    expectations: Path
    shipped: bool

    def folder(self, kind: str) -> Path:
        return getattr(self, _known_kind(kind))

    def files(self, kind: str) -> list[Path]:
        """This source's ``*.yaml`` files of one kind, by name."""
        folder = self.folder(kind)
        return sorted(folder.glob("*.yaml")) if folder.is_dir() else []

    def label(self) -> str:
        return f"shipped ({self.root})" if self.shipped else str(self.root)


@dataclass(frozen=True)
class DataFile:
    """A profile or record file in effect, and the files of the same name it replaces."""

    kind: str
    # The file name without .yaml: a profile's name, or a record file's.
    name: str
    path: Path
    source: DataSource
    # Files of the same name later in the search order, which this one hides.
    replaces: tuple[tuple[Path, DataSource], ...] = ()


SHIPPED = DataSource(
    root=suite_path("fixtures"),
    models=suite_path("fixtures", "profiles", "models"),
    engines=suite_path("fixtures", "profiles", "engines"),
    expectations=suite_path("fixtures", "expectations"),
    shipped=True,
)

# The user's folders registered for this process, in search order.
_user_sources: tuple[DataSource, ...] = ()


def use_profile_dirs(dirs: Sequence[str | Path]) -> None:
    """Read profiles and records from these folders first, then the shipped ones (``[]``: shipped only).

    Relative paths are taken from the current directory. Every folder is checked before
    any is registered, so a bad one leaves the previous registration in place. A folder
    given twice counts once, at its first place.
    """
    sources: list[DataSource] = []
    for given in dirs:
        root = Path(given).expanduser().resolve()
        _check_profiles_dir(root, given)
        if all(source.root != root for source in sources):
            sources.append(DataSource(root=root, models=root / "models", engines=root / "engines",
                                      expectations=root / "expectations", shipped=False))
    global _user_sources
    _user_sources = tuple(sources)


def profile_dirs() -> tuple[Path, ...]:
    """The user's folders registered for this process, in search order."""
    return tuple(source.root for source in _user_sources)


def data_sources() -> tuple[DataSource, ...]:
    """Every source in search order: the user's folders, then the shipped data."""
    return (*_user_sources, SHIPPED)


def data_files(kind: str) -> list[DataFile]:
    """The files of one kind in effect, in search order (by name within a source); replaced ones left out."""
    _known_kind(kind)
    chosen: dict[str, DataFile] = {}
    for source in data_sources():
        for path in source.files(kind):
            winner = chosen.get(path.stem)
            if winner is None:
                chosen[path.stem] = DataFile(kind, path.stem, path, source)
            else:
                chosen[path.stem] = replace(winner, replaces=(*winner.replaces, (path, source)))
    return list(chosen.values())


def find_data_file(kind: str, name: str) -> DataFile | None:
    """The file in effect for ``name`` (a profile's name, a record file's name without .yaml), or None."""
    return next((found for found in data_files(kind) if found.name == name), None)


def describe_sources() -> list[str]:
    """Lines for the report header: each source and what it contributed, and every replacement.

    For example::

        profiles dir /repo/acceptance: 1 model profile (acme-7b), 1 engine profile (acme-serve), ...
        /repo/acceptance/models/generic.yaml replaces the shipped model profile generic (...)
        shipped profiles (.../engine_acceptance/suite/fixtures): 3 model profiles (generic replaced), ...
    """
    in_effect = {kind: data_files(kind) for kind in KINDS}
    lines: list[str] = []
    for source in data_sources():
        parts = []
        for kind in KINDS:
            mine = [found for found in in_effect[kind] if found.source == source]
            shadowed = [path for path in source.files(kind) if all(found.path != path for found in mine)]
            names = [found.path.name if kind == "expectations" else found.name for found in mine]
            part = _count(len(mine), kind)
            if names and not source.shipped:
                part += f" ({', '.join(names)})"
            if shadowed:
                part += f" ({', '.join(path.stem for path in shadowed)} replaced)"
            parts.append(part)
        if source.shipped:
            given = "" if _user_sources else " (no profiles dir given)"
            lines.append(f"shipped profiles ({source.root}): {', '.join(parts)}{given}")
        else:
            lines.append(f"profiles dir {source.root}: {', '.join(parts)}")
        for kind in KINDS:
            for found in in_effect[kind]:
                if found.source != source:
                    continue
                for path, other in found.replaces:
                    whose = "the shipped" if other.shipped else f"{other.root}'s"
                    lines.append(f"{found.path} replaces {whose} {_NOUNS[kind][0]} {found.name} ({path})")
    return lines


def _check_profiles_dir(root: Path, given: str | Path) -> None:
    shown = f"{given}" if str(given) == str(root) else f"{given} ({root})"
    layout = ("it should hold at least one of models/ (model profiles), engines/ (engine profiles) and "
              "expectations/ (expected-failure records), each with *.yaml files")
    if not root.exists():
        raise ProfileError(f"profiles dir {shown} does not exist; {layout}")
    if not root.is_dir():
        raise ProfileError(f"profiles dir {shown} is not a directory; {layout}")
    if root == SHIPPED.root or root == SHIPPED.models.parent:
        raise ProfileError(f"profiles dir {shown} is the suite's own data, which is always read; give your own "
                           "folder instead")
    present = [kind for kind in KINDS if (root / kind).is_dir()]
    if not present:
        raise ProfileError(f"profiles dir {shown} holds none of models/, engines/, expectations/; {layout}")
    for kind in present:
        # Only *.yaml is read: a .yml file would be ignored without a word.
        stray = sorted((root / kind).glob("*.yml"))
        if stray:
            raise ProfileError(f"profiles dir {shown}: {stray[0]} ends in .yml; only *.yaml files are read, "
                               f"rename it to {stray[0].with_suffix('.yaml').name}")


def _known_kind(kind: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"unknown kind of profile data {kind!r}; known: {', '.join(KINDS)}")
    return kind


def _count(number: int, kind: str) -> str:
    singular, plural = _NOUNS[kind]
    return f"{number} {singular if number == 1 else plural}"
