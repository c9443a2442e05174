"""The texts no description may match: the guard against records and refusals that over-reach.

An expected-failure record excuses the failures its ``failure.message`` pattern matches, and
an engine profile's refusal turns the answers its ``message`` pattern matches into "not
served". A pattern that matches too much silently excuses, or skips, what it never
described. The loaders (``profiles/expectations.py``, ``profiles/refusals.py``) try each
pattern on the texts here when they read it, and refuse it, naming the text it matched.

:data:`GENERIC_PROBLEMS` are real problems the suite reports, one line each from several
checks and of several kinds, as pytest prints them (``ExceptionInfo.exconly()``). A record's
pattern is matched against a problem's own words (:func:`problem_text`: no exception type in
front, no discovery lead), so it is refused when it matches

- a part that is taken off (``AssertionError: ``, ``Failed: ``, a discovery lead): it describes
  text that is no part of any problem, and would never match what it meant; or
- the words of two or more of these samples: problems of different checks and kinds have
  nothing in common but generic words (``Error``, ``HTTP``, ``.``), so such a pattern
  describes no one problem. A specific pattern matches one sample at most (the one of its
  own kind, when its kind is here).

:data:`GENERIC_ERROR_TEXTS` are what engines and the proxies in front of them answer when
something *fails* (a crashing tool parser, an image decoder, a 500 page, an empty body): a
refusal's message pattern that matches any of them would read a fault as a refusal, and is
refused.

Add a sample when a new kind of problem or fault text appears; a sample must stay a text
the suite or an engine really produces, so the guard refuses what would really over-reach.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine_acceptance.profiles.problem_text import split_problem

__all__ = ["GENERIC_ERROR_TEXTS", "GENERIC_PROBLEMS", "SampleProblem", "matches_generic_error",
           "record_pattern_over_reach"]


@dataclass(frozen=True)
class SampleProblem:
    """A real problem: the check that reports it, its kind, and its message as pytest prints it."""

    check: str
    kind: str
    message: str

    @property
    def words(self) -> str:
        """What a record's pattern is matched against: the message without type prefix and discovery lead."""
        return split_problem(self.message)[1]


_LEAD = ("image found broken by capability discovery (pure-red-512.png: image_url part dropped: prompt_tokens 51 with "
         "the image, 51 without (the engine answered 200 but did not read the image)); ")
_CHAT = "http://127.0.0.1:8000/v1/chat/completions"
_SERVER_ERROR_BODY = ('{"object": "error", "message": "Internal Server Error", "type": "InternalServerError", '
                      '"param": null, "code": 500}')

