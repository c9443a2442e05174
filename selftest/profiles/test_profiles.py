"""Profiles: every shipped file validates; a bad file names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_acceptance.profiles.profile import (
    ProfileError,
    available_profiles,
    choose_model_profile,
    load_engine_profile,
    load_model_profile,
)


@pytest.mark.parametrize("name", available_profiles("engines"))
def test_shipped_engine_profiles_validate(name: str) -> None:
    assert load_engine_profile(name).name == name


@pytest.mark.parametrize("name", available_profiles("models"))
def test_shipped_model_profiles_validate(name: str) -> None:
    assert load_model_profile(name).name == name


def test_model_profile_is_chosen_by_served_name() -> None:
    assert choose_model_profile("MiniMax-M3.1-Flash", None).name == "minimax-m3"
    assert choose_model_profile("reference-model", None).name == "reference"
    assert choose_model_profile("some-other-model", None).name == "generic"
    assert choose_model_profile("MiniMax-M3", "generic").name == "generic"


def test_minimax_profile_sends_thinking_mode_in_chat_template_kwargs() -> None:
    profile = load_model_profile("minimax-m3")
    assert profile.thinking_modes["disabled"] == {"chat_template_kwargs": {"thinking_mode": "disabled"}}
    assert profile.has("image") and profile.context_length == 1048576


def test_invalid_profile_names_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\ndescription: x\nmatch: []\ncapabilities: [text, telepathy]\n"
        "context_length: 10\nreasoning: {markers: []}\n",
        encoding="utf-8",
    )
    with pytest.raises(ProfileError) as excinfo:
        load_model_profile(str(bad))
    message = str(excinfo.value)
    assert str(bad) in message and "capabilities/1" in message and "telepathy" in message


def test_unknown_profile_name_lists_the_available_ones() -> None:
    with pytest.raises(ProfileError, match="available: .*generic"):
        load_model_profile("no-such-model")


def test_yaml_syntax_error_is_a_profile_error(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("name: [unclosed\n", encoding="utf-8")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_engine_profile(str(bad))


@pytest.mark.parametrize(("name", "shape", "rejects"), [("vllm", "nested", True), ("sglang", "flat", False),
                                                         ("generic", "nested", True)])
def test_engine_profiles_say_how_a_refusal_looks_and_whether_a_model_name_is_checked(
        name: str, shape: str, rejects: bool) -> None:
    profile = load_engine_profile(name)
    assert (profile.error_shape, profile.rejects_unknown_model) == (shape, rejects)


def test_an_engine_profile_without_error_features_gets_openais_defaults(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "fixtures/profiles/engines/generic.yaml").read_text(encoding="utf-8")
    bare = tmp_path / "bare.yaml"
    bare.write_text(text.replace("  error_shape: nested\n", "").replace("name: generic", "name: bare"),
                    encoding="utf-8")
    profile = load_engine_profile(str(bare))
    assert (profile.error_shape, profile.rejects_unknown_model) == ("nested", True)
