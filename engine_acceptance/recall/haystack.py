"""Long-context prompts: natural filler, hidden codes, exact length in the model's tokens.

TEST-PLAN §8 and seeds 000/001: codes like ``jade-50-1-259920`` are hidden at chosen
depths of a long document and the model must return them exactly. This module builds
that prompt:

* :class:`FillerWriter` writes varied, natural Chinese prose from a seed (templates
  filled from word lists, paragraphs of 3-6 sentences), so the document is the same on
  every run yet no sentence is simply repeated and an engine cannot compress it away.
* :func:`make_code` draws an independent random code per needle.
* :func:`build_haystack` lays out ``before + document + after`` so the whole text is
  **exactly** ``target_tokens`` in the counter's tokens (a local ``tokenizer.json`` or
  the engine's ``/tokenize``, see :mod:`engine_acceptance.wire.token_count`), with each
  needle at the paragraph boundary nearest its depth.
* :func:`build_haystack_estimated` does the same to a character budget when nothing
  can count tokens: the length is then an estimate (calibrated with the engine's usage)
  and the needles sit at their depths in characters.
* :func:`recall_budget` decides how long the prompt may be: ``--recall-tokens``, else the
  model profile's context length, else the engine's advertised ``max_model_len``, else a
  conservative default; an engine advertising less than the profile declares is a
  shortfall the long-context checks report as a failure.

The text is counted in newline-ended pieces, in batches, so a million-token prompt
builds in a few seconds without holding one giant tokenizer ``Encoding``; run
``python -m engine_acceptance.recall.haystack --tokenizer tokenizer.json`` to measure
time and memory.

Whatever counts is handed in by the caller as a
:class:`~engine_acceptance.wire.token_count.TokenCounter`; this module never picks a
tokenizer itself, least of all by importing an engine's. The built-in reference engine's
tokenizer reaches it as data like any model's: a ``tokenizer.json`` exported with
``python -m engine_acceptance.reference_engine --export-tokenizer PATH`` (or served at
its ``GET /tokenizer.json``), or its ``/tokenize`` endpoint.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import resource
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine_acceptance.wire.redaction import describe_blob
from engine_acceptance.wire.token_count import CharacterCounter, TokenCounter, TokenEstimate
from engine_acceptance.errors import UsageError

__all__ = [
    "ANSWER_ROOM_TOKENS",
    "CODE_PATTERN",
    "DEFAULT_CONTEXT_TOKENS",
    "FillerWriter",
    "Haystack",
    "HaystackError",
    "MIN_LINE_TOKENS",
    "MIN_RECALL_TOKENS",
    "Needle",
    "PlacedNeedle",
    "RecallBudget",
    "TEMPLATE_ROOM_TOKENS",
    "build_haystack",
    "build_haystack_estimated",
    "make_code",
    "recall_budget",
]

# Room kept free of the prompt: the reply (reasoning and answer) and the chat
# template's own tokens. The prompt text is capped at max_model_len minus both.
ANSWER_ROOM_TOKENS = 1024
TEMPLATE_ROOM_TOKENS = 64
# Below this a "long-context" check would not be one: the instructions alone take ~150.
MIN_RECALL_TOKENS = 512
# The context assumed when neither the model profile nor the engine states one: small
# enough for any chat model served today.
DEFAULT_CONTEXT_TOKENS = 4096
# The filler between the instructions must be at least this long.
MIN_FILLER_TOKENS = 128
# A code: lowercase word, depth, key, six random digits (seed 001: jade-50-1-259920).
CODE_PATTERN = re.compile(r"(?<![A-Za-z0-9-])[a-z]+-\d{1,3}-\d{1,3}-\d{6}(?![A-Za-z0-9-])")
# Enough chunks that a needle lands within half a percent of its depth.
DEPTH_RESOLUTION_CHUNKS = 100
# The shortest line the builder cuts: shorter ones might merge with the line end before them.
MIN_LINE_TOKENS = 8
# Tried, alone and in pairs, when no prefix of the last line has exactly the tokens needed.
_PADS = ("。", "，", "、", "的", "了", "…", ".", ",", " ")


class HaystackError(UsageError):
    """The prompt cannot be built as asked (too short, or the tokenizer misbehaves)."""


# --- filler --------------------------------------------------------------------------

_PLACES = ("江城", "临川", "青石镇", "北湾", "云岭", "南浦", "白沙村", "东港", "柳溪", "石门", "桐乡", "枫桥")
_PEOPLE = ("老陈", "一位退休教师", "几名高中生", "渔民们", "值夜班的护士", "图书馆管理员", "一位年轻的工程师",
           "市场里的摊主", "考察队的队员", "邻居家的孩子", "镇上的邮递员", "一对刚搬来的夫妻")
_TIMES = ("清晨", "午后", "傍晚", "深夜", "周末", "雨季来临之前", "春节前后", "秋收时节", "入冬以后", "那年夏天",
          "开学第一周", "台风过境的第二天")
_ACTIONS = ("沿着河堤慢慢走了一圈", "把旧仓库整理成了阅览室", "记录下每天的气温和降水", "在集市上卖出了最后一筐橘子",
            "修好了村口那座木桥", "给远方的亲戚写了一封长信", "带着孩子们去山里辨认植物", "核对了一遍全年的账目",
            "在广场上排练一出地方戏", "把晒干的茶叶装进陶罐", "重新粉刷了学校的围墙", "在码头等一艘晚点的渡船")
_SCENES = ("街边的梧桐已经开始落叶", "空气里有淡淡的桂花香", "远处传来火车经过的声音", "河面上起了一层薄雾",
           "天色比预报的要晴朗", "路灯一盏接一盏亮了起来", "屋檐下挂着一排冰凌", "田里的稻子已经泛黄",
           "风从海上吹来，带着咸味", "山坡上的油菜花开得正盛", "巷子里飘出炒栗子的香味", "雨水顺着瓦片滴进石槽")
_OUTCOMES = ("大家都觉得这一天过得很充实", "没有人想到事情会这么顺利", "这件事后来被写进了地方志",
             "人们至今还常常提起", "这让他重新思考了自己的计划", "孩子们为此高兴了好几天", "结果比预想的要好一些",
             "不过真正的变化要等到第二年才显现", "这成了当地一个小小的传统", "许多细节已经记不太清了",
             "账本上只留下了寥寥几行字", "后来的人很难想象当时的情形")
_TOPICS = ("水稻种植", "城市交通", "传统手工艺", "气象观测", "社区图书馆", "港口贸易", "山区教育", "古建筑修缮",
           "地方饮食", "候鸟迁徙", "河道治理", "民间音乐")
_INSTITUTIONS = ("县档案馆", "市统计局", "一家地方报社", "农业技术推广站", "大学的研究小组", "文化馆", "气象站", "商会")
_TRENDS = ("增长", "下降", "回升", "放缓")
_NOT_HARD = ("技术", "资金", "场地", "人手", "天气", "工具")
_HARD = ("年复一年的坚持", "找到愿意学的年轻人", "和邻里之间的沟通", "把每一个细节记下来", "熬过最冷的那几个月",
         "让外面的人也看得懂")
_TEMPLATES: tuple[Callable[[random.Random], str], ...] = (
    lambda r: f"{r.choice(_TIMES)}，{r.choice(_PLACES)}的{r.choice(_PEOPLE)}{r.choice(_ACTIONS)}。",
    lambda r: f"在{r.choice(_PLACES)}，{r.choice(_SCENES)}，{r.choice(_OUTCOMES)}。",
    lambda r: (f"据{r.choice(_INSTITUTIONS)}的记录，{r.choice(_PLACES)}的{r.choice(_TOPICS)}在过去"
               f"{r.randint(3, 30)}年里{r.choice(_TRENDS)}了大约{r.randint(2, 60)}%。"),
    lambda r: (f"{r.choice(_PEOPLE)}说，{r.choice(_TOPICS)}最难的地方不在{r.choice(_NOT_HARD)}，"
               f"而在于{r.choice(_HARD)}。"),
    lambda r: "从{}到{}要走{}公里的山路，{}。".format(*r.sample(_PLACES, 2), r.randint(4, 90), r.choice(_SCENES)),
    lambda r: (f"关于{r.choice(_TOPICS)}，{r.choice(_INSTITUTIONS)}在{r.randint(1952, 2019)}年出版过一本小册子，"
               f"{r.choice(_OUTCOMES)}。"),
    lambda r: f"{r.choice(_TIMES)}，{r.choice(_SCENES)}，{r.choice(_PEOPLE)}{r.choice(_ACTIONS)}。",
    lambda r: f"{r.choice(_PEOPLE)}在{r.choice(_TIMES)}的笔记里写道：“{r.choice(_SCENES)}。”",
    lambda r: f"那段时间，{r.choice(_PLACES)}一共举办了{r.randint(2, 40)}场关于{r.choice(_TOPICS)}的讲座。",
    lambda r: f"{r.choice(_PLACES)}的{r.choice(_TOPICS)}在附近一带小有名气，{r.choice(_OUTCOMES)}。",
    lambda r: f"{r.choice(_PEOPLE)}{r.choice(_ACTIONS)}，又在{r.choice(_TIMES)}回到了{r.choice(_PLACES)}。",
    lambda r: f"有人问起{r.choice(_TOPICS)}的来历，{r.choice(_PEOPLE)}只是笑了笑，说{r.choice(_OUTCOMES)}。",
)


class FillerWriter:
    """Deterministic, varied prose: the same seed always writes the same paragraphs."""

    def __init__(self, seed: int | str) -> None:
        # A string seed is hashed (sha512) by random, so it is stable across runs and platforms.
        self._rng = random.Random(f"filler:{seed}")

    def sentence(self) -> str:
        return self._rng.choice(_TEMPLATES)(self._rng)

    def paragraph(self) -> str:
        """3-6 sentences and a line end (pieces are counted apart at line ends)."""
        return "".join(self.sentence() for _ in range(self._rng.randint(3, 6))) + "\n"

    def paragraphs(self, chars: float) -> list[str]:
        """Paragraphs totalling at least ``chars`` characters."""
        out: list[str] = []
        written = 0
        while written < chars:
            text = self.paragraph()
            out.append(text)
            written += len(text)
        return out


# --- needles ---------------------------------------------------------------------------

def make_code(word: str, depth: float, key: int, seed: int | str) -> str:
    """An independent random code for one needle, e.g. ``jade-50-1-259920``."""
    rng = random.Random(f"code:{seed}:{word}:{depth}:{key}")
    return f"{word}-{round(depth * 100)}-{key}-{rng.randrange(100_000, 1_000_000)}"


@dataclass(frozen=True)
class Needle:
    """A code to hide, the depth (0-1 of the document) to hide it at, and its sentence."""

    code: str
    depth: float
    sentence: str

    @property
    def prefix(self) -> str:
        """The code without its random digits: the field name a question asks for."""
        return self.code.rsplit("-", 1)[0]

    @property
    def line(self) -> str:
        return self.sentence.rstrip("\n") + "\n"


@dataclass(frozen=True)
class PlacedNeedle:
    code: str
    depth: float
    actual_depth: float

    @property
    def depth_label(self) -> str:
        return f"{round(self.depth * 100)}%"


@dataclass(frozen=True)
class Haystack:
    """A built prompt text and what is hidden in it."""

    text: str
    tokens: int
    document_tokens: int
    needles: tuple[PlacedNeedle, ...]
    counted_with: str
    seed: int | str
    build_s: float
    verified_whole: bool
    # False when nothing could count tokens: ``tokens`` is then an estimate from characters.
    exact: bool = True

    @property
    def tokens_label(self) -> str:
        """``4,096`` when counted, ``about 4,096`` when estimated."""
        return f"{self.tokens:,}" if self.exact else f"about {self.tokens:,}"

    def summary(self) -> dict[str, Any]:
        """For the report: everything but the text itself (a length and hash stand in)."""
        counted_as = "the whole text at once" if self.verified_whole else "newline-ended pieces"
        return {
            "tokens": self.tokens,
            "tokens_exact": self.exact,
            "characters": len(self.text),
            "document_tokens": self.document_tokens,
            "text": describe_blob(self.text),
            "needles": [{"code": n.code, "depth": n.depth, "actual_depth": round(n.actual_depth, 4)}
                        for n in self.needles],
            "counted_with": self.counted_with,
            "counted_as": counted_as if self.exact else "characters; depths are depths in characters",
            "seed": self.seed,
            "build_s": round(self.build_s, 3),
        }


# --- budget ----------------------------------------------------------------------------

@dataclass(frozen=True)
class RecallBudget:
    """How many tokens the recall prompt text gets, and why.

    ``shortfall`` is set when the model profile declares a longer context than the
    engine advertises (and no ``--recall-tokens`` asked for less): ``tokens`` is then
    what the engine takes, and the checks that need more fail with the message.
    """

    tokens: int
    explanation: str
    shortfall: str | None = None
    # The context the model has, whatever the prompt's size: the profile's ``context_length``, else the
    # engine's ``max_model_len`` (None: neither says), and who says so, as a shortfall words it.
    context: int | None = None
    context_by: str = ""


def recall_budget(*, requested: int | None, profile_context: int | None, max_model_len: int | None,
                  profile_name: str = "model") -> RecallBudget:
    """The prompt length for recall checks, with the context it is measured against (see :func:`_prompt_budget`)."""
    budget = _prompt_budget(requested=requested, profile_context=profile_context, max_model_len=max_model_len,
                            profile_name=profile_name)
    if profile_context is not None:
        return dataclasses.replace(budget, context=profile_context, context_by="the model declares")
    if max_model_len is not None:
        return dataclasses.replace(budget, context=max_model_len, context_by="the engine advertises (max_model_len)")
    return budget


def _prompt_budget(*, requested: int | None, profile_context: int | None, max_model_len: int | None,
                   profile_name: str) -> RecallBudget:
    """The prompt length for recall checks.

    An explicit ``requested`` length, if the engine's reported ``max_model_len`` takes
    it (else a ValueError). Otherwise the context minus room for the answer and the chat
    template, the context being the profile's ``context_length``, else the engine's
    ``max_model_len``, else :data:`DEFAULT_CONTEXT_TOKENS` (each said in the explanation).
    A profile context longer than the engine's is a shortfall: reported, never silently
    shrunk into a pass.
    """
    room = ANSWER_ROOM_TOKENS + TEMPLATE_ROOM_TOKENS
    cap = None if max_model_len is None else max_model_len - room
    if requested is not None:
        if cap is not None and requested > cap:
            raise ValueError(
                f"{requested} tokens do not fit: the engine reports max_model_len {max_model_len}, minus "
                f"{ANSWER_ROOM_TOKENS} for the answer and {TEMPLATE_ROOM_TOKENS} for the chat template "
                f"leaves {cap}")
        if requested < MIN_RECALL_TOKENS:
            raise ValueError(f"{requested} tokens is below the minimum of {MIN_RECALL_TOKENS}")
        return RecallBudget(requested, f"{requested} tokens from --recall-tokens")
    if profile_context is None and cap is not None:
        tokens = cap
        why = (f"the engine's advertised max_model_len {max_model_len} minus {room} for answer and template; "
               f"model profile {profile_name!r} declares no context length")
    elif profile_context is None:
        tokens = DEFAULT_CONTEXT_TOKENS - room
        why = (f"a conservative {DEFAULT_CONTEXT_TOKENS}-token context minus {room} for answer and template: "
               f"model profile {profile_name!r} declares no context length and the engine reports no "
               f"max_model_len")
    else:
        tokens = profile_context - room
        why = f"profile {profile_name!r} context length {profile_context} minus {room} for answer and template"
        if cap is not None and max_model_len is not None and max_model_len < profile_context:
            why = f"capped by the engine's max_model_len {max_model_len} minus {room} for answer and template " \
                  f"(profile {profile_name!r} says {profile_context})"
            shortfall = (f"model profile {profile_name} declares {profile_context:,} tokens of context; "
                         f"the engine advertises {max_model_len:,} (max_model_len)")
            return RecallBudget(max(cap, 0), why, shortfall)
        if max_model_len is None:
            why += "; the engine reports no max_model_len"
    if tokens < MIN_RECALL_TOKENS:
        raise ValueError(f"only {tokens} tokens are available ({why}), below the minimum of {MIN_RECALL_TOKENS}")
    return RecallBudget(tokens, why)


# --- building --------------------------------------------------------------------------

Progress = Callable[[str], None]


@dataclass
class _Filler:
    """Filler chunks (lists of paragraphs) with their token counts."""

    chunks: list[list[str]] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts)

    def add(self, paragraphs: list[str], chunk_chars: int, counter: TokenCounter) -> None:
        new: list[list[str]] = []
        current: list[str] = []
        size = 0
        for paragraph in paragraphs:
            current.append(paragraph)
            size += len(paragraph)
            if size >= chunk_chars:
                new.append(current)
                current, size = [], 0
        if current:
            new.append(current)
        self.chunks += new
        self.counts += counter.count_many(["".join(chunk) for chunk in new])


def build_haystack(*, counter: TokenCounter, target_tokens: int, before: str, after: str,
                   needles: Sequence[Needle], seed: int | str, verify_whole: bool | None = None,
                   progress: Progress | None = None) -> Haystack:
    """``before + document + after``, exactly ``target_tokens`` long in ``counter``'s tokens.

    ``before`` must end with a line end (it introduces the document), ``after`` follows
    the document. The document is filler with each needle's sentence at the paragraph
    boundary nearest its depth. ``verify_whole`` counts the finished text in one piece
    and corrects the last paragraph if piecewise counting was off (default: for server
    counters, and for local ones up to 128K tokens, where it costs little memory).
    """
    started = time.perf_counter()
    note = progress or (lambda _message: None)
    if not before.endswith("\n"):
        raise HaystackError("the text before the document must end with a line end")
    writer = FillerWriter(seed)
    fixed = sum(counter.count_many([before, after, *(n.line for n in needles)]))
    budget = target_tokens - fixed
    if budget < MIN_FILLER_TOKENS:
        raise HaystackError(f"{target_tokens} tokens is too short: the instructions and needles alone take {fixed}")

    # Tokens per character, measured on the start of the filler itself.
    sample = writer.paragraphs(chars=2000)
    sample_chars = sum(map(len, sample))
    ratio = counter.count("".join(sample)) / sample_chars
    estimated_chars = budget / ratio
    chunk_chars = max(32, min(counter.preferred_chunk_chars, int(estimated_chars / DEPTH_RESOLUTION_CHUNKS)))
    note(f"writing about {estimated_chars:,.0f} characters of filler ({ratio:.2f} tokens per character)")

    filler = _Filler()
    # A little over the estimate, so usually one counting pass suffices.
    filler.add(sample + writer.paragraphs(estimated_chars * 1.03 + 200 - sample_chars), chunk_chars, counter)
    while filler.total < budget:
        filler.add(writer.paragraphs((budget - filler.total) / ratio * 1.05 + 200), chunk_chars, counter)
    _cut(filler, budget, counter)
    last_source = writer.paragraph()  # spare text in case the last line must grow

    placed, text, document_tokens = _assemble(filler, before, after, needles, budget, counter)
    tokens = fixed + filler.total
    verified = verify_whole if verify_whole is not None else (counter.kind == "server" or target_tokens <= 131072)
    if verified:
        for _attempt in range(3):
            whole = counter.count(text)
            if whole == target_tokens:
                break
            note(f"the whole text counts {whole} tokens, {target_tokens} wanted: correcting the last line")
            _stretch_last_line(filler, target_tokens - whole, counter, last_source)
            placed, text, document_tokens = _assemble(filler, before, after, needles, budget, counter)
        else:
            raise HaystackError(
                f"the tokenizer merges across line ends: pieces add up to {target_tokens} tokens but the whole "
                f"text counts {whole} ({counter.describe()})")
        tokens = target_tokens
    return Haystack(text=text, tokens=tokens, document_tokens=document_tokens, needles=tuple(placed),
                    counted_with=counter.describe(), seed=seed, build_s=time.perf_counter() - started,
                    verified_whole=verified)


def build_haystack_estimated(*, estimate: TokenEstimate, target_tokens: int, before: str, after: str,
                             needles: Sequence[Needle], seed: int | str,
                             progress: Progress | None = None) -> Haystack:
    """Like :func:`build_haystack`, when nothing can count tokens: exactly the characters
    ``estimate`` expects to make ``target_tokens`` tokens, the needles at their depths in
    characters. The result's ``tokens`` is the length asked for, an estimate (``exact`` is False).

    ``estimate`` should come from samples holding these same ``before``, ``after`` and
    needles around more or less filler: its intercept then carries their tokens.
    """
    chars = estimate.chars_for(target_tokens - estimate.added_tokens)
    if progress is not None:
        progress(f"no tokenizer: {chars:,} characters at {estimate.rate()}")
    # The builder's own notes speak of its counter's units, here characters: not passed on.
    built = build_haystack(counter=CharacterCounter(), target_tokens=chars, before=before, after=after,
                           needles=needles, seed=seed, verify_whole=True)
    return dataclasses.replace(
        built, tokens=target_tokens, document_tokens=estimate.tokens_in(built.document_tokens),
        counted_with=f"estimate: {len(built.text):,} characters at {estimate.describe()}", exact=False)


def _cut(filler: _Filler, budget: int, counter: TokenCounter) -> None:
    """Drop and trim filler at the end so it is exactly ``budget`` tokens."""
    total = 0
    for index, count in enumerate(filler.counts):
        if total + count >= budget:
            break
        total += count
    paragraphs = filler.chunks[index]
    # Too little left for a real line: take the chunk before into the cut as well.
    while budget - total < MIN_LINE_TOKENS and index > 0:
        index -= 1
        total -= filler.counts[index]
        paragraphs = filler.chunks[index] + paragraphs
    del filler.chunks[index + 1:], filler.counts[index + 1:]
    filler.chunks[index] = _fit_paragraphs(paragraphs, budget - total, counter)
    filler.counts[index] = budget - total


def _fit_paragraphs(paragraphs: list[str], want: int, counter: TokenCounter) -> list[str]:
    """Whole paragraphs and one trimmed paragraph totalling exactly ``want`` tokens."""
    # The largest prefix of whole paragraphs that still fits (counts grow with the prefix).
    low, high, low_count = 0, len(paragraphs), 0
    while high - low > 1:
        middle = (low + high) // 2
        count = counter.count("".join(paragraphs[:middle]))
        if count <= want:
            low, low_count = middle, count
        else:
            high = middle
    if low_count == want:
        return paragraphs[:low]
    source = paragraphs[low]
    if want - low_count < MIN_LINE_TOKENS and low > 0:
        # An empty or near-empty last line could merge with the line end before it ("\n\n"
        # is one token in Gemma's vocabulary): cut one longer line from two paragraphs.
        low -= 1
        source = paragraphs[low].rstrip("\n") + source
        low_count = counter.count("".join(paragraphs[:low])) if low else 0
    return paragraphs[:low] + [_trim_line(source, want - low_count, counter)]


def _trim_line(paragraph: str, want: int, counter: TokenCounter) -> str:
    """A prefix of ``paragraph`` plus a line end that is exactly ``want`` tokens."""
    body = paragraph.rstrip("\n")
    if want < MIN_LINE_TOKENS:
        raise HaystackError(f"a line of only {want} tokens would not be counted reliably")
    low, high = 0, len(body)
    if counter.count(body + "\n") <= want:
        low = high
    else:
        while high - low > 1:
            middle = (low + high) // 2
            if counter.count(body[:middle] + "\n") <= want:
                low = middle
            else:
                high = middle
    candidates = [body[:low] + "\n"]
    # A prefix can jump past `want` (a multi-token character, a merge): pad instead.
    for cut in (low, max(low - 1, 1)):
        candidates += [body[:cut] + pad + "\n" for pad in _PADS]
        candidates += [body[:cut] + a + b + "\n" for a in _PADS for b in _PADS]
    counts = counter.count_many(candidates)
    for candidate, count in zip(candidates, counts):
        if count == want:
            return candidate
    raise HaystackError(f"no line of exactly {want} tokens could be cut from the filler ({counter.describe()})")


def _stretch_last_line(filler: _Filler, delta: int, counter: TokenCounter, spare: str) -> None:
    """Grow or shrink the last filler paragraph by ``delta`` tokens."""
    chunk = filler.chunks[-1]
    line = chunk[-1]
    want = counter.count(line) + delta
    if want < MIN_LINE_TOKENS:
        raise HaystackError(f"cannot remove {-delta} tokens from the last line ({counter.describe()})")
    chunk[-1] = _trim_line(line.rstrip("\n") + spare, want, counter)
    filler.counts[-1] += delta


def _assemble(filler: _Filler, before: str, after: str, needles: Sequence[Needle], budget: int,
              counter: TokenCounter) -> tuple[list[PlacedNeedle], str, int]:
    """Join the parts, with the needles at the chunk boundaries nearest their depths."""
    boundaries = [0]
    for count in filler.counts:
        boundaries.append(boundaries[-1] + count)
    needle_counts = counter.count_many([n.line for n in needles])
    document_tokens = budget + sum(needle_counts)
    at: dict[int, list[tuple[Needle, int]]] = {}
    for needle, count in zip(needles, needle_counts):
        goal = needle.depth * budget
        index = min(range(len(boundaries)), key=lambda i: abs(boundaries[i] - goal))
        at.setdefault(index, []).append((needle, count))
    parts = [before]
    placed: list[PlacedNeedle] = []
    inserted = 0
    for index in range(len(filler.chunks) + 1):
        for needle, count in at.get(index, []):
            placed.append(PlacedNeedle(needle.code, needle.depth, (boundaries[index] + inserted) / document_tokens))
            parts.append(needle.line)
            inserted += count
        if index < len(filler.chunks):
            parts.extend(filler.chunks[index])
    parts.append(after)
    return placed, "".join(parts), document_tokens


# --- measuring -------------------------------------------------------------------------

def _status_mb(field: str) -> float | None:
    """A memory figure of this process from /proc (Linux), in MB; None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Start the peak-RSS mark (VmHWM) afresh, so loading the tokenizer does not count."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as clear:
            clear.write("5")
        return True
    except OSError:
        return False


