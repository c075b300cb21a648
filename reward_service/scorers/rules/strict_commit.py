"""Rule 1 of the ``math`` profile (``math_strict.py``): **one committed answer** (veto).

A response earns the reward only if it commits to one
final answer: more than one distinct candidate answer is a hedge (``hedged: ...``).
Checked last, with rule 5, on an answer still correct after the value rules.

* ``\\boxed{}`` answers that are not all equal (``\\boxed{7} ... wait ... \\boxed{8}``),
  when the answer the library took is a box. Boxes written side by side as one list
  (``\\boxed{2}, \\boxed{3}``; joined only by commas, ``and``/``or``, spaces, ``$``) form
  one answer, which the library compares as a set; repeating the same answer
  (``\\boxed{1/2} = \\boxed{0.5}``) is fine; empty and placeholder boxes
  (``\\boxed{\\phantom{2}}`` quoted from a problem) are not answers. Not applied when the
  answer came from an explicit ``The final answer is ...`` (earlier boxes are then
  intermediate results), nor when the gold is several values (``(3, 3), (1, 1)``: a
  multi-part answer may box each part).
* the candidates of the response's *closing part* (``hedge.py``, which says exactly where
  it starts and why): from the clause of the final commitment (``answer is``, a box, or
  the bare final value) to the end, taking in what it is offered as an alternative to
  (``Or maybe 6.``) and preceding sentences that are nothing but an answer (``Maybe 6?
  The final answer is 5.``). Candidates: values after ``answer is``/``Answer:``/``####``,
  values after an alternative word (or, maybe, possibly, either, alternatively, actually,
  could also be, might be, ...), a value before ``or`` that leads to another value, a
  value joined to the answer by ``and``. ``The final answer is 5. Or maybe 6.``,
  ``Either 7 or 8.``, ``5 (or 6)``, ``2 and 3`` are refused; ``0.5 or \\frac{1}{2}`` (one
  value), reasoning before the final commitment (``x = 5 or x = 6; checking, x = 6
  fails. So the answer is 5.``) and a self-correction that ends on one value are not.
  Candidates are compared with the answer by ``verify``; an equation still to solve
  (``-8y = 392, or y = -49``) is not a candidate value.

A gold that is itself several values (``2, 3``; an interval; a set) still matches an
answer that lists them all: the library compares those as sets, and values inside the
final answer's own span are that answer, not other candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import sympy

from reward_service.scorers.base import clip
from reward_service.scorers.math_verify_scorer import verify_default
from reward_service.scorers.rules import hedge, readings
from reward_service.scorers.rules.number_words import WORDS, as_latex
from reward_service.scorers.rules.pattern_memo import per_pattern
from reward_service.scorers.rules.strict_read import BOX, SPACES, boxed_answers, parse_boxed

__all__ = ["MATH_VALUE", "answer_span", "hedged", "per_reading"]

_BOX_JOIN = re.compile(
    r"^(?:\s|\$|,|;|\\[,;:!]|\\quad|\\qquad|\\text\{\s*(?:,?\s*(?:and|or)\s*)\}|\band\b|\bor\b)*$"
)
# One value as a response writes it (hedge.py's candidates): a box, inline or display math,
# bold, or a plain number / fraction / root / multiple of pi; an optional "x =" before it; no
# operator after it ("3+5=8" is work, not a value). The first non-empty group is the value.
_VALUE_FORMS = (
    r"(?:[a-zA-Z]\s*+=\s*+)?+(?:"
    r"\\(?:boxed|fbox)\s*+\{((?:[^{}]++|\{(?:[^{}]++|\{[^{}]*+\})*+\})*+)\}"
    r"|\$\$?([^$]{1,200}?)\$\$?"
    r"|\\\((.{1,200}?)\\\)|\\\[(.{1,200}?)\\\]"
    r"|\*\*([^*]{0,100}?\d[^*]{0,100}?)\*\*"
    r"|((?:[-+]\s?)?+(?:\d*+\\[dt]?frac\{[^{}]*\}\{[^{}]*\}|\\sqrt\{[^{}]*\}|\d*\\pi"
    r"|(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)|\.\d+)(?:\s*/\s*\d+)?(?:\s*\\?%)?)"
    r"{words}"
    r")(?!\s*(?:[-+*/^=<>]|\\(?:cdot|times|div|pm|mp|le|ge|leq|geq|neq|ne)\b))"
)
MATH_VALUE = re.compile(_VALUE_FORMS.replace("{words}", ""), re.DOTALL)
# a character every match of MATH_VALUE holds (bold holds a digit): hedge.candidates skips a
# closing part where none stands outside the answer
MATH_VALUE_HOLDS = re.compile(r"[\d\\$]")
# the same, and a number in words (six, thirty-one, one half: number_words.py): matched where
# a value is expected (after a lead), never searched for through a whole text (the word
# alternative tried at every position would cost more than the rule's time budget)
MATH_VALUE_WORDS = re.compile(_VALUE_FORMS.replace("{words}", "|(" + WORDS + ")"), re.DOTALL)


_PLACEHOLDER = re.compile(
    r"\\[hv]?phantom\{[^{}]*\}|\\square|\\blacksquare|\\Box|\\underline\{\s*\}|\\quad|\\qquad|"
    r"\\text\{\s*\}|\\[ ,;:!]|[\s?_.]"
)


def _box_groups(text: str) -> list[list[str]]:
    """Boxed answers grouped: boxes joined only by separators form one (list) answer.
    Empty boxes and placeholders (``\\boxed{\\phantom{2}}`` quoted from the problem) are not
    answers."""
    groups: list[list[str]] = []
    last_end = -1
    for start, end, content in boxed_answers(text):
        if not _PLACEHOLDER.sub("", content):
            continue
        if groups and _BOX_JOIN.match(text[last_end:start]):
            groups[-1].append(content)
        else:
            groups.append([content])
        last_end = end
    return groups


def _norm(latex: str) -> str:
    s = SPACES.sub("", latex).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return s.rstrip(".")


def _distinct_boxed(text: str) -> list[str] | None:
    """The distinct boxed answers when there are several that differ, else None."""
    groups = _box_groups(text)
    if len(groups) < 2:
        return None
    keys = {tuple(_norm(c) for c in g): g for g in groups}
    if len(keys) < 2:
        return None
    final = tuple(groups[-1])
    final_parsed = parse_boxed(final)
    different = [
        g for k, g in keys.items()
        if k != tuple(_norm(c) for c in final)
        and not verify_default(final_parsed, parse_boxed(tuple(g)))
    ]
    if not different:
        return None
    return [", ".join(g) for g in [*different, list(final)]]


_PHRASE = re.compile(r"answer", re.IGNORECASE)


# the last match answer_span read, and its span: the rules of one item ask for the same match
# several times (rule 1, rule 9), and reading its 40 named groups is most of the cost. The
# match is held, so its identity cannot be reused while it is here.
_LAST_SPAN: list[Any] = [None, (0, 0, 0)]


def answer_span(where: re.Match[str]) -> tuple[int, int, int]:
    """(commitment start, answer start, answer end) of the library's final answer. The answer
    is what its named groups matched (a phrase pattern may span an earlier statement: ``answer
    is 32. The answer is $\\frac58$``); the plain-\\boxed pattern runs to the end of the
    text, so there it is the last box. The commitment starts at the last ``answer`` before the
    answer within the match, or at a box; else the answer is a bare value."""
    if _LAST_SPAN[0] is where:
        span: tuple[int, int, int] = _LAST_SPAN[1]
        return span
    span = _answer_span(where)
    _LAST_SPAN[:] = [where, span]
    return span


@per_pattern
def _named_groups(pattern: re.Pattern[str]) -> tuple[int, tuple[int, ...]]:
    """(index of ``first_latexBoxed`` or 0, the indices of every named group) of a library
    pattern: the spans are read from ``Match.regs`` by index, not from ``groupdict()``
    (which cuts a string for each of ~40 groups)."""
    names = pattern.groupindex
    return names.get("first_latexBoxed", 0), tuple(names.values())


def _answer_span(where: re.Match[str]) -> tuple[int, int, int]:
    box, named = _named_groups(where.re)
    regs = where.regs  # (start, end) of every group; (-1, -1) where it did not match
    if box and regs[box][1] > regs[box][0]:
        boxes = boxed_answers(where.group(0))
        if boxes:
            s, e, _ = boxes[-1]
            return where.start() + s, where.start() + s, where.start() + e
    spans = [sp for sp in (regs[i] for i in named) if sp[1] > sp[0]]  # matched, not empty
    a0 = min((sp[0] for sp in spans), default=where.start())
    a1 = max((sp[1] for sp in spans), default=where.end())
    phrase = None
    for found in _PHRASE.finditer(where.string, where.start(), a0):
        phrase = found
    if phrase is not None:
        return phrase.start(), a0, a1
    return a0, a0, a1


def _is_value(x: Any) -> bool:
    """A candidate is a value (an expression, or a variable given one: ``y = -49``), not an
    equation or inequality still to solve (``-8y = 392, or y = -49`` restates, it does not
    offer ``-8y = 392`` as an answer)."""
    if isinstance(x, sympy.Eq):
        return isinstance(x.lhs, sympy.Symbol)
    return not isinstance(x, sympy.core.relational.Relational)


def _same_as(pred: list[Any]) -> Callable[[str], bool]:
    """Whether a candidate, as written, is the final answer ``pred`` (or no value at all)."""

    def same(value: str) -> bool:
        other = parse_boxed((as_latex(value),))
        return not other or not _is_value(other[0]) or verify_default(pred, other)

    return same


def _hedged_answers(text: str, where: re.Match[str] | None, pred: list[Any], boxes: list[str]) -> str | None:
    """Rule 1: the reason when the response offers more than one distinct final answer
    (hedge.py: its closing part), plus the distinct boxes found anywhere, else None."""
    if where is None:
        return None
    commit, a0, a1 = answer_span(where)
    same = _same_as(pred)
    others = hedge.distinct_candidates(text, commit, (a0, a1), MATH_VALUE_WORDS, same,
                                       scan=MATH_VALUE, holds=MATH_VALUE_HOLDS)
    others += [b for b in boxes if b not in others]
    if not others:
        return None
    return hedge.hedge_reason(str(pred[-1]), others, clip)


def _several(gold: Any) -> bool:
    """A gold of several values (a list, a set, several equations): its parts may be boxed
    one by one."""
    if isinstance(gold, sympy.FiniteSet | sympy.Tuple):
        return len(gold.args) > 1
    return isinstance(gold, sympy.And) or (
        isinstance(gold, sympy.Eq) and isinstance(gold.rhs, sympy.FiniteSet | sympy.Tuple)
    )


def hedged(text: str, where: re.Match[str] | None, pred: list[Any], gold: Any) -> str | None:
    """Rule 1: the ``hedged`` reason when ``text`` offers more than one distinct final
    answer, else None. ``where`` is the library's match of the final answer (``extract``),
    ``pred`` its parse, ``gold`` the gold's first parsed value (None when not sympy)."""
    distinct = (  # boxes anywhere, then the closing part
        _distinct_boxed(text)
        if where is not None and BOX.search(where.group(0)) and not _several(gold)
        else None
    )
    return _hedged_answers(text, where, pred, distinct[:-1] if distinct else [])


def per_reading(text: str, where: re.Match[str] | None, pred: list[Any], gold: Any) -> str | None:
    """The ``per_reading`` reason when the closing part gives values bound to different
    readings or cases and commits to none (``readings.py``), else None. Not for a gold of
    several values (a multi-part answer states one value per part)."""
    if where is None or _several(gold):
        return None
    _, a0, a1 = answer_span(where)
    if not readings.may_bind(text, a0, a1):
        return None
    bound = readings.bound_values(text, (a0, a1), MATH_VALUE, _same_as(pred))
    return readings.reading_reason(bound, clip) if bound else None
