"""Self-tests of the recall building blocks: haystack, token counting, answer grading,
progress lines, and the reference engine's retrieval rule, tokenizer export and defects.

Exact length is checked with two real tokenizers: the reference engine's byte-level
one (exported as tokenizer.json, the only way it reaches the suite), and a BPE trained
here on the filler itself (merges across characters, like the tokenizers of real
models), so "exactly N tokens" is not an artefact of 1 byte = 1 token.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from engine_acceptance.wire.types import EngineTarget
from engine_acceptance.recall import haystack
from engine_acceptance.recall.haystack import (
    CODE_PATTERN,
    MIN_RECALL_TOKENS,
    FillerWriter,
    HaystackError,
    Needle,
    build_haystack,
    make_code,
    recall_budget,
)
from engine_acceptance.progress import waiting
from engine_acceptance.recall.answers import character_differences, code_problems, codes_in, json_codes
from engine_acceptance.reference_engine import start_reference_engine
from engine_acceptance.reference_engine.conversation import Conversation, ThinkingMode
from engine_acceptance.reference_engine.responder import respond
from engine_acceptance.reference_engine.retrieval import NOT_FOUND, corrupt_first_code, drop_middle
from engine_acceptance.wire.token_count import (
    LocalTokenCounter,
    PromptAccounting,
    ServerTokenCounter,
    TokenCountError,
    newline_boundaries_are_additive,
)

BEFORE = "下面是资料。\n<document>\n"
AFTER = "</document>\n请找出以 jade-50-1- 开头的密钥。"


def _needles(seed: int = 1, depths: tuple[float, ...] = (0.1, 0.5, 0.9)) -> list[Needle]:
    return [Needle(code, depth, f"备忘：密钥是 {code}。")
            for depth in depths for code in [make_code("jade", depth, 1, seed)]]


@pytest.fixture(scope="module")
def byte_counter(tokenizer_json: Path) -> LocalTokenCounter:
    """The reference engine's byte-level tokenizer, as a user gets it: its exported tokenizer.json."""
    return LocalTokenCounter.from_file(tokenizer_json)


@pytest.fixture(scope="module")
def bpe_counter() -> LocalTokenCounter:
    """A real BPE with merges, trained on the filler (what a model's tokenizer looks like)."""
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("\n", behavior="merged_with_previous")
    writer = FillerWriter("bpe-training")
    corpus = [writer.paragraph() for _ in range(400)] + [BEFORE, AFTER, *(n.line for n in _needles())]
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["[UNK]"], show_progress=False)
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    return LocalTokenCounter(tokenizer, source="BPE trained on the filler")


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    with start_reference_engine() as running:
        yield running.url


# --- filler ----------------------------------------------------------------------------

def test_filler_is_deterministic_per_seed_and_differs_between_seeds() -> None:
    first = [FillerWriter(7).paragraph() for _ in range(5)]
    assert first == [FillerWriter(7).paragraph() for _ in range(5)]
    assert first != [FillerWriter(8).paragraph() for _ in range(5)]


def test_filler_is_varied_prose_not_one_sentence_repeated() -> None:
    writer = FillerWriter(1)
    sentences = [writer.sentence() for _ in range(2000)]
    distinct = len(set(sentences))
    most_common, times = Counter(sentences).most_common(1)[0]
    assert distinct > 1900, f"only {distinct} distinct sentences in 2000"
    assert times <= 4, f"{most_common!r} appears {times} times"
    assert not any(CODE_PATTERN.search(s) for s in sentences), "filler must never look like a code"


def test_codes_have_the_seed_format_and_are_independent() -> None:
    code = make_code("jade", 0.5, 1, 20261023)
    assert CODE_PATTERN.fullmatch(code) and code.startswith("jade-50-1-")
    assert code == make_code("jade", 0.5, 1, 20261023)
    others = {make_code("jade", depth, key, 20261023) for depth in (0.1, 0.5, 0.9) for key in (1, 2, 3)}
    assert len({c.rsplit("-", 1)[1] for c in others}) == 9, "each needle draws its own digits"


# --- building ------------------------------------------------------------------------

