"""Long-context recall (TEST-PLAN §8): codes hidden deep in a long prompt come back exactly.

Marker ``recall``: seed 001's 32K variant. About 31K tokens of filler (never more than
``--recall-tokens`` or the engine's context allow), three depths x three keys like
``jade-50-1-259920``, each asked for by an explicit field-extraction instruction
around ``<document>…</document>``, and a control asking for a key that is not there,
which must answer NOT_FOUND.

Marker ``recall_1m``: seed 000's million-token case. Three independent codes at 10%,
50% and 90% of the longest prompt the engine takes (1,048,576 tokens of context on
MiniMax-M3), returned as JSON. One streamed request; TTFT and E2E are reported.

Every reply must be whole (stream ended with [DONE], usage present, a valid finish
reason) and every code exact; a check reports each of these problems on its own, so a record
of one (a stream without usage) leaves the codes judged. The prompt's tokens are counted locally (--tokenizer)
or by the engine's /tokenize, and ``usage.prompt_tokens`` must match the engine's own
count of the same conversation (fixtures/prompts/recall.yaml declares the tolerance).
With neither, the prompt is built to a calibrated character budget: the answers are
checked all the same, the length is reported as approximate, and the accounting
checks skip with the reason. A model profile that declares more context than the
engine advertises fails the checks that need it, naming both numbers, unless
``--recall-tokens`` asks for a size the engine takes.
Recall runs alone: ``pytest -m recall`` / ``pytest -m recall_1m``, without -n.
``--recall-concurrency=N`` sends the ten field-extraction prompts N at a time (fixtures/recall.py).

A million-token check whose prompt fills less than 1,048,576 tokens of context (``--recall-tokens``,
or a model with a shorter context) says so in its result: its Allure title and the terminal
read "ran at 7,000 tokens, not 1,048,576", and the gate lists it under ``shortfalls``.

The answer checks are trials of kind ``recall`` (K = 1 by default: each sample is the whole
long prompt again). With K > 1 the first sample is the request already sent for the case
(the accounting check reads the same one) and the others send the prompt again, together.
The accounting checks stay one request: a miscount is a miscount.
"""

from __future__ import annotations

import allure
import pytest

from engine_acceptance.assertions import assert_no_problems, short
from engine_acceptance.recall.haystack import RecallBudget
from engine_acceptance.shortfalls import SIZE_PROPERTY, million_note
from engine_acceptance.wire.reassembly import Reply
from engine_acceptance.recall.answers import code_problems, codes_in, json_codes
from engine_acceptance.recall.cases import FIELD_KEYS, RecallRun, field_case, field_cases, field_prefix, million_case
from engine_acceptance.trials import current_sample

# Every check here is a coroutine: marked for pytest-asyncio, so no ini setting is needed.
pytestmark = [pytest.mark.asyncio]


def _key_id(case: tuple[float, int]) -> str:
    depth, key = case
    return f"depth{round(depth * 100)}-key{key}"


def _whole_reply(run: RecallRun, request: pytest.FixtureRequest, *,
                 usage_judged_apart: bool = False) -> tuple[Reply, list[str]]:
    """The reply and what is wrong with its stream; TTFT and E2E go into the report.

    A stream with a problem (no [DONE], no usage) still carries an answer to judge: the
    problems are returned, for the check to report beside its own, each on its own, so a
    record of one (llama.cpp's missing usage) leaves the others judged. `usage_judged_apart`:
    the accounting checks say themselves that usage is missing.
    """
    timing = run.timing()
    request.node.user_properties += [("ttft_s", timing["ttft_s"]), ("e2e_s", timing["e2e_s"]),
                                     ("prompt_tokens_built", run.haystack.tokens),
                                     ("prompt_tokens_exact", run.haystack.exact),
                                     ("prompt_tokens_usage", run.usage_prompt_tokens)]
    exchange = run.exchange
    if not exchange.ok or exchange.reply is None:
        pytest.fail(f"the recall request ({run.haystack.tokens_label} tokens) failed after "
                    f"{exchange.elapsed_s:.1f} s: {exchange.describe_failure()}")
    reply = exchange.reply
    problems = []
    if not reply.done_received:
        problems.append(f"the stream did not end with data: [DONE] ({'; '.join(reply.problems)})")
    if reply.usage is None and not usage_judged_apart:
        problems.append("the streamed reply has no usage although stream_options.include_usage was set")
    if not reply.finish_reason_is_valid:
        problems.append(f"finish_reason {reply.finish_reason!r} is not a valid value")
    return reply, problems


def _prompt_size(run: RecallRun) -> str:
    """``a 1,047,488-token prompt``, or for an estimated length what the engine counted."""
    if run.haystack.exact:
        return f"a {run.haystack.tokens:,}-token prompt"
    usage = run.usage_prompt_tokens
    counted = "" if usage is None else f", {usage:,} by the engine's usage.prompt_tokens"
    return f"a prompt of about {run.haystack.tokens:,} tokens{counted}"


def _skip_accounting_unless_countable(recall_runner, case) -> None:
    """The accounting needs a count of the prompt; without one only the answers can be checked."""
    recall_runner.check_context(case)
    if not recall_runner.exact:
        pytest.skip(recall_runner.no_count_reason)


def _cut_note(reply: Reply) -> str:
    return " (the reply was cut at max_tokens)" if reply.finish_reason == "length" else ""


