"""Redaction: keys, bearer tokens, base64 media and huge prompts never appear whole."""

from __future__ import annotations

import base64

from engine_acceptance.wire.redaction import REDACTED, Redactor


def test_api_key_is_replaced_everywhere() -> None:
    redactor = Redactor(["sk-secret-123456"])
    data = {"headers": {"Authorization": "Bearer sk-secret-123456"},
            "note": "key sk-secret-123456 used", "api_key": "anything"}
    text = str(redactor.value(data))
    assert "sk-secret-123456" not in text
    assert redactor.value(data)["api_key"] == REDACTED
    assert redactor.headers({"Authorization": "Bearer sk-secret-123456"}) == {"Authorization": REDACTED}


def test_bearer_token_is_redacted_even_when_unknown() -> None:
    assert "tok-xyz" not in Redactor().text("Authorization: Bearer tok-xyz")


def test_base64_media_is_described_not_copied() -> None:
    payload = base64.b64encode(bytes(range(256)) * 40).decode()
    uri = f"data:image/png;base64,{payload}"
    out = Redactor().value({"content": [{"type": "image_url", "image_url": {"url": uri}}]})
    described = out["content"][0]["image_url"]["url"]
    assert payload not in described
    assert described.startswith("data:image/png;base64,<") and "sha256" in described


def test_long_prompt_is_truncated_with_length_and_hash() -> None:
    prompt = "filler " * 100_000
    out = Redactor().text(prompt)
    assert len(out) < 5000 and f"{len(prompt)} chars" in out


def test_token_id_prompts_are_summarised() -> None:
    assert Redactor().value({"prompt": list(range(1000))}) == {"prompt": "[1000 token ids]"}