@pytest.mark.parametrize("target", [900, 4096, 31_000, 100_003], ids=lambda t: f"{t}-tokens")
@pytest.mark.parametrize("counter_name", ["byte_counter", "bpe_counter"], ids=["byte-level", "trained-bpe"])
def test_haystack_is_exactly_the_target_length_counted_whole(request: pytest.FixtureRequest, counter_name: str,
                                                             target: int) -> None:
    counter = request.getfixturevalue(counter_name)
    haystack = build_haystack(counter=counter, target_tokens=target, before=BEFORE, after=AFTER,
                              needles=_needles(target), seed=target, verify_whole=False)
    assert haystack.tokens == target
    assert counter.count(haystack.text) == target, "piecewise counting must equal counting the whole text"


def test_needles_appear_once_each_in_depth_order_near_their_depth(bpe_counter: LocalTokenCounter) -> None:
    needles = _needles()
    haystack = build_haystack(counter=bpe_counter, target_tokens=50_000, before=BEFORE, after=AFTER,
                              needles=needles, seed=3)
    positions = [haystack.text.index(n.code) for n in needles]
    assert positions == sorted(positions)
    assert all(haystack.text.count(n.code) == 1 for n in needles)
    assert codes_in(haystack.text) == [n.code for n in needles], "nothing else in the text looks like a code"
    for placed in haystack.needles:
        assert abs(placed.actual_depth - placed.depth) < 0.02, placed
    assert haystack.text.startswith(BEFORE) and haystack.text.endswith(AFTER)


def test_same_seed_builds_the_same_prompt(byte_counter: LocalTokenCounter) -> None:
    build = lambda: build_haystack(counter=byte_counter, target_tokens=20_000, before=BEFORE, after=AFTER,  # noqa: E731
                                   needles=_needles(), seed=11).text
    assert build() == build()


def test_target_shorter_than_the_instructions_is_refused(byte_counter: LocalTokenCounter) -> None:
    with pytest.raises(HaystackError, match="too short"):
        build_haystack(counter=byte_counter, target_tokens=300, before=BEFORE, after=AFTER, needles=_needles(),
                       seed=1)


def test_filler_pieces_count_apart_as_together(bpe_counter: LocalTokenCounter) -> None:
    writer = FillerWriter(5)
    additive, why = newline_boundaries_are_additive(bpe_counter, [writer.paragraph() for _ in range(300)])
    assert additive, why


def test_summary_for_the_report_has_no_prompt_text(byte_counter: LocalTokenCounter) -> None:
    haystack = build_haystack(counter=byte_counter, target_tokens=5000, before=BEFORE, after=AFTER,
                              needles=_needles(), seed=2)
    summary = json.dumps(haystack.summary(), ensure_ascii=False)
    assert "下面是资料" not in summary and "sha256" in summary and "jade-50-1-" in summary


# --- budget ----------------------------------------------------------------------------

def test_budget_defaults_to_the_profile_capped_by_the_engine() -> None:
    assert recall_budget(requested=None, profile_context=1_048_576, max_model_len=1_048_576).tokens == 1_047_488
    capped = recall_budget(requested=None, profile_context=1_048_576, max_model_len=32_768)
    assert capped.tokens == 32_768 - 1088 and "capped by the engine's max_model_len 32768" in capped.explanation
    unknown = recall_budget(requested=None, profile_context=4096, max_model_len=None)
    assert unknown.tokens == 4096 - 1088 and "reports no max_model_len" in unknown.explanation


def test_budget_takes_an_explicit_length_that_fits_and_refuses_one_that_does_not() -> None:
    assert recall_budget(requested=8192, profile_context=4096, max_model_len=32_768).tokens == 8192
    with pytest.raises(ValueError, match="max_model_len 32768.*leaves 31680"):
        recall_budget(requested=40_000, profile_context=4096, max_model_len=32_768)
    with pytest.raises(ValueError, match="minimum"):
        recall_budget(requested=MIN_RECALL_TOKENS - 1, profile_context=4096, max_model_len=None)


# --- counting --------------------------------------------------------------------------

