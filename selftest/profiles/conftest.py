"""Fixtures for the profile self-tests: a team's profiles dir, and the shipped data restored after each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from team_profiles import write_team_dir

from engine_acceptance.profiles.sources import profile_dirs, use_profile_dirs


@pytest.fixture(autouse=True)
def shipped_profiles_only() -> Iterator[None]:
    """Registered profiles dirs are process-wide: a test that registers some must not leak them to the next."""
    use_profile_dirs([])
    yield
    use_profile_dirs([])
    assert profile_dirs() == ()


@pytest.fixture
def team_dir(tmp_path: Path) -> Path:
    """A team's profiles dir (team_profiles.py): a model profile, an engine profile and a record file."""
    return write_team_dir(tmp_path / "acceptance-data")