# One problem each from several checks, as the reference engine's defects made the checks word them.
GENERIC_PROBLEMS: tuple[SampleProblem, ...] = (
    SampleProblem("test_text.py::test_usage_is_present_and_total_is_prompt_plus_completion[non-streamed]",
                  "a usage problem",
                  "AssertionError: usage.total_tokens=152 but prompt_tokens + completion_tokens = 35 + 116 = 151"),
    SampleProblem("test_text.py::test_arithmetic_answer_is_correct[non-streamed]", "a wrong answer",
                  "AssertionError: expected 703 in the answer, got '19 × 37 = 693'"),
    SampleProblem("test_tools.py::test_tool_results_reach_the_final_answer[non-streamed]", "an HTTP 500 body",
                  f"AssertionError: non-streamed request to {_CHAT} failed: HTTP 500: {_SERVER_ERROR_BODY}"),
    SampleProblem("test_error_codes.py::test_invalid_request_is_refused_with_4xx[non-streamed-max-tokens-zero]",
                  "an invalid request accepted with 200",
                  "AssertionError: max_tokens 0: the engine accepted it: HTTP 200, content 'I am the "
                  "engine-acceptance reference engine.'"),
    SampleProblem("test_text.py::test_arithmetic_answer_is_correct[non-streamed]", "a timeout",
                  f"AssertionError: non-streamed request to {_CHAT} failed: timeout: total timeout: the engine "
                  "accepted the request and sent no response within 60s (--request-timeout 60s; a non-streamed reply "
                  "comes whole when generation ends: never answered, or generating for longer than that)"),
    SampleProblem("test_image.py::test_color_of_the_largest_area_is_named[non-streamed-bordered-red-512]",
                  "a discovery lead and a wrong colour",
                  f"AssertionError: {_LEAD}expected the largest area of bordered-red-512.png named red (红/紅/red); "
                  "the answer names no colour: '我是 engine-acceptance 参考引擎。'"),
    SampleProblem("test_text.py::test_models_endpoint_lists_the_served_model", "an SDK APIError",
                  "openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'Internal Server "
                  "Error', 'type': 'InternalServerError', 'param': None, 'code': 500}"),
    SampleProblem("test_corrupt_media.py::test_corrupt_media_is_rejected_with_4xx_and_an_error_body[truncated-png]",
                  "a 5xx for client data",
                  "AssertionError: corrupt sample truncated-png (the first half of bordered-red-512.png), sent as "
                  "image_url: server error on client data: HTTP 500, body {\"message\": \"Internal server error: "
                  "RuntimeError: messages[0].content[0]: cannot decode the image: OSError: image file is "
                  "truncated\", \"type\": \"InternalServerError\", \"param\": \"messages\", \"code\": 500}"),
    SampleProblem("test_streaming.py::test_stream_ends_with_done_and_a_final_finish_reason", "a stream framing problem",
                  "AssertionError: the stream ended without data: [DONE] after 14 chunk(s)"),
    SampleProblem("test_tool_accuracy.py::test_tool_call_arguments_fit_their_schemas_at_scale", "a pytest.fail",
                  "Failed: no tool call in 638 replies, 67 cases of which force a call (tool_choice required or "
                  "named): nothing to validate"),
    SampleProblem("test_throughput.py::test_fixed_length_load_is_served_in_full_and_passes_the_gate[128/128@4]",
                  "a throughput cell's failed requests",
                  "AssertionError: 128/128@4: 2/8 measured requests failed: http_500 x2 (e.g. HTTP 500: "
                  f"{_SERVER_ERROR_BODY})"),
    SampleProblem("test_thinking.py::test_disabled_mode_answers_in_content_without_reasoning[non-streamed]",
                  "a trial's failing sample",
                  "sample 2: thinking disabled, yet the reply carries reasoning in reasoning: '用户要求计算 19*37。'"),
    SampleProblem("test_recall.py::test_field_extraction_returns_the_asked_key_exactly[depth50-key1]",
                  "a recalled code that is wrong",
                  "asked for the key jade-50-1-…: the code at 50% depth is wrong: jade-50-1-259921 instead of "
                  "jade-50-1-259920 (character 16 is '1', expected '0')"),
)

# What engines and proxies answer when something fails (never a refusal of a capability).
GENERIC_ERROR_TEXTS: tuple[str, ...] = (
    "",
    "Internal Server Error",
    "Bad Request",
    "Forbidden",
    "Service Unavailable",
    # vLLM's words when its tool parser raises (reference_engine tool-parser-400 sends them).
    "Error in extracting tool call from response: JSONDecodeError: Expecting ',' delimiter: line 1 column 24 "
    "(char 23)",
    # Pillow's words for media it cannot read, as vLLM passes them on (reference_engine media-decode-400).
    "Failed to load image: cannot identify image file <_io.BytesIO object at 0x7f3a2c1b9e40>",
    "'NoneType' object has no attribute 'get'",
    "Expecting value: line 1 column 1 (char 0)",
    "upstream connect error or disconnect/reset before headers. reset reason: connection failure",
)


def record_pattern_over_reach(pattern: re.Pattern[str]) -> str | None:
    """Why a record's message pattern describes no one problem (the sample texts it matched), or None."""
    for sample in GENERIC_PROBLEMS:
        for part in split_problem(sample.message)[0]:
            if pattern.search(part):
                return (f"it matches {_shown(part)} in the sample problem {sample.kind} ({sample.check}), a part "
                        f"records are not matched against: a record is matched against the problem's own words, "
                        f"without the exception type pytest puts first and without the 'found broken by capability "
                        f"discovery (...); ' lead")
    hits = [sample for sample in GENERIC_PROBLEMS if pattern.search(sample.words)]
    if len(hits) >= 2:
        first, second = hits[:2]
        return (f"it matches {len(hits)} of the sample problems of different checks in engine_acceptance/profiles/"
                f"generic_texts.py, so it describes no one problem: {first.kind} ({first.check}: "
                f"{_shown(first.words)}) and {second.kind} ({second.check}: {_shown(second.words)})")
    return None


def matches_generic_error(pattern: re.Pattern[str]) -> str | None:
    """The first generic error text a refusal's message pattern matches (quoted), or None."""
    for text in GENERIC_ERROR_TEXTS:
        if pattern.search(text):
            return "an empty message" if not text else _shown(text)
    return None


def _shown(text: str, limit: int = 100) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
