"""The reference model's word-problem rule: a stock changed by percentages and amounts.

Seed 001's question, 一个仓库有240件货物，先发走15%，又入库36件，现在有多少件？, is read
the way a careful reader would: the first quantity is the stock, then every later
clause with a number is an operation in order, its sign taken from its verb
(发走/卖出 remove, 入库/运来 add) and a percentage taken of the current stock. No
prompt is looked up; a question the rule cannot read fully gets no answer here.
"""

from __future__ import annotations

import re
from fractions import Fraction

from .conversation import Conversation

__all__ = ["solve_stock_problem", "word_problem_rule"]

_REMOVE = re.compile(r"发走|运走|卖出|卖掉|售出|出库|用掉|用去|拿走|送出|借出|减少|取走|"
                     r"\b(?:ship(?:s|ped)?\s+out|sold|sells?|removes?|removed|uses?\s+up|loses?|lost)\b",
                     re.IGNORECASE)
_ADD = re.compile(r"入库|运来|运进|买进|买来|购进|进货|收到|补充|增加|又来|加入|"
                  r"\b(?:receives?|received|adds?|added|buys?|bought|gets?|got)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*(%|％)?")
# A dot ends a clause unless it is a decimal point.
_CLAUSES = re.compile(r"(?:[，,；;。!！?？]|(?<!\d)\.(?!\d))\s*")
_ASKS_NOW = re.compile(r"现在|还剩|剩下|一共|\bhow many\b|\bnow\b|\bleft\b", re.IGNORECASE)


def solve_stock_problem(question: str) -> tuple[int | Fraction, list[str]] | None:
    """The final stock and the steps taken, or None when the question is not such a problem."""
    if not _ASKS_NOW.search(question):
        return None
    stock: Fraction | None = None
    steps: list[str] = []
    operations = 0
    for clause in _CLAUSES.split(question):
        numbers = _NUMBER.findall(clause)
        if not numbers:
            continue
        if len(numbers) > 1:
            return None  # two quantities in one clause: not a form this rule reads
        value, percent = Fraction(numbers[0][0]), bool(numbers[0][1])
        if stock is None:
            if percent:
                return None
            stock = value
            steps.append(f"start: {_show(stock)}")
            continue
        removes, adds = _REMOVE.search(clause), _ADD.search(clause)
        if bool(removes) == bool(adds):
            return None  # no verb, or both: the sign is unknown
        amount = stock * value / 100 if percent else value
        before = stock
        stock = stock - amount if removes else stock + amount
        operations += 1
        what = f"{_show(value)}% of {_show(before)} = {_show(amount)}" if percent else _show(amount)
        steps.append(f"{'-' if removes else '+'} {what} -> {_show(stock)}")
    if stock is None or operations == 0:
        return None
    return (int(stock) if stock.denominator == 1 else stock), steps


def _show(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def word_problem_rule(conv: Conversation, zh: bool) -> tuple[str, str] | None:
    solved = solve_stock_problem(conv.question)
    if solved is None:
        return None
    result, steps = solved
    answer = str(result) if isinstance(result, int) else f"{float(result):g}"
    if zh:
        return f"按顺序计算库存：{'；'.join(steps)}。结果是 {answer}。", answer
    return f"Working through the stock in order: {'; '.join(steps)}. The result is {answer}.", answer