def test_local_tokenizer_file_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(TokenCountError, match="is not a file"):
        LocalTokenCounter.from_file(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(TokenCountError, match="tokenizers library can load"):
        LocalTokenCounter.from_file(bad)


def test_exported_tokenizer_counts_like_the_server(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    subprocess.run([sys.executable, "-m", "engine_acceptance.reference_engine", "--export-tokenizer", str(path)],
                   check=True, timeout=60)
    with urllib.request.urlopen(engine + "/tokenizer.json", timeout=10) as response:
        assert json.loads(response.read()) == json.loads(path.read_text(encoding="utf-8"))
    local = LocalTokenCounter.from_file(path)
    server = ServerTokenCounter(EngineTarget(engine, "reference-model"), "/tokenize")
    text = FillerWriter(1).paragraph() + "jade-10-1-123456 <|user|>"
    assert local.count(text) == server.count(text) == len(text.encode("utf-8")) - len("<|user|>") + 1
    messages = [{"role": "user", "content": text}]
    assert server.count_conversation(messages) == local.count(text) + 5  # <|user|>\n … \n<|assistant|>\n


def test_measuring_command_counts_with_the_tokenizer_json_it_is_given(tokenizer_json: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert haystack.main(["--tokenizer", str(tokenizer_json), "--tokens", "4096"]) == 0
    out = capsys.readouterr().out
    assert "built 4,096 tokens" in out and f"local tokenizer.json {tokenizer_json}" in out, out


def test_measuring_command_needs_a_tokenizer_and_says_how_to_get_the_reference_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No default: the suite never reaches for the reference engine's tokenizer by import.
    with pytest.raises(SystemExit) as exited:
        haystack.main([])
    assert exited.value.code == 2
    with pytest.raises(SystemExit):
        haystack.main(["--help"])
    assert "--export-tokenizer" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        haystack.main(["--tokenizer", str(tmp_path / "missing.json")])
    assert exited.value.code == 2 and "missing.json is not a file" in capsys.readouterr().err


def test_server_counter_reports_a_refusal(engine: str) -> None:
    server = ServerTokenCounter(EngineTarget(engine, "no-such-model"), "/tokenize")
    with pytest.raises(TokenCountError, match="HTTP 404"):
        server.count("text")


def test_accounting_compares_usage_with_the_engines_conversation_count() -> None:
    exact = PromptAccounting(text_tokens=1000, text_counted_with="t", usage_prompt_tokens=1005, tolerance=0,
                             template_tokens_max=64, conversation_tokens=1005)
    assert exact.problems() == [] and exact.difference == 0
    off = PromptAccounting(text_tokens=1000, text_counted_with="t", usage_prompt_tokens=1006, tolerance=0,
                           template_tokens_max=64, conversation_tokens=1005)
    assert off.problems() == ["usage.prompt_tokens is 1006 but the engine's own /tokenize counts 1005 for the "
                              "same conversation: +1 tokens (tolerance 0)"]
    wrong_tokenizer = PromptAccounting(text_tokens=1000, text_counted_with="t", usage_prompt_tokens=1010,
                                       tolerance=0, template_tokens_max=64, server_text_tokens=1004,
                                       conversation_tokens=1010)
    assert "not the served model's tokenizer" in wrong_tokenizer.problems()[0]


def test_accounting_without_a_conversation_count_allows_the_declared_template_tokens() -> None:
    within = PromptAccounting(text_tokens=1000, text_counted_with="t", usage_prompt_tokens=1040, tolerance=0,
                              template_tokens_max=64)
    assert within.problems() == [] and "template allowance 0..64" in within.describe()
    beyond = PromptAccounting(text_tokens=1000, text_counted_with="t", usage_prompt_tokens=990, tolerance=0,
                              template_tokens_max=64)
    assert "would add -10 tokens" in beyond.problems()[0]
    missing = PromptAccounting(text_tokens=1000, text_counted_with="t", usage_prompt_tokens=None, tolerance=0,
                               template_tokens_max=64)
    assert missing.problems() == ["the reply has no usage.prompt_tokens to compare"]


# --- grading ---------------------------------------------------------------------------

def _placed(*codes: str) -> list:
    from engine_acceptance.recall.haystack import PlacedNeedle

    return [PlacedNeedle(code, int(code.split("-")[1]) / 100, 0.0) for code in codes]


def test_json_codes_reads_fenced_or_surrounded_json_and_says_when_there_is_none() -> None:
    fenced = 'Here:\n```json\n{"codes": ["jade-10-1-111111", "jade-50-1-222222"]}\n```'
    assert json_codes(fenced) == (["jade-10-1-111111", "jade-50-1-222222"], None)
    assert json_codes('答案 {"a": {"b": ["jade-90-1-333333"]}} 完') == (["jade-90-1-333333"], None)
    assert json_codes("jade-10-1-111111") == (None, "the answer holds no JSON object")


def test_code_problems_name_missing_codes_wrong_characters_and_strays() -> None:
    expected = _placed("jade-10-1-111111", "jade-50-1-222222", "jade-90-1-333333")
    assert code_problems(expected, ["jade-10-1-111111", "jade-50-1-222222", "jade-90-1-333333"]) == []
    assert code_problems(expected, ["jade-10-1-111111", "jade-90-1-333333"]) == [
        "the code at 50% depth, jade-50-1-222222, is missing"]
    assert code_problems(expected, ["jade-10-1-111111", "jade-50-1-222223", "jade-90-1-333333"]) == [
        "the code at 50% depth is wrong: jade-50-1-222223 instead of jade-50-1-222222 "
        "(character 16 is '3', expected '2')"]
    assert code_problems(expected[:1], ["jade-10-1-111111", "jade-90-1-333333"],
                         hidden=["jade-90-1-333333"]) == ["jade-90-1-333333 is another key's code, not one asked for"]
    assert character_differences("jade-1-1-111111", "jade-1-1-11111") == ["14 characters, expected 15"]


# --- progress --------------------------------------------------------------------------

async def test_waiting_writes_elapsed_seconds_until_done() -> None:
    lines: list[str] = []
    ticks = iter(range(0, 1000, 10))
    result = await waiting(asyncio.sleep(0.2, result="done"), label="recall", write=lines.append, every_s=0.01,
                           clock=lambda: float(next(ticks)))
    assert result == "done"
    assert lines and lines[0] == "recall: 10 s elapsed"


async def test_waiting_is_silent_for_a_quick_wait() -> None:
    lines: list[str] = []
    assert await waiting(asyncio.sleep(0, result=1), label="x", write=lines.append, every_s=60) == 1
    assert lines == []


# --- reference engine: retrieval and its defects ------------------------------------------

def _ask(question: str) -> str:
    return respond([{"role": "user", "content": question}], ThinkingMode(enabled=False)).text


def test_retrieval_rule_extracts_the_field_or_says_not_found() -> None:
    document = "<document>\n前文。备忘：密钥是 jade-50-1-259920。\n后文。\n</document>\n"
    assert _ask(document + "提取以 jade-50-1- 开头的密钥，只输出密钥。") == "jade-50-1-259920"
    assert _ask(document + "提取以 jade-30-2- 开头的密钥；没有就输出 NOT_FOUND。") == NOT_FOUND
    # Only the document is searched: a code in the question is not an answer.
    assert _ask("<document>无</document>\n以 jade-50-1- 开头的密钥，例如 jade-50-1-000000？") == NOT_FOUND


def test_retrieval_rule_lists_every_code_as_json_in_document_order() -> None:
    question = "<document>a jade-90-1-333333 b jade-10-1-111111 c</document>\n按顺序以 JSON 输出全部密钥。"
    assert json.loads(_ask(question)) == {"codes": ["jade-90-1-333333", "jade-10-1-111111"]}


def test_retrieval_rule_leaves_other_questions_to_other_rules() -> None:
    assert respond([{"role": "user", "content": "计算 19×37"}], ThinkingMode()).rule == "arithmetic"
    assert Conversation.from_messages([{"role": "user", "content": "x"}]).question == "x"


def test_drop_middle_loses_the_middle_of_long_messages_only() -> None:
    long = "A" * 3000 + "MIDDLE" + "B" * 3000
    dropped = drop_middle([{"role": "user", "content": long}, {"role": "user", "content": "short MIDDLE"}])
    assert "MIDDLE" not in dropped[0]["content"] and dropped[0]["content"].startswith("A")
    assert dropped[0]["content"].endswith("B") and dropped[1]["content"] == "short MIDDLE"
    parts = drop_middle([{"role": "user", "content": [{"type": "text", "text": long}]}])
    assert "MIDDLE" not in parts[0]["content"][0]["text"]


def test_corrupt_code_changes_one_character_of_the_first_code_only() -> None:
    text = '{"codes": ["jade-10-1-111119", "jade-50-1-222222"]}'
    assert corrupt_first_code(text) == '{"codes": ["jade-10-1-111110", "jade-50-1-222222"]}'
    assert corrupt_first_code("代号是 jade-628") == "代号是 jade-628", "short codenames are not recall codes"
