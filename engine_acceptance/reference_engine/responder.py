"""The reference "model": a few small, honest rules that turn a chat into an answer.

There is no table of the suite's prompts. The rules read the conversation the way a
tiny model would: read the images and videos it was given (vision.py), compute an
arithmetic expression, recall a codename given earlier, continue a text it is asked to
continue (with emoji), otherwise introduce itself in the language of the question. Each rule also writes a
short reasoning text (the reference model is a reasoning model), which is dropped
when the request turns thinking off. New rules are functions added to `RULES`.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .conventions import Convention
from .conversation import Conversation, ThinkingMode, has_cjk, shape_reasoning
from .media_facts import SeenMedia
from .vision import vision_rule
from .code_answers import code_rule
from .retrieval import retrieval_rule
from .tools import tool_history_rule, tool_results_rule
from .word_problems import word_problem_rule

__all__ = [
    "RULES",
    "Answer",
    "decide_thinking",
    "respond",
]


def thinking_asked_for(chat_template_kwargs: Mapping[str, Any] | None) -> bool:
    """Whether a request's switch turns thinking on (not merely leaves it at the default)."""
    kwargs = chat_template_kwargs or {}
    return (kwargs.get("enable_thinking") is True or kwargs.get("thinking") is True
            or kwargs.get("thinking_mode") in ("enabled", "adaptive"))


def decide_thinking(
    chat_template_kwargs: Mapping[str, Any] | None,
    top_level_effort: str | None,
    convention: Convention,
) -> ThinkingMode:
    """The one place that reads a request's thinking switches.

    Thinking is on by default. Any of the common "off" switches turns it off:
    `thinking_mode: "disabled"` (MiniMax-M3), `enable_thinking: false` (Qwen3 and
    SGLang docs), `thinking: false` (DeepSeek). The effort is read only where the
    imitated engine reads it.
    """
    kwargs = chat_template_kwargs or {}
    adaptive = kwargs.get("thinking_mode") == "adaptive"
    enabled = not (
        kwargs.get("thinking_mode") == "disabled"
        or kwargs.get("enable_thinking") is False
        or kwargs.get("thinking") is False
    )
    if convention.reasoning_effort_source == "chat_template_kwargs":
        effort = kwargs.get("reasoning_effort")
    else:
        effort = top_level_effort
    return ThinkingMode(enabled=enabled, effort=effort if isinstance(effort, str) else None, adaptive=adaptive)


@dataclass(frozen=True)
class Answer:
    """What the model would say: reasoning (None when thinking is off) and answer."""

    reasoning: str | None
    text: str
    rule: str


# (reasoning, answer) in Chinese and English; chosen by the question's language.
Said = tuple[str, str]
Rule = Callable[[Conversation, bool], "Said | None"]


# --- codename memory -----------------------------------------------------------

# Lookarounds, not \b: in "代号是jade-628" the CJK character counts as a word
# character and \b would not match.
CODENAME = re.compile(r"(?<![A-Za-z0-9])[a-z]+(?:-\d+)+(?![A-Za-z0-9])")
_REMEMBER = re.compile(r"记住|記住|remember|memori[sz]e", re.IGNORECASE)
_ASKS_CODENAME = re.compile(r"代号|代號|暗号|code\s*name|codeword|code word", re.IGNORECASE)


def _codename_rule(conv: Conversation, zh: bool) -> Said | None:
    question = conv.question
    if _REMEMBER.search(question) and CODENAME.search(question):
        code = CODENAME.findall(question)[-1]
        if zh:
            return f"用户给了代号 {code}，要我记住。只需确认。", "好的"
        return f"The user gives the codename {code} to remember. I only acknowledge it.", "OK"
    if not _ASKS_CODENAME.search(question):
        return None
    for text in reversed(conv.earlier):
        found = CODENAME.findall(text)
        if found:
            code = found[-1]
            if zh:
                return f"用户问之前给出的代号。回看对话，最近的代号是 {code}。", code
            return f"The user asks for the codename given earlier. The most recent one is {code}.", code
    if zh:
        return "用户问代号，但之前的对话里没有代号。", "之前没有给出代号。"
    return "The user asks for a codename, but none was given earlier.", "No codename was given."


# --- arithmetic ------------------------------------------------------------------