def _say_million_size(budget: RecallBudget, request: pytest.FixtureRequest) -> None:
    """Below a million tokens the check is not the million-token check: its title and status say the size."""
    note = million_note(budget)
    if note is not None:
        allure.dynamic.title(f"{request.node.name}: {note}")
        request.node.user_properties.append((SIZE_PROPERTY, note))


async def _samples_of(recall_runner, first: RecallRun) -> RecallRun:
    """This sample's run: the first is the one already sent (shared with the accounting check), others resend."""
    number, _ = current_sample()
    run = first if number == 1 else await recall_runner.resend(first, number)
    recall_runner.attach(run)
    return run


@pytest.mark.recall
@pytest.mark.trials("recall")
@pytest.mark.parametrize("case", FIELD_KEYS, ids=_key_id)
async def test_field_extraction_returns_the_asked_key_exactly(recall_runner, recall_prompts, recall_tokens,
                                                              request, case, trials) -> None:
    prefix = field_prefix(recall_prompts, *case)
    first = await recall_runner.run(field_case(recall_prompts, recall_tokens, prefix),
                                    together=field_cases(recall_prompts, recall_tokens))

    async def sample() -> None:
        run = await _samples_of(recall_runner, first)
        reply, stream_problems = _whole_reply(run, request)
        expected = [needle for needle in run.haystack.needles if needle.code.startswith(prefix + "-")]
        problems = code_problems(expected, codes_in(reply.content), [n.code for n in run.haystack.needles])
        # Each problem names the key, so a record is matched in each one's own words.
        assert_no_problems(stream_problems + [f"asked for the key {prefix}-…: {problem}" for problem in problems],
                           detail=f"{_cut_note(reply)}; the answer was {short(reply.content)!r}")

    await trials(sample)


@pytest.mark.recall
@pytest.mark.trials("recall")
async def test_field_extraction_control_without_the_key_answers_not_found(recall_runner, recall_prompts,
                                                                          recall_tokens, request, trials) -> None:
    spec = recall_prompts["field_extraction"]
    first = await recall_runner.run(field_case(recall_prompts, recall_tokens, spec["control_prefix"]),
                                    together=field_cases(recall_prompts, recall_tokens))

    async def sample() -> None:
        run = await _samples_of(recall_runner, first)
        reply, problems = _whole_reply(run, request)
        if not (spec["not_found"] in reply.content and not codes_in(reply.content)):
            problems.append(f"the document has no key {spec['control_prefix']}-…, so the answer must be "
                            f"{spec['not_found']}; it was {short(reply.content)!r}{_cut_note(reply)}")
        assert_no_problems(problems)

    await trials(sample)


@pytest.mark.recall
async def test_field_extraction_prompt_tokens_match_the_engines_count(recall_runner, recall_prompts, recall_tokens,
                                                                      request) -> None:
    spec = recall_prompts["field_extraction"]
    case = field_case(recall_prompts, recall_tokens, spec["control_prefix"])
    _skip_accounting_unless_countable(recall_runner, case)
    run = await recall_runner.run(case, together=field_cases(recall_prompts, recall_tokens))
    recall_runner.attach(run)
    await _assert_prompt_tokens_match(recall_runner, run, recall_prompts, request)


@pytest.mark.recall_1m
@pytest.mark.trials("recall")
async def test_million_token_prompt_returns_the_three_codes_exactly_as_json(recall_runner, recall_prompts,
                                                                            recall_tokens, request, trials) -> None:
    _say_million_size(recall_tokens, request)
    first = await recall_runner.run(million_case(recall_prompts, recall_tokens))

    async def sample() -> None:
        run = await _samples_of(recall_runner, first)
        reply, problems = _whole_reply(run, request)
        found, why = json_codes(reply.content)
        if found is None:
            assert_no_problems(problems + [f"{why}{_cut_note(reply)}: {short(reply.content)!r}"])
        problems += [f"in {_prompt_size(run)}: {problem}" for problem in code_problems(run.haystack.needles, found)]
        assert_no_problems(problems, detail=f"; the answer was {short(reply.content)!r}")

    await trials(sample)


@pytest.mark.recall_1m
async def test_million_token_prompt_tokens_match_the_engines_count(recall_runner, recall_prompts, recall_tokens,
                                                                   request) -> None:
    _say_million_size(recall_tokens, request)
    case = million_case(recall_prompts, recall_tokens)
    _skip_accounting_unless_countable(recall_runner, case)
    run = await recall_runner.run(case)
    recall_runner.attach(run)
    await _assert_prompt_tokens_match(recall_runner, run, recall_prompts, request)


async def _assert_prompt_tokens_match(recall_runner, run, recall_prompts, request) -> None:
    """usage.prompt_tokens against the engine's own count, within the declared tolerance, beside the stream's problems."""
    # The accounting says itself when usage is missing ("no usage.prompt_tokens to compare").
    _, problems = _whole_reply(run, request, usage_judged_apart=True)
    declared = recall_prompts["accounting"]
    accounting = await recall_runner.accounting(run, tolerance=declared["tolerance_tokens"],
                                                template_tokens_max=declared["template_tokens_max"])
    request.node.user_properties.append(("prompt_token_difference", accounting.difference))
    assert_no_problems(problems + accounting.problems(), detail=f" [{accounting.describe()}]")
