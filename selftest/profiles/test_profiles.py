"""Profiles: every shipped file validates; a bad file names the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine_acceptance.capabilities.registry import CAPABILITIES
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


# --- refusals (issue 26) -------------------------------------------------------------------------

def _engine_with_refusals(tmp_path: Path, refusals: str) -> Path:
    text = (Path(__file__).parents[2] / "fixtures/profiles/engines/generic.yaml").read_text(encoding="utf-8")
    head = text.split("\nrefusals:\n")[0].replace("name: generic", "name: mine")
    path = tmp_path / "mine.yaml"
    path.write_text(f"{head}\nrefusals:\n{refusals}", encoding="utf-8")
    return path


def test_every_shipped_engine_profile_recognizes_an_absent_route_as_a_refusal() -> None:
    for name in available_profiles("engines"):
        rules = load_engine_profile(name).refusal_rules
        assert rules.recognizes("tokenize", 404, "Not Found") and rules.recognizes("responses", 404, "Not Found"), name


def test_a_teams_engine_profile_lists_its_own_refusals(tmp_path: Path) -> None:
    path = _engine_with_refusals(tmp_path, "  tools:\n    - status: 422\n      message: '^tools are disabled'\n")
    rules = load_engine_profile(str(path)).refusal_rules
    assert rules.recognizes("tools", 422, "tools are disabled on this gateway")
    assert not rules.recognizes("tools", 400, "tools are disabled on this gateway")
    assert not rules.recognizes("image", 422, "tools are disabled on this gateway")


@pytest.mark.parametrize(("refusals", "field", "problem"), [
    ("  tools:\n    - status: 400\n      message: '(unclosed'\n", "refusals/tools/0/message",
     "is not a regular expression"),
    ("  tools:\n    - status: 500\n      message: 'x'\n", "refusals/tools/0/status", "500"),
    ("  tools:\n    - status: 429\n      message: 'x'\n", "refusals/tools/0/status", "429"),
    ("  tools:\n    - status: 400\n", "refusals/tools/0", "'message' is a required property"),
    ("  tool:\n    - status: 400\n      message: 'x'\n", "refusals", "'tool'"),
], ids=["bad-regex", "status-5xx", "status-rate-limit", "no-message", "unknown-capability"])
def test_a_bad_refusal_names_the_file_and_the_field(tmp_path: Path, refusals: str, field: str, problem: str) -> None:
    path = _engine_with_refusals(tmp_path, refusals)
    with pytest.raises(ProfileError) as excinfo:
        load_engine_profile(str(path))
    message = str(excinfo.value)
    assert message.startswith(f"{path}: field {field}"), message
    assert problem in message, message


# --- a refusal cannot over-reach (issue 39) ----------------------------------------------------------

@pytest.mark.parametrize(("capability", "status", "message", "matched"), [
    ("tools", 400, ".", "'Internal Server Error'"),
    ("tools", 400, ".*", "an empty message"),
    ("image", 400, "Error", "'Internal Server Error'"),
    ("tools", 400, "(?i)internal server error", "'Internal Server Error'"),
    ("tools", 400, "extracting tool call", '"Error in extracting tool call from response: JSONDecodeError'),
    ("image", 400, "cannot identify image", "'Failed to load image: cannot identify image file"),
], ids=["any-text", "matches-empty", "error", "500-page", "crashing-tool-parser", "crashing-decoder"])
def test_a_refusal_that_matches_a_generic_error_text_is_refused(tmp_path: Path, capability: str, status: int,
                                                                message: str, matched: str) -> None:
    """Such a pattern would turn a crashing parser or a 500 page back into "not served"."""
    path = _engine_with_refusals(tmp_path, f"  {capability}:\n    - status: {status}\n      message: '{message}'\n")
    with pytest.raises(ProfileError) as excinfo:
        load_engine_profile(str(path))
    text = str(excinfo.value)
    assert text.startswith(f"{path}: field refusals/{capability}/0/message: {message!r} matches {matched}"), text
    assert f"so it would read a fault as {capability} not offered; write the engine's own words" in text, text


@pytest.mark.parametrize(("capability", "status"), [("tools", 404), ("image", 405), ("structured_outputs", 404)])
def test_a_404_or_405_is_a_refusal_only_of_a_capability_with_a_route_of_its_own(tmp_path: Path, capability: str,
                                                                                 status: int) -> None:
    path = _engine_with_refusals(tmp_path, f"  {capability}:\n    - status: {status}\n      message: '^Not Found$'\n")
    with pytest.raises(ProfileError) as excinfo:
        load_engine_profile(str(path))
    assert str(excinfo.value) == (
        f"{path}: field refusals/{capability}/0/status: {status} for {capability}, which has no route of its own: "
        f"{capability} rides on /v1/chat/completions, where {status} means a wrong path or a proxy in front of the "
        f"engine, not {capability} declined; only a capability served on a route of its own (the registry's "
        f"own_route: responses, tokenize) may list 404 or 405")
    # The routes' own 404 and 405 stay refusals.
    path = _engine_with_refusals(tmp_path, "  responses:\n    - status: 404\n      message: '^Not Found$'\n"
                                           "  tokenize:\n    - status: 405\n      message: '^Method Not Allowed$'\n")
    rules = load_engine_profile(str(path)).refusal_rules
    assert rules.recognizes("responses", 404, "Not Found") and rules.recognizes("tokenize", 405, "Method Not Allowed")


def test_the_registry_names_the_capabilities_served_on_a_route_of_their_own() -> None:
    assert {entry.name for entry in CAPABILITIES if entry.own_route} == {"responses", "tokenize"}


def test_a_model_profile_states_what_it_leaves_off_and_may_not_also_expect_it(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "fixtures/profiles/models/generic.yaml").read_text(encoding="utf-8")
    mine = tmp_path / "mine.yaml"
    mine.write_text(text.replace("name: generic", "name: mine") + "not_served: [tools, image]\n", encoding="utf-8")
    assert load_model_profile(str(mine)).not_served == frozenset({"tools", "image"})
    mine.write_text(text.replace("name: generic", "name: mine") + "not_served: [tools]\nexpect: [tools]\n",
                    encoding="utf-8")
    with pytest.raises(ProfileError, match=r"field not_served: 'tools' also in expect"):
        load_model_profile(str(mine))