_FULLWIDTH = str.maketrans({"＋": "+", "－": "-", "＊": "*", "／": "/", "（": "(", "）": ")", "×": "*", "÷": "/", "·": "*"})
_EXPRESSION = re.compile(r"[\d(][\d\s.+\-*/xX()]*[\d)]")
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _evaluate(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("not arithmetic")


def _parse_expression(candidate: str) -> tuple[str, Fraction] | None:
    expr = re.sub(r"(?<=[\d)\s])[xX](?=[\s\d(])", "*", candidate).strip()
    # Trim parentheses the regex caught from surrounding prose, e.g. "(see 1+2".
    while expr:
        try:
            tree = ast.parse(expr, mode="eval").body
            if not isinstance(tree, ast.BinOp):
                return None  # a lone number is not a question
            return expr, _evaluate(tree)
        except (SyntaxError, ValueError, ZeroDivisionError):
            if expr.startswith("("):
                expr = expr[1:].strip()
            elif expr.endswith(")"):
                expr = expr[:-1].strip()
            else:
                return None
    return None


def _format_number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.6f}".rstrip("0").rstrip(".")


def find_arithmetic(text: str) -> tuple[str, str] | None:
    """The longest arithmetic expression in `text` and its value, if any."""
    # Codenames like jade-628-1 look like subtraction; they are not questions.
    text = CODENAME.sub(" ", text.translate(_FULLWIDTH))
    best: tuple[str, Fraction] | None = None
    for match in _EXPRESSION.finditer(text):
        parsed = _parse_expression(match.group())
        if parsed and (best is None or len(parsed[0]) > len(best[0])):
            best = parsed
    if best is None:
        return None
    return best[0], _format_number(best[1])


def _arithmetic_rule(conv: Conversation, zh: bool) -> Said | None:
    found = find_arithmetic(conv.question)
    if found is None:
        return None
    expr, value = found
    if zh:
        return f"用户要求计算 {expr}。逐步计算，结果是 {value}。", value
    return f"The user asks to compute {expr}. Working it out gives {value}.", value


# --- continuing a text -------------------------------------------------------------

_CONTINUE = re.compile(r"接着写|续写|继续写|continue (?:the|this) (?:text|story)", re.IGNORECASE)


def _continuation_rule(conv: Conversation, zh: bool) -> Said | None:
    # Continues in kind, emoji included: replies with 3- and 4-byte UTF-8 characters for the wire checks.
    if not _CONTINUE.search(conv.question):
        return None
    if zh:
        return ("用户要我接着写这段文字，我用同样的语气和表情符号续写。",
                "蝴蝶飞进了花丛 🦋🌸，小猫也跟着跳了进去 🐱，大家都笑了 😄。")
    return ("The user asks me to continue the text; I go on in the same tone, with emoji.",
            "The butterfly flew into the flowers 🦋🌸, the cat jumped after it 🐱, and everyone laughed 😄.")


# --- fallback --------------------------------------------------------------------

def _introduction_rule(conv: Conversation, zh: bool) -> Said:
    if zh:
        return "没有适用的计算或记忆规则，给出固定的自我介绍。", "我是 engine-acceptance 参考引擎。"
    return (
        "No arithmetic or memory rule applies, so I give the fixed introduction.",
        "I am the engine-acceptance reference engine.",
    )


# Tried in order; the first rule that answers wins. Codenames come before arithmetic
# because "jade-628-1" would otherwise read as a subtraction.
RULES: tuple[tuple[str, Rule], ...] = (
    # A question that comes with an image or video is about the media.
    ("vision", vision_rule),
    # A conversation that ends with tool results is answered from them.
    ("tool_results", tool_results_rule),
    # A follow-up about what a tool found earlier in the conversation is answered from that result.
    ("tool_history", tool_history_rule),
    # A question about a <document> is answered by searching it (long-context recall).
    ("retrieval", retrieval_rule),
    ("codename", _codename_rule),
    ("code", code_rule),
    ("word_problem", word_problem_rule),
    ("arithmetic", _arithmetic_rule),
    ("continuation", _continuation_rule),
    ("introduction", _introduction_rule),
)


# Rules whose questions need working out; in adaptive mode only these reason.
THOUGHTFUL_RULES = frozenset({"arithmetic", "word_problem", "code"})
def respond(messages: Sequence[Mapping[str, Any]], thinking: ThinkingMode,
            media: Sequence[SeenMedia] = ()) -> Answer:
    """The reasoning and answer the reference model gives to `messages` (and their decoded media)."""
    conv = Conversation.from_messages(messages, media)
    zh = has_cjk(conv.question)
    for name, rule in RULES:
        said = rule(conv, zh)
        if said is not None:
            reasoning, text = said
            return Answer(reasoning=shape_reasoning(reasoning, thinking, zh=zh, thoughtful=name in THOUGHTFUL_RULES),
                          text=text, rule=name)
    raise AssertionError("the introduction rule always answers")
