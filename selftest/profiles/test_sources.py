"""Profiles dirs: a team's own models, engines and records without forking, searched before the shipped data.

What must hold: a user's model profile is chosen by the served model name, a user's engine
profile and records are loaded with the shipped ones, a user's file named like a shipped
one replaces it and the report header says so, and a folder that is not a profiles dir is
refused with its path and what it should hold.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from team_profiles import ACME_MODEL

from engine_acceptance.profiles.expectations import load_expectations, matching_records
from engine_acceptance.profiles.profile import (
    ProfileError,
    available_profiles,
    choose_model_profile,
    load_engine_profile,
    load_model_profile,
)
from engine_acceptance.profiles.sources import (
    SHIPPED,
    data_sources,
    describe_sources,
    find_data_file,
    profile_dirs,
    use_profile_dirs,
)

SHIPPED_MODELS = available_profiles("models")
SHIPPED_RECORD_FILES = sorted(path.name for path in SHIPPED.expectations.glob("*.yaml"))


def test_a_team_model_profile_is_chosen_by_the_served_model_name(team_dir: Path) -> None:
    assert choose_model_profile("ACME-7B-Instruct", None).name == "generic"  # before: nothing knows it
    use_profile_dirs([team_dir])
    chosen = choose_model_profile("ACME-7B-Instruct", None)
    assert chosen.name == "acme-7b" and chosen.source == team_dir / "models" / "acme-7b.yaml"
    assert chosen.has("tools") and not chosen.has("image") and chosen.context_length == 32768
    # The shipped profiles are still there, and still chosen for their models.
    assert choose_model_profile("MiniMax-M3.1-Flash", None).name == "minimax-m3"
    assert choose_model_profile("some-other-model", None).name == "generic"
    assert available_profiles("models") == ["acme-7b", *SHIPPED_MODELS]


def test_a_team_engine_profile_and_records_are_loaded_with_the_shipped_ones(team_dir: Path) -> None:
    use_profile_dirs([str(team_dir)])
    engine = load_engine_profile("acme-serve")
    assert engine.owned_by == ("acme",) and engine.source == team_dir / "engines" / "acme-serve.yaml"
    assert available_profiles("engines")[0] == "acme-serve" and "vllm" in available_profiles("engines")
    records = load_expectations()
    assert {record.origin.split("#")[0] for record in records} == {"acme.yaml", *SHIPPED_RECORD_FILES}
    [acme] = matching_records(records, "tests/test_text.py::test_arithmetic_answer_is_correct[streamed]",
                              engine="acme-serve", version=None, model="acme-7b-instruct")
    assert acme.origin == "acme.yaml#0" and acme.check == "test_text.py::test_arithmetic_answer_is_correct[*]"


def test_registering_again_replaces_the_dirs_and_an_empty_list_restores_the_shipped_data(team_dir: Path) -> None:
    use_profile_dirs([team_dir])
    assert profile_dirs() == (team_dir.resolve(),)
    assert [source.shipped for source in data_sources()] == [False, True]
    use_profile_dirs([])
    assert profile_dirs() == () and data_sources() == (SHIPPED,)
    assert available_profiles("models") == SHIPPED_MODELS  # nothing of the team's listing survives
    with pytest.raises(ProfileError, match="no model profile named 'acme-7b'"):
        load_model_profile("acme-7b")
    assert all(not record.origin.startswith("acme.yaml") for record in load_expectations())


def test_a_relative_dir_is_taken_from_the_current_directory_and_a_repeated_one_counts_once(
        team_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(team_dir.parent)
    use_profile_dirs([team_dir.name, team_dir, f"./{team_dir.name}"])
    assert profile_dirs() == (team_dir.resolve(),)


def test_the_first_dir_wins_over_a_later_one(team_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-team" / "models"
    other.mkdir(parents=True)
    (other / "acme-7b.yaml").write_text(ACME_MODEL.replace("context_length: 32768", "context_length: 8192"),
                                        encoding="utf-8")
    use_profile_dirs([team_dir, other.parent])
    assert load_model_profile("acme-7b").context_length == 32768
    assert any(line == f"{team_dir.resolve() / 'models' / 'acme-7b.yaml'} replaces {other.parent.resolve()}'s model "
                       f"profile acme-7b ({other.resolve() / 'acme-7b.yaml'})" for line in describe_sources())
    use_profile_dirs([other.parent, team_dir])
    assert load_model_profile("acme-7b").context_length == 8192


# --- a user's file replaces the shipped one of the same name, and the header says so ---------

def test_a_team_file_replaces_the_shipped_one_of_the_same_name_and_says_so(team_dir: Path) -> None:
    shipped_generic = load_model_profile("generic")
    (team_dir / "models" / "generic.yaml").write_text(
        ACME_MODEL.replace("name: acme-7b", "name: generic").replace('match: ["(?i)^acme-7b"]', "match: []"),
        encoding="utf-8")
    (team_dir / "expectations" / "seed-minimax-m3.yaml").write_text("records: []\n", encoding="utf-8")
    use_profile_dirs([team_dir])

    generic = load_model_profile("generic")
    assert generic.source == team_dir / "models" / "generic.yaml" and generic.context_length == 32768
    assert shipped_generic.source == SHIPPED.models / "generic.yaml"
    # The unknown model falls back to the team's generic, not the shipped one.
    assert choose_model_profile("some-other-model", None).source == generic.source
    assert available_profiles("models").count("generic") == 1
    # The team's empty record file replaces the shipped one: none of its records apply any more.
    assert not [record for record in load_expectations() if record.origin.startswith("seed-minimax-m3.yaml")]
    assert find_data_file("expectations", "seed-minimax-m3").path == team_dir / "expectations" / "seed-minimax-m3.yaml"

    lines = describe_sources()
    team = team_dir.resolve()
    assert lines[0] == (f"profiles dir {team}: 2 model profiles (acme-7b, generic), 1 engine profile (acme-serve), "
                        f"2 record files (acme.yaml, seed-minimax-m3.yaml)")
    assert f"{team / 'models' / 'generic.yaml'} replaces the shipped model profile generic " \
           f"({SHIPPED.models / 'generic.yaml'})" in lines
    assert f"{team / 'expectations' / 'seed-minimax-m3.yaml'} replaces the shipped record file seed-minimax-m3 " \
           f"({SHIPPED.expectations / 'seed-minimax-m3.yaml'})" in lines
    shipped_line = lines[-1]
    assert shipped_line.startswith(f"shipped profiles ({SHIPPED.root}): {len(SHIPPED_MODELS) - 1} model profiles "
                                   f"(generic replaced), ")
    assert f"{len(SHIPPED_RECORD_FILES) - 1} record files (seed-minimax-m3 replaced)" in shipped_line


def test_without_a_profiles_dir_the_header_names_the_shipped_data_only() -> None:
    [line] = describe_sources()
    assert line == (f"shipped profiles ({SHIPPED.root}): {len(SHIPPED_MODELS)} model profiles, "
                    f"{len(available_profiles('engines'))} engine profiles, {len(SHIPPED_RECORD_FILES)} record files "
                    f"(no profiles dir given)")


def test_a_profile_named_unlike_its_file_is_refused_naming_file_and_field(team_dir: Path) -> None:
    path = team_dir / "models" / "generic.yaml"
    path.write_text(ACME_MODEL, encoding="utf-8")  # says name: acme-7b
    use_profile_dirs([team_dir])
    with pytest.raises(ProfileError) as excinfo:
        load_model_profile("generic")
    assert str(excinfo.value).startswith(f"{path}: field name: 'acme-7b' differs from the file name")


def test_an_invalid_team_profile_names_its_file_and_field(team_dir: Path) -> None:
    path = team_dir / "models" / "acme-7b.yaml"
    path.write_text(ACME_MODEL.replace("[text, streaming, tools]", "[text, telepathy]"), encoding="utf-8")
    use_profile_dirs([team_dir])
    with pytest.raises(ProfileError, match=r"capabilities/1.*telepathy") as excinfo:
        choose_model_profile("acme-7b", None)
    assert str(excinfo.value).startswith(str(path))


def test_an_unknown_name_says_where_it_was_looked_for(team_dir: Path) -> None:
    use_profile_dirs([team_dir])
    with pytest.raises(ProfileError) as excinfo:
        load_engine_profile("tgi")
    message = str(excinfo.value)
    assert f"no engine profile named 'tgi' in {team_dir.resolve() / 'engines'}, {SHIPPED.engines}" in message
    assert "available: acme-serve, generic, llama-server, llamacpp, sglang, vllm" in message


# --- folders that are not profiles dirs ----------------------------------------------------

LAYOUT = "it should hold at least one of models/ (model profiles), engines/ (engine profiles) and expectations/"


def test_a_missing_dir_is_refused_with_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(ProfileError) as excinfo:
        use_profile_dirs([missing])
    assert str(excinfo.value).startswith(f"profiles dir {missing} does not exist; {LAYOUT}")


def test_a_file_is_refused_as_not_a_directory(tmp_path: Path) -> None:
    file = tmp_path / "profiles.yaml"
    file.write_text("records: []\n", encoding="utf-8")
    with pytest.raises(ProfileError) as excinfo:
        use_profile_dirs([file])
    assert str(excinfo.value).startswith(f"profiles dir {file} is not a directory; {LAYOUT}")


def test_a_dir_with_none_of_the_three_folders_is_refused(tmp_path: Path) -> None:
    (tmp_path / "profiles").mkdir()  # the shipped layout's name, not a profiles dir's
    (tmp_path / "generic.yaml").write_text(ACME_MODEL, encoding="utf-8")
    with pytest.raises(ProfileError) as excinfo:
        use_profile_dirs([tmp_path])
    assert str(excinfo.value).startswith(
        f"profiles dir {tmp_path} holds none of models/, engines/, expectations/; {LAYOUT}")


def test_a_bad_dir_leaves_the_registered_ones_in_place(team_dir: Path, tmp_path: Path) -> None:
    use_profile_dirs([team_dir])
    with pytest.raises(ProfileError, match="does not exist"):
        use_profile_dirs([team_dir, tmp_path / "typo"])
    assert profile_dirs() == (team_dir.resolve(),)


def test_a_yml_file_is_refused_rather_than_ignored(team_dir: Path) -> None:
    (team_dir / "models" / "acme-7b.yaml").rename(team_dir / "models" / "acme-7b.yml")
    with pytest.raises(ProfileError, match=r"acme-7b\.yml ends in \.yml; only \*\.yaml files are read, rename it "
                                           r"to acme-7b\.yaml"):
        use_profile_dirs([team_dir])


def test_the_shipped_data_is_not_a_profiles_dir() -> None:
    with pytest.raises(ProfileError, match="is the suite's own data, which is always read"):
        use_profile_dirs([SHIPPED.root])
