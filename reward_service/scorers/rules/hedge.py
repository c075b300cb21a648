"""One committed answer: the closing part of a response and the candidate answers in it.

The rule (``math``, ``gsm8k`` and ``choice``): **a response earns the reward only if it commits
to one final answer.** Its *candidate answers* are the values it offers as its answer in its
*closing part*; more than one distinct candidate (by the scorer's own equivalence: ``0.5`` and
``\\frac12`` are one value) is a hedge, and the response is refused with a ``hedged: ...``
reason. This module finds the closing part and the candidates; the scorer compares them.

Where the closing part starts (``closing_start``), in order:

1. **At the final commitment.** The final answer is the one the scorer takes (for ``math``, the
   library's choice). When it is *committed*, i.e. written with ``answer is`` / ``Answer:`` /
   ``final answer`` / ``\\boxed{}`` / ``####``, the closing part starts at the beginning of the
   clause holding that phrase; when it is a bare value (the last number), at the beginning of
   the clause holding the value. A clause ends at ``.``/``!``/``?`` followed by a space, a line
   break, ``,``/``;``/``:`` followed by a space, or before ``so``, ``thus``, ``therefore``,
   ``hence``, ``then``, ``but``. *Why:* what comes before the final commitment is the work
   (``x = 5 or x = 6; checking, x = 6 fails``, case analyses, a restated ``5 or more``), and a
   revision the response argued for (``the answer is 7. Wait, ... so the answer is 8``) ends
   on one value; a value is an answer only where the response says it is one.
2. **Back over an alternative it answers.** If the closing part opens with an alternative
   word (``Or maybe 6``, ``, or possibly 6``, ``Actually, ...``, ``It could also be ...``), it
   offers itself as an alternative to what precedes, so the preceding clause joins it.
3. **Back over answer sentences.** If the final commitment opens its sentence and the sentence
   before it is nothing but an answer (``The answer is 5.``, ``Maybe 6?``, ``#### 20``, ``Or
   possibly 6.``: a commitment phrase or alternative word, values, punctuation), that sentence
   joins too, and so on back (at most 8). A sentence with any other words (``Wait, no.``,
   ``Recounting gives 8.``) stops it: that is reasoning, and what follows is a revision.

It runs to the end of the response: after committing, any further value offered as an answer
or an alternative counts. Independently of where it starts, every ``\\boxed{}`` (``math``) and
every ``####`` (``gsm8k``) anywhere is a declaration of a final answer (the scorers check them).

Candidates in the closing part: the final answer; every value after a commitment phrase;
every value after an alternative word (or, maybe, perhaps, possibly, probably, either,
alternatively, actually, otherwise, or else, and/or, if not, then again, could/might/may (also)
be, in which case, in the other case, under the other reading/interpretation/assumption); a
value right before a disjunctive ``or`` that leads to another value (``7 or 8``); a value joined
to the final answer by ``and`` (``2 and 3``) or standing alone in parentheses after it (``5
(6)``). Conditional alternatives (issue 26), wherever they stand in the closing part: a value
after a condition clause (``if we count the start, 6``; ``assuming order matters: 6``; if,
unless, assuming, provided, supposing, in case), and a value followed by a condition that opens
its part of the sentence (``5 (6 if we count the start)``, ``5; 6 unless ...``, ``, or 6
otherwise``). Values are numbers, LaTeX, and number words (``six``, ``thirty-one``, ``one
half``: ``number_words.py``); symbols of disjunction (``\u2228``, ``\\lor``, ``|``, ``\\text{
or }``) are read as ``or`` before any rule runs (``text_forms.py``). A value inside the final
answer's own span is part of that answer (``$5$ or $6$`` which the library reads as the set
{5, 6}) and not a separate candidate. A value is followed by no operator (``3+5=8`` is work,
not a value), and a value its own clause discards (``6 fails``, ``x = 6 is extraneous``,
``does not work``, ``is ruled out``) is not offered.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from reward_service.scorers.rules.hedge_skip import nothing_offered
from reward_service.scorers.rules.number_words import NUMBER_TOKENS, WORDS
from reward_service.scorers.rules.pattern_memo import per_pattern

__all__ = [
    "Candidate",
    "candidates",
    "closing_start",
    "distinct_candidates",
    "hedge_reason",
]

# Every run of spaces and punctuation below is possessive (``*+``, ``++``): a response is
# untrusted text, and a gap that could be split two ways between two quantifiers backtracks
# polynomially on long runs (tests/test_hedges.py times adversarial shapes).
OTHER_READING = (
    r"(?:under|on|with|by|in)\s++(?:the\s++)?(?:other|another|a\s++different|second|alternative)"
    r"\s++(?:reading|interpretation|assumption|convention|case|count(?:ing)?+|view)"
)
_ALT_WORDS = (
    r"or\s++(?:maybe|perhaps|possibly|probably|rather|else|even|alternatively|just)"
    r"|and/or|or|maybe|perhaps|possibly|probably|alternatively|actually|otherwise|either"
    r"|if\s++not|then\s++again|else"
    r"|(?:(?:but\s++)?(?:it|that|this|the\s++(?:final\s++)?answer)\s++)?(?:could|might|may)"
    r"(?:\s++(?:also|even|well|instead))?+\s++be"
)
# alternatives under a condition: searched for only in a closing part holding a condition word
# (``_CONDITION_HINTS``), as the whole closing part is scanned for leads
_CONDITIONAL_ALT = r"in\s++which\s++case|in\s++the\s++other\s++case|" + OTHER_READING
ALT_WORD = "(?:" + _ALT_WORDS + "|" + _CONDITIONAL_ALT + ")"
_CONDITION_HINTS = ("if ", "if,", "unless", "assum", "provided", "suppos", "in case", "which case",
                    "other case", "reading", "interpretation", "convention", "counting",
                    "other count", "other view")
_OR_NOT_LETTER = re.compile(r" or(?![^\W\d_])", re.IGNORECASE)  # " or", no letter after it
# a condition a value is offered under, before the value ("if we count the start, 6";
# "assuming order matters: 6") or after it ("6 if we count the start", "6 unless ...")
CONDITION = r"(?:if|unless|assuming|provided|supposing|in\s++case|" + OTHER_READING + ")"
# a condition clause, up to its comma or colon, ``then``, or the words that state its value
# ("under the other reading of the problem it is 6")
_CONDITION_CLAUSE = (
    r"\b" + CONDITION + r"\b[^.;:!?\n()$]{0,100}?(?:[,:]|\s\bthen\b"
    r"|(?=\s(?:it|that|this|the\s++answer|we\s++(?:get|have)|gives|yields|becomes)\b))")
_CONDITION_AFTER = re.compile(r"\s*+\)?+\s*+,?+\s*+(?:" + CONDITION + r"|otherwise)\b",
                              re.IGNORECASE)
_OPENS_PART = re.compile(r"(?:^|[(,;:.!?\n\u2014]|\bor|\band)[\s$*]*+$", re.IGNORECASE)
# a value the same clause says is wrong ("6 fails", "x = 6 is extraneous") is not offered
_DISCARDED = re.compile(
    r"[^.;\n]{0,40}?\b(?:fails?|failed|is\s++(?:rejected|extraneous|impossible|excluded|invalid"
    r"|wrong|incorrect|not\s++(?:valid|allowed|possible|a\s++solution))|was\s++wrong"
    r"|does(?:n't|\s++not)\s++(?:work|satisfy|hold)|(?:is|are)\s++ruled\s++out)\b",
    re.IGNORECASE)
_CLAUSE_STOP = re.compile(r"[.;]")
# every alternative of _DISCARDED holds one of these, in lower case
_DISCARD_STEMS = ("fail", "reject", "extraneous", "impossible", "exclud", "invalid", "wrong",
                  "incorrect", "not", "n't", "ruled")


def _discarded(text: str, pos: int) -> bool:
    """``_DISCARDED.match(text, pos) is not None``, cheaper: a match lies wholly before the
    first ``.`` or ``;`` after ``pos`` (its lead may hold neither, nor may its words; a newline
    may stand in their spaces), so a clause without any stem has none. Only for an ASCII
    clause, where IGNORECASE is ``str.lower`` (Unicode case folding maps some other letters
    to ASCII ones)."""
    stop = _CLAUSE_STOP.search(text, pos, pos + 100)  # a longer clause: the pattern itself
    if stop is not None:
        clause = text[pos : stop.start()]
        if clause.isascii():
            lowered = clause.lower()
            if not any(stem in lowered for stem in _DISCARD_STEMS):
                return False
    return _DISCARDED.match(text, pos) is not None


_WORD_BEFORE = re.compile("(?:" + WORDS + r")(?=[\s,$]*+$)")
_DISJUNCTIVE = re.compile(r"\s*+,?+\s*+(?:\$\s*+)?+(?:or|and/or)\b", re.IGNORECASE)
COMMIT = (
    r"(?:(?:final\s++)?answer(?:\s++(?:is|was|would\s++be|should\s++be|must\s++be|might\s++be"
    r"|could\s++be|may\s++be|will\s++be))?+\s*+(?:\*\*)?+\s*+[:=]?+(?:\*\*)?+|####)"
)
# spaces, commas, colons, dashes between words; never a character a value starts with
_GAP = r"(?:[,:\s—]|--?(?=\s))*+"
_FILLER = (
    _GAP + r"(?:(?:(?:it|that|this)(?:'s|\s++is|\s++was|\s++would\s++be|\s++could\s++be"
    r"|\s++might\s++be)|the\s++(?:final\s++)?answer(?:\s++(?:is|was|would\s++be|could\s++be"
    r"|might\s++be))?+|we\s++(?:get|have)|equals?(?:\s++to)?+|even|just|rather|instead"
    r"|maybe|perhaps|possibly|probably|gives|yields|becomes)\b" + _GAP + r")*+"
)
CLAUSE_END_UNGUARDED = (
    r"[.!?](?=\s)|\n|[,;:](?=\s)|\b(?:so|thus|therefore|hence|then|but)\b(?!\s+again)"
)
# The same pattern behind a zero-width guard listing every character a match can begin with
# (the punctuation, and the first letters of the words, matched with the same IGNORECASE):
# same matches, and ``re`` skips ahead to those characters instead of trying the whole
# alternation at every position (twice as fast; tests/test_hedges.py compares the two).
_CLAUSE_END = re.compile(r"(?=[.!?\n,;:sthb])(?:" + CLAUSE_END_UNGUARDED + ")", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?](?=\s)|\n")
_PUNCT = r"[\s,;:.!?()*$#>—-]*+"
_OPENS_WITH_ALT = re.compile(_PUNCT + r"(?:hmm\b" + _PUNCT + r")?+" + ALT_WORD + r"\b",
                             re.IGNORECASE)
_ALT_CLAUSE = re.compile(_PUNCT + ALT_WORD + _PUNCT, re.IGNORECASE)
# a clause that is only a condition ("without repetition,", "if n is odd:"): the answer after
# it is one branch of a conditional, so the closing part takes in the branch before it
_COND_CLAUSE = re.compile(
    _PUNCT + r"(?:" + CONDITION + r"|with(?:out)?+|for|when(?:ever)?+|under|in\s++the\s++case)\b"
    r"[^.;:!?\n]{0,100}+" + _PUNCT, re.IGNORECASE)
# what may precede a commitment at the start of its sentence ("So the answer is 5")
_ONLY_LEAD = re.compile(
    _PUNCT + r"(?:(?:so|thus|therefore|hence|then|and|hmm|well|ok(?:ay)?)\b" + _PUNCT + ")*+",
    re.IGNORECASE,
)
_MAX_ANSWER_SENTENCE = 400  # an answer sentence is short; longer ones are not tried
_WINDOW = 3000  # how far back a clause or sentence start is looked for
_MAX_SENTENCES = 8


@dataclass(frozen=True, slots=True)
class Candidate:
    start: int
    end: int
    value: str  # the value as written (inside its ``$...$`` / box / bold, when it has one)


def _last_end(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """The end of the last match of ``pattern`` ending at or before ``pos``: looked for in
    the 200 characters before ``pos``, then in ``_WINDOW`` (whose start it returns if none).

    Tried first in the 40 characters before ``pos`` (a clause end is rarely further; half
    the cost on the corpus): exact for ``_CLAUSE_END`` and ``_SENTENCE_END``, whose matches
    never overlap, so a match found there is the last one the 200 would give (any match
    ending after it would start after it, inside the 40). tests/test_hedges.py compares it
    with the plain 200/``_WINDOW`` scan."""
    for window in (40, 200, _WINDOW):
        lo = max(0, pos - window)
        end = -1
        for m in pattern.finditer(text, lo):  # not endpos=pos: the lookaheads see past it
            if m.end() > pos:
                break
            end = m.end()
        if end >= 0 or lo == 0:
            return max(end, lo)
    return max(0, pos - _WINDOW)


@per_pattern
def _answer_sentence(value: re.Pattern[str]) -> re.Pattern[str]:
    """A sentence that is nothing but an answer: an optional alternative word and commitment
    phrase, values joined by alternative words, punctuation."""
    v = value.pattern
    return re.compile(
        r"[\s>*-]*+(?:(?:hmm|well|or|so)\b" + _GAP + r")?+(?:" + ALT_WORD + r"\b" + _GAP
        + r")?+(?:" + COMMIT + r")?+" + _FILLER + r"(?:" + v + r")(?>" + _GAP + r"[;]?+"
        + _GAP + r"(?:" + ALT_WORD + r"\b)?+" + _FILLER + r"(?:" + v + r"))*+"
        + _GAP + r"(?:(?:though|instead|I\s++think|I\s++guess)\b)?+[\s.!?*)]*+",
        re.IGNORECASE | re.DOTALL,
    )


def closing_start(text: str, start: int, value: re.Pattern[str]) -> int:
    """Where the closing part starts, for a final answer (its commitment phrase, or the value
    itself when bare) starting at ``start``: see the module docstring."""
    answer_sentence = _answer_sentence(value)
    anchor = _last_end(_CLAUSE_END, text, start)
    for _ in range(_MAX_SENTENCES):
        if anchor > 0 and _OPENS_WITH_ALT.match(text, anchor):  # 2: an alternative to before
            prev = text[:anchor].rstrip(" \t,;:")
            anchor = _last_end(_CLAUSE_END, prev, max(0, len(prev) - 1))
            continue
        if anchor > 0:  # "Actually, the answer is 6": the clause before is the alternative word
            before = _last_end(_CLAUSE_END, text, max(0, anchor - 1))
            if before < anchor and _ALT_CLAUSE.fullmatch(text, before, anchor):
                anchor = before
                continue
            if before < anchor and _COND_CLAUSE.fullmatch(text, before, anchor):
                # "...; without repetition, the answer is 5": the condition and the clause
                # before it (the other branch) join
                prev = text[:before].rstrip(" \t,;:")
                anchor = _last_end(_CLAUSE_END, prev, max(0, len(prev) - 1)) if prev else 0
                continue
        sentence = _last_end(_SENTENCE_END, text, anchor)
        if _ONLY_LEAD.fullmatch(text, sentence, anchor) is None or sentence == 0:
            break
        prev_end = text[:sentence].rstrip()
        if not prev_end:
            break
        prev_start = _last_end(_SENTENCE_END, prev_end, max(0, len(prev_end) - 1))
        if sentence - prev_start > _MAX_ANSWER_SENTENCE or not answer_sentence.fullmatch(
                text, prev_start, sentence):  # 3: an answer sentence
            break
        anchor = prev_start
    return anchor


def _inner(m: re.Match[str]) -> str:
    groups = [g for g in m.groups() if g is not None]
    return (groups[0] if groups else m.group(0)).strip()


# what a lead can begin with: the first letters of _ALT_WORDS' alternatives and of COMMIT's
# (under the same IGNORECASE), as for _CLAUSE_END (a third faster on the corpus;
# tests/test_hedges.py compares the matches with and without it)
LED_GUARD = r"(?=[abcefimopt#])"


@per_pattern
def _scanners(value: re.Pattern[str]) -> tuple[re.Pattern[str], ...]:
    """For a value pattern: a value led by an alternative word or commitment phrase; led by
    a condition; what follows a disjunctive ``or`` before a value; ``and`` joining the answer
    to a value."""
    v = value.pattern
    flags = re.IGNORECASE | re.DOTALL
    led = re.compile(LED_GUARD + r"(?:\b(?:" + _ALT_WORDS + r")\b|" + COMMIT + r")" + _FILLER
                     + r"(?=" + v + ")", flags)
    conditional = re.compile(r"(?:\b(?:" + _CONDITIONAL_ALT + r")\b|" + _CONDITION_CLAUSE + r")"
                             + _FILLER + r"(?=" + v + ")", flags)
    after_or = re.compile(_FILLER + r"(?=" + v + ")", flags)
    # "and" joining a value to the answer ("2 and 3"); a bare value in parentheses after it
    joined = re.compile(r"\s*+(?:\$|\\\)|\*\*)?+\s*+(?:[,;]?+\s*+and\s++|\(\s*+(?=(?:" + v
                        + r")\s*+\??+\s*+\)))(?=" + v + ")", flags)
    return led, conditional, after_or, joined


def candidates(
    text: str, start: int, answer: tuple[int, int], value: re.Pattern[str],
    scan: re.Pattern[str] | None = None, holds: re.Pattern[str] | None = None,
) -> Iterator[Candidate]:
    """Candidate answers in ``text[start:]`` other than the final answer at ``answer``
    (start, end): values after a commitment phrase or an alternative word, a value before a
    disjunctive ``or``, a value joined to the answer by ``and``. ``value`` matches one value
    (its first non-empty group, when it has groups, is the value as written). ``scan``, when
    given, is ``value`` without number words, for the searches through the whole closing part
    (a word alternative tried at every position is slow): then a number word counts after a
    lead (``or six``) and right before ``or`` (``six or 5``), not before a condition.
    ``holds``, when given, matches a character that every match of ``scan`` holds (for
    ``math``: a digit, ``\\`` or ``$``); a closing part where none can stand outside the
    answer, nor a number word, is not scanned (``hedge_skip.nothing_offered``)."""
    a0, a1 = answer
    if holds is not None and nothing_offered(text, start, a0, a1, holds):
        return
    led, conditional, after_or, joined_to = _scanners(value)

    def outside(s: int, e: int) -> bool:
        return e <= a0 or s >= a1

    seen: set[tuple[int, int]] = set()

    def emit(m: re.Match[str] | None) -> Iterator[Candidate]:
        if m is not None and outside(m.start(), m.end()) and (m.start(), m.end()) not in seen \
                and not _discarded(text, m.end()):
            seen.add((m.start(), m.end()))
            yield Candidate(m.start(), m.end(), _inner(m))

    for lead in led.finditer(text, start):
        yield from emit(value.match(text, lead.end()))
    lowered = text[start:].lower()  # only searched (its offsets may differ from the text's)
    conditions = any(hint in lowered for hint in _CONDITION_HINTS)
    if conditions:
        for lead in conditional.finditer(text, start):
            yield from emit(value.match(text, lead.end()))
    # a value followed by a condition needs a condition word (or "otherwise") in the part
    after_condition = conditions or "otherwise" in lowered
    if scan is not None:  # "six or 5": a number word before " or"
        for word_or in _OR_NOT_LETTER.finditer(text, start):
            at = word_or.start()
            last = text[max(start, at - 14):at].lower().rstrip(" ,$").replace("-", " ")
            if last.rsplit(" ", 1)[-1] in NUMBER_TOKENS:
                w = _WORD_BEFORE.search(text, max(start, at - 39), at + 1)
                if w is not None and after_or.match(text, at + 3):
                    yield from emit(w)
    for m in (scan or value).finditer(text, start):
        d = _DISJUNCTIVE.match(text, m.end())
        disjunct = d is not None and after_or.match(text, d.end()) is not None  # "7 or 8": 7
        offered = after_condition and _CONDITION_AFTER.match(text, m.end()) is not None \
            and _OPENS_PART.search(text, max(start, m.start() - 12), m.start()) is not None
        # ^ "(6 if we count ...)"
        if disjunct or offered:
            yield from emit(m)
    joined = joined_to.match(text, a1)
    if joined is not None:
        yield from emit(value.match(text, joined.end()))


def distinct_candidates(
    text: str,
    commit_start: int,
    answer: tuple[int, int],
    value: re.Pattern[str],
    same: Callable[[str], bool],
    extra: list[str] | None = None,
    scan: re.Pattern[str] | None = None,
    holds: re.Pattern[str] | None = None,
) -> list[str]:
    """The candidates (and ``extra`` values, e.g. every box) that are not the final answer
    by ``same``; empty when the response commits to one answer. ``scan``, ``holds``: see
    :func:`candidates`."""
    start = closing_start(text, commit_start, value)
    found: list[str] = []
    for c in [*(extra or []), *(c.value for c in candidates(text, start, answer, value, scan, holds))]:
        if c and c not in found and not same(c):
            found.append(c)
    return found


def hedge_reason(answer: str, others: list[str], clip: Callable[[str, int], str]) -> str:
    shown = "; ".join(clip(x, 30) for x in [*others[:3], answer])
    return (f"hedged: {len(others) + 1} distinct final answers offered ({shown}); "
            "a response must commit to one")