def main(argv: Sequence[str] | None = None) -> int:
    """Build the million-token recall prompt and print its build time and peak memory."""

    from engine_acceptance.resources import read_yaml, suite_path
    from engine_acceptance.wire.token_count import LocalTokenCounter, TokenCountError

    parser = argparse.ArgumentParser(prog="python -m engine_acceptance.recall.haystack",
                                     description="Build the recall_1m prompt and measure time and peak memory")
    parser.add_argument("--tokens", type=int, default=1_048_576 - ANSWER_ROOM_TOKENS - TEMPLATE_ROOM_TOKENS,
                        help="Prompt text length in tokens (default: a 1,048,576 context minus answer room)")
    parser.add_argument("--tokenizer", required=True, metavar="PATH",
                        help="The tokenizer.json to count with; the built-in reference engine's comes from "
                             "python -m engine_acceptance.reference_engine --export-tokenizer PATH")
    args = parser.parse_args(argv)
    try:
        counter = LocalTokenCounter.from_file(args.tokenizer)
    except TokenCountError as exc:
        parser.error(f"--tokenizer: {exc}")
    prompts = read_yaml(suite_path("fixtures", "prompts", "recall.yaml"))
    case = prompts["million"]
    needles = [Needle(code, depth, prompts["needle"].format(code=code))
               for depth in case["depths"]
               for code in [make_code(prompts["code_word"], depth, 1, prompts["seed"])]]
    before = case["preamble"] + "\n<document>\n"
    after = "</document>\n" + case["question"].format(count=len(needles))
    loading_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    resident = _status_mb("VmRSS")
    fresh = _reset_peak_rss()
    haystack = build_haystack(counter=counter, target_tokens=args.tokens, before=before, after=after,
                              needles=needles, seed=prompts["seed"])
    build_peak = _status_mb("VmHWM") if fresh else None
    print(f"built {haystack.tokens:,} tokens ({len(haystack.text):,} characters) in {haystack.build_s:.2f} s "
          f"with {haystack.counted_with}")
    if build_peak is not None and resident is not None:
        print(f"peak RSS during the build {build_peak:.0f} MB: {resident:.0f} MB resident before it "
              f"+{build_peak - resident:.0f} MB (loading imports and the tokenizer peaked at {loading_peak:.0f} MB)")
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS of the process {peak:.0f} MB (this platform cannot tell the build's own peak)")
    for needle in haystack.needles:
        print(f"  {needle.code} at {needle.actual_depth:.2%} (asked {needle.depth:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
