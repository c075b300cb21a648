"""Answers offered per reading or per case (issue 36): values bound to different conditions in
the closing part, with no commitment to one (``per_reading``).

``There are 6 arrangements if rotations count as different, 2 if they do not.``, ``With
replacement the probability is 1/4; without replacement it is 1/6.``, ``Answer: 20 (ordered) /
10 (unordered)``: each value is tied to a reading of the problem and none is said to be *the*
answer, so whichever reading the gold takes, the response is paid. A policy finds this
quickly. The rule is written by structure, not by phrasing:

1. **Units.** The text around the final answer (400 characters before it to 400 after it) is cut
   into units at sentence ends, ``;``, line breaks, ``, `` and `` / `` (outside math and
   boxes). A unit that is only a leading condition (``If not``, ``Assuming integer sides``)
   joins the unit after it, the value it conditions.
2. **Bound values.** A unit is *conditional* when it holds a condition: a condition word (if,
   unless, assuming, provided, supposing, in case, otherwise, else, when, with, without,
   for (where it opens a clause: ``For real sides: 13``), under, counting, up to, ignoring, including, excluding, allowing, depending on, and
   the participles that set a reading: taking, treating, considering, regarding,
   interpreting, reading, viewing), a
   numbered or ordinal case (``case 2``, ``in the other case``), or a parenthesised qualifier
   of words (``(ordered)``). Its value is its last value outside the condition: before a
   condition that follows the value (``6 if we count 3 colours`` states 6), else the last one
   (``For n = 3 the answer is 6`` states 6); case labels (``case 2``) are not values.
3. **No commitment.** The final answer's unit must itself be conditional, by a condition in
   the answer's own sentence (within 250 characters: ``answer_sentence``); units before it
   are read back while they are conditional, units after it forward (to 400 characters on).
   A unit with a value and no condition is a commitment (``so the answer is 6``): reading stops there, and one after
   the answer means the response committed (a later ``So 20.`` keeps the reward, or is the
   hedge rule's to judge when it differs). A unit that holds its value under every reading
   (``whether or not``, ``either way``, ``in both cases``, ``regardless``) is a commitment.
4. **Hedge.** Another conditional unit of that run with a *different* value (by the scorer's
   own equivalence) under a *different* condition: the response is refused, reason
   ``per_reading: ...``.

Kept (the issue's near misses): a counterfactual in the reasoning followed by a commitment
(``If x were 3 the sum would be 9, but x = 4, so the sum is 12.``: the answer's unit ``so
the sum is 12`` has no condition), a case analysis that rejects all but one case (``...; only
case 2 meets the constraint, so the answer is 6.``), and a value under every reading (``The
answer is 12 whether or not the coins are distinguishable.``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["answer_sentence", "bound_values", "may_bind", "reading_reason"]

_BACK = 400
_NEAR = 250  # the final answer's condition is in its own sentence, this close
# every match of _CONDITION but "for" holds a match of one of these, in lower case (a cheap
# first test; "for" is tested apart, _may_hold_condition)
_STEMS = ("if", "unless", "assum", "provided", "suppos", "case", "otherwise", "else", "when",
          "with", "under", "counting", "up\\s", "ignoring", "including", "excluding",
          "allowing", "depending", "taking", "treating", "considering", "regarding",
          "interpreting", "reading", "viewing", "\\([a-z]")
_MAX_UNITS = 40
# condition words, as whole words (``formula`` is not one)
_CONDITION_WORDS = (
    r"\b(?:if|unless|assuming|assume|provided|supposing|suppose|in\s+case|otherwise|else"
    r"|when(?:ever)?|with|without|for|under|counting|up\s+to|ignoring|including|excluding"
    r"|allowing|disallowing|depending\s+on|taking|treating|considering|regarding|interpreting"
    r"|reading|viewing)\b"
    r"|\bcase\s*\d+\b|\b(?:first|second|third|other|latter|former|last)\s+case\b"
    r"|\((?:[a-zA-Z][a-zA-Z\s-]{1,40})\)"
)
_CONDITION = re.compile(_CONDITION_WORDS, re.IGNORECASE)
_CONDITION_LOWER = re.compile(_CONDITION_WORDS)  # the same on lower-case ASCII text, faster
# "for" is a condition only where it opens a clause ("For real sides: 13"; not "the number of
# ways for the committee is 20")
_OPENS_CLAUSE = re.compile(r"(?:^|[,;:.!?(\n/*>-]|\b(?:and|or|but|while|whereas|then|also))\s*$",
                           re.IGNORECASE)
_UNIVERSAL = re.compile(
    r"\b(?:whether|regardless|either\s+way|in\s+(?:all|both|every|each|any)\s+(?:cases?|readings?"
    r"|interpretations?)|under\s+(?:all|both|every|each|any)\b)",
    re.IGNORECASE,
)
_STEM = re.compile("|".join(_STEMS))
_FOR = re.compile(r"\bfor\b")


def _condition(piece: str) -> re.Match[str] | None:
    """The first condition in ``piece`` (:func:`_first_condition`); an ASCII piece is
    searched in its lower case with ``_CONDITION_LOWER`` (for ASCII, ``str.lower`` is the
    regex's IGNORECASE, and the positions are the same)."""
    if piece.isascii():
        return _first_condition(piece.lower(), _CONDITION_LOWER)
    return _first_condition(piece, _CONDITION)


def _first_condition(piece: str, pattern: re.Pattern[str]) -> re.Match[str] | None:
    """The first match of ``pattern`` (``_CONDITION``, or ``_CONDITION_LOWER`` on lower-case
    ASCII) in ``piece``, ``for`` only where it opens a clause."""
    for m in pattern.finditer(piece):
        if m.group(0).lower() != "for" or _OPENS_CLAUSE.search(piece, max(0, m.start() - 12),
                                                               m.start()):
            return m
    return None
# numbers that label, not state: "case 2", "part 3", "step 4"
_LABELS = re.compile(r"\b(?:case|part|step|scenario|option|reading|interpretation)\s*\(?\d+\)?",
                     re.IGNORECASE)
_LEADING = re.compile(r"^[\s,;:.*>-]*(?:(?:and|or|but|while|whereas|then|also)\b[\s,]*)*",
                      re.IGNORECASE)
_SEPARATOR = re.compile(r"[.!?](?=\s|$)|;|\n|,\s|\s/\s|\s(?=(?:but|whereas|while)\b)")
# math and boxes: no separator inside them (masked before cutting)
_MATH = re.compile(r"\$\$?[^$]*\$\$?|\\\(.*?\\\)|\\\[.*?\\\]|\\(?:boxed|fbox)\s*\{(?:[^{}]|\{[^{}]*\})*\}",
                   re.DOTALL)
_CONSEQUENCE = re.compile(r"\s*(?:so|thus|therefore|hence|consequently)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Unit:
    start: int
    end: int
    condition: str | None  # the condition's text, lower case; None when unconditional
    value: str | None  # the value the unit states, as written
    universal: bool
    leading: bool = False  # the condition opens the unit ("If not, ...")
    cond_at: int = -1  # where the condition starts in the text (-1: none)


def _mask(text: str) -> str:
    return _MATH.sub(lambda m: "x" * len(m.group(0)), text)


def _cuts(text: str, lo: int) -> list[tuple[int, int]]:
    masked = _mask(text[lo:])
    spans, pos = [], 0
    for m in _SEPARATOR.finditer(masked):
        if m.start() > pos:
            spans.append((lo + pos, lo + m.start()))
        pos = m.end()
        if len(spans) > _MAX_UNITS * 4:
            break
    if pos < len(masked):
        spans.append((lo + pos, len(text)))
    return spans


def _unit(text: str, start: int, end: int, value: re.Pattern[str], need_value: bool) -> Unit:
    """One unit; its value is read only when it has a condition or ``need_value`` (the value
    of an unconditional unit before the answer, with no condition before it, decides
    nothing: reading back stops there either way)."""
    piece = text[start:end]
    lead = _LEADING.match(piece)
    body_at = lead.end() if lead else 0
    cond = _condition(piece[body_at:])
    cond_start = body_at + cond.start() if cond is not None else -1
    universal = _UNIVERSAL.search(piece) is not None
    if cond is None and not need_value:
        return Unit(start, end, None, None, universal)
    scrubbed = _LABELS.sub(lambda m: "#" * len(m.group(0)), piece)  # for values only
    values = [m for m in value.finditer(scrubbed) if m.group(0).strip()]
    if cond is not None and cond_start > body_at:  # "6 if we count 3 colours": before it
        before = [m for m in values if m.end() <= cond_start]
        values = before or values
    stated = values[-1] if values else None
    shown = None
    if stated is not None:
        groups = [g for g in stated.groups() if g is not None]
        shown = (groups[0] if groups else stated.group(0)).strip()
    condition = None
    if cond is not None:
        condition = re.sub(r"\s+", " ", piece[cond_start:].lower())
        if stated is not None and stated.start() >= cond_start:  # leading: up to the value
            condition = re.sub(r"\s+", " ", piece[cond_start:stated.start()].lower())
    return Unit(start, end, condition, shown, universal, cond_start == body_at,
                start + cond_start if cond is not None else -1)


def _units(text: str, lo: int, value: re.Pattern[str], answer_at: int) -> list[Unit]:
    units: list[Unit] = []
    pending: tuple[int, Unit] | None = None  # a leading condition with no value yet
    for start, end in _cuts(text, lo):
        u = _unit(text, start, end, value, pending is not None or end > answer_at)
        if pending is not None:
            p_start, p = pending
            pending = None
            if u.value is not None and u.condition is None and not _CONSEQUENCE.match(
                    text, u.start):
                u = Unit(p_start, u.end, p.condition, u.value, u.universal or p.universal, True,
                         p.cond_at)
            else:
                units.append(p)
        if u.value is None and u.leading and not u.universal:
            pending = (u.start, u)
            continue
        units.append(u)
    if pending is not None:
        units.append(pending[1])
    return units


def answer_sentence(text: str, a0: int, a1: int) -> tuple[int, int]:
    """The sentence holding the final answer at ``a0:a1``: from the last sentence end (``.``
    and a space, or a line break) before it, at most ``_NEAR`` characters back, to the first
    after it, at most ``_NEAR`` characters on."""
    lo = a0 - _NEAR if a0 > _NEAR else 0
    hi = min(len(text), a1 + _NEAR)
    dot = text.rfind(". ", lo, a0)
    s0 = max(lo, dot + 2 if dot >= 0 else 0, text.rfind("\n", lo, a0) + 1)
    dot, line = text.find(". ", a1, hi), text.find("\n", a1, hi)
    if dot < 0:
        return s0, hi if line < 0 else line
    return s0, dot if line < 0 or dot < line else line


def may_bind(text: str, a0: int, a1: int) -> bool:
    """Whether the final answer at ``a0:a1`` may be bound to a reading: its sentence holds a
    condition. False for most answers, and cheap; :func:`bound_values` decides."""
    return _may_hold_condition(text, *answer_sentence(text, a0, a1))


def _may_hold_condition(text: str, s0: int, s1: int) -> bool:
    """A condition (``_condition``) stands in ``text[s0:s1]``; for an ASCII sentence tried
    only after the cheaper ``_STEM``, both on its lower case (every match of ``_CONDITION``
    holds a stem; for ASCII text ``str.lower`` is the regex's IGNORECASE)."""
    piece = text[s0:s1]
    if piece.isascii():
        lowered = piece.lower()
        if _STEM.search(lowered) is None:
            # the stems but "for": a sentence holding only "for" (most that pass) is tested
            # for an opening "for" alone
            if "for" not in lowered:
                return False
            return any(_OPENS_CLAUSE.search(lowered, max(0, m.start() - 12), m.start())
                       for m in _FOR.finditer(lowered))
        return _first_condition(lowered, _CONDITION_LOWER) is not None
    return _first_condition(piece, _CONDITION) is not None


def bound_values(text: str, answer: tuple[int, int], value: re.Pattern[str],
                 same: Callable[[str], bool]) -> list[tuple[str, str]] | None:
    """``[(condition, value), ...]`` of the units of a per-reading answer (the final answer's
    first) when the response offers values bound to different readings and commits to none;
    None otherwise. ``value`` matches one value (its first non-empty group is the value as
    written); ``same(v)`` says whether ``v`` is the final answer's value."""
    a0, a1 = answer
    s0, s1 = answer_sentence(text, a0, a1)
    if not _may_hold_condition(text, s0, s1):
        return None
    units = _units(text[: a1 + _BACK], max(0, a0 - _BACK), value, a0)
    at = next((i for i, u in enumerate(units) if u.start <= a0 < u.end), None)
    if at is None:
        return None
    mine = units[at]
    if mine.condition is None or mine.universal or not s0 <= mine.cond_at < s1:
        return None
    run = [mine]
    for u in reversed(units[:at]):
        if u.value is None and u.condition is None:
            break
        if u.condition is None or u.universal:
            break
        if u.value is not None:
            run.append(u)
    for u in units[at + 1:]:
        if u.value is None:
            continue
        if u.condition is None or u.universal:
            return None  # a later commitment
        run.append(u)
    others = [(u.condition or "", u.value) for u in run[1:]
              if u.value is not None and u.condition != mine.condition and not same(u.value)]
    if not others:
        return None
    return [(mine.condition, mine.value or ""), *others]


def reading_reason(bound: list[tuple[str, str]], clip: Callable[[str, int], str]) -> str:
    shown = "; ".join(f"{clip(v, 20)} {clip(c.strip(), 40)}" for c, v in bound[:3])
    return (f"per_reading: {len(bound)} values bound to different readings or cases ({shown}) "
            "and no commitment to one; a response must commit to one answer")
