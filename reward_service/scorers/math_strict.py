"""The default math profile, ``math``: math-verify's verdict, made strict where it is wrong.

It extracts and compares exactly as the ``math_verify`` profile does (same extraction, same
``verify``, same per-worker gold cache), then applies a few rules. A rule that changes the
library's verdict says so in the verdict's ``reason``.

Which answer is final: the library's choice, i.e. the last one written in the strongest form
present (``The final answer is ...`` > ``\\boxed{}`` > ``Answer: ...`` > ``answer ... is`` >
a bare number), so a revised answer (``the answer is 7. Wait ... the answer is 8``) is judged
by its last statement. A box is a declaration of the final answer: two different boxes are
two final answers, not a revision (rule 1).

Rules (the value rules 7, 2, 3, 4, 6 run first, then the answer rules 1 and 5 on what is
still correct):

1. **One committed answer** (veto). A response earns the reward only if it commits to one
   final answer: more than one distinct candidate answer is a hedge (``hedged: ...``).

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

2. **Exact values stay exact** (veto). The library rounds floats to 6 decimal places and
   compares other constants to 15 digits with tiny differences chopped, so
   ``0.0000001 = 0.0000002``, ``0.0000003 = 1/3000000``, ``1/2^98 = 1/2^99`` and
   ``1/2006! = 1/2004!`` (Math-Verify #14). Here, for every pair of constant numbers the
   library called equal (top level, or paired inside tuples, sets, intervals and
   ``x = ...``):

   * two exact values (no decimal point on either side): rational ones (``1/2^98``,
     ``1/2006!``) must be equal, computed exactly; others (surds, ``pi``) must agree to 20
     significant digits (evaluated at 30): a difference the library chopped is a different
     answer;
   * a decimal ``d`` against a value that a decimal can write exactly (an integer, a
     terminating fraction, another decimal) must be that value: ``2.0000001 != 2``;
   * a decimal ``d`` with ``k`` decimals against a value it can only approximate
     (``1/3``, ``sqrt(2)``) must be within ``10**-k`` of it and carry at least 3
     significant digits: ``0.333333 = 1/3`` and ``1.414214 = sqrt(2)`` still hold,
     ``0.0000003 = 1/3000000`` does not.

3. **Percent, one reading** (decides both ways when either side has a ``%``). The library
   drops the percent sign or divides by 100, whichever matches, so one answer matches two
   numbers a factor 100 apart (``1000%`` matches gold ``10``; ``0.1%`` matches ``0.1``).
   Here one reading per gold, chosen by the gold alone:

   * gold ``G%``: answers ``G%``, ``G`` (sign dropped) and ``G/100`` (``0.05`` for ``5%``);
   * gold ``G`` without ``%``, ``|G| >= 1``: a percentage written without its sign (MATH
     does this), so ``P%`` is read as ``P``: ``10%`` matches ``10``, ``1000%`` does not;
   * gold ``G`` without ``%``, ``|G| < 1``: a fraction, so ``P%`` is read as its value
     ``P/100``: ``10%`` matches ``0.1``, ``0.1%`` does not.

   docs/CORRECTNESS.md says what this loses (``0.5%`` for a gold ``0.5`` meaning 0.5%).

4. **Inequality for an interval** (rescue). Gold ``[1, 2)`` (or ``x \\in [1, 2)``), answer
   ``1 \\le x < 2``: the library compares a relation with a set only when the *answer* is
   the set (Math-Verify #25); here the answer's relation is turned into a set too (the
   library's ``allow_set_relation_comp``), in the gold's variable.

5. **Units must not contradict** (veto). The library drops ``\\text{cm}`` and friends, which
   is right when only one side names a unit (``10`` vs ``10\\text{ cm}``), but it also
   makes ``10\\text{ m}`` equal ``10\\text{ cm}``. When both the gold and the final answer
   name a unit in ``\\text{}``/``\\mathrm{}``/``\\mbox{}`` that is in our small table of
   common units (length, mass, volume, time, money, angle; spellings and plurals mapped to
   one name: ``inches`` = ``in``) and the two differ, the answer is refused. Words not in
   the table (names, ``units``) never refuse an answer; no conversion is attempted
   (``100\\text{ cm}`` vs ``1\\text{ m}`` is refused: say it in the gold's unit).

6. **Nothing dropped** (veto). The library's normaliser deletes ``\\ldots``/``\\cdots``,
   leaving an empty list element, and what is left may parse to anything: ``1, 2, \\ldots, n``
   and ``1, 3, 5, \\ldots, 2n-1`` both parse to ``2`` (Math-Verify #14). When either side has
   such an empty element, the two must be the same as written (spaces aside).

7. **Scientific notation** (both ways). ``1e5``, ``2E-3``, ``1.5e+3`` are written as their
   decimal values before extraction (:func:`read_scientific`): the library reads ``1e5`` in
   text as ``1`` and in LaTeX as ``1 \\cdot e \\cdot 5``. ``scientific: ...`` names it when
   reading the mantissa alone would have given the other verdict. An exponent beyond 400
   is not read at all (never as its mantissa).

Every overriding reason starts with its rule's label (``rules.py``: ``hedged``, ``exact``,
``percent``, ``rescued``, ``units``, ``dropped``, ``scientific``).

Handled as the library does, deliberately (tests pin each): ``x = 3`` and ``3`` match both
ways, ``y = 3`` does not match ``x = 3`` (variables matter); ``x = 2 or x = 3`` matches gold
``2, 3`` and not ``2``; intervals must agree on open/closed ends; ``\\pm 2`` is the set
``{-2, 2}``; a letter answer ``\\boxed{B}`` matches gold ``B``; ``a + b = 7`` matches ``7`` (an
equation's right-hand side is its value; a known leniency, kept because MATH answers are
written that way). The gold is wrapped in ``\\boxed{}`` as for ``math_verify``, after
stripping one pair of enclosing ``$...$`` (``\\boxed{$9$}`` is not LaTeX).

Cost: one extraction of the response (the library's own regexes and parser, which also
yields where the answer was found), one ``verify``, the gold parsed once per worker; the
rules add a regex scan, and a parse of each *distinct* boxed answer only when a response
has several different ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from itertools import groupby
from typing import Any

import sympy
from latex2sympy2_extended.sets import FiniteSet as L2SFiniteSet
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
from math_verify.grader import (
    get_pct_val,
    is_assignment_relation,
    is_equation,
    is_relation,
    take_last_relation,
)
from math_verify.parser import extract_match, get_extraction_regexes

from reward_service.scorers import hedge, regex_prefilter
from reward_service.scorers.base import Verdict, clip
from reward_service.scorers.math_verify_scorer import (
    MathVerifyScorer,
    boxed_gold,
    resource_error_reason,
)
from reward_service.scorers.rules import rule_reason

__all__ = ["MATH_VALUE", "MathStrictScorer", "boxed_answers", "read_scientific", "strict_gold"]

_TARGETS = regex_prefilter.wrap(
    get_extraction_regexes([LatexExtractionConfig(), ExprExtractionConfig()])
)


# --- extraction: the library's parse(), also returning where the answer was found ----------


def _extract(text: str) -> tuple[list[Any], re.Match[str] | None]:
    """``parse(text)`` with default configs, plus the regex match that produced the answer.

    A copy of ``math_verify.parser.extract_target_from_pred`` (0.9.0, ``any_match``,
    ``first_match`` fallback) that keeps the match; ``tests/test_corpus_agreement.py`` checks
    it against ``parse`` on corpus rows.

    ``parse()`` returns [] on any error, and so do we, except for the resource errors
    (``MemoryError``, ``RecursionError``): those propagate, so the item is ``error`` with a
    reason (as under ``math_verify``, whose log tap sees them), never a silent ``no_answer``."""
    try:
        return _extract_unguarded(text)
    except (MemoryError, RecursionError):
        raise
    except Exception:
        return [], None


def _extract_unguarded(text: str) -> tuple[list[Any], re.Match[str] | None]:
    found: list[Any] = []
    fallbacks: list[str] = []
    where: re.Match[str] | None = None
    patterns = sorted(
        ((pattern, target, priority) for group, target in _TARGETS for pattern, priority in group),
        key=lambda x: x[2],
    )
    for _, group in groupby(patterns, key=lambda x: x[2]):
        matches = sorted(
            ((m, m.start(), m.end(), target) for pattern, target, _ in group
             for m in pattern.finditer(text)),
            key=lambda x: (x[2], -x[1]),
            reverse=True,
        )
        for m, _, _, target in matches:
            value, fallback = extract_match(m, target)
            if fallback:
                fallbacks.append(fallback)
            if value is not None:
                found.append(value)
                where = m
                break
        if found:
            break
    if fallbacks:
        found.append(fallbacks[0])
    return found, where


# --- rule 1: one committed answer -------------------------------------------------------------

_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_JOIN = re.compile(
    r"^(?:\s|\$|,|;|\\[,;:!]|\\quad|\\qquad|\\text\{\s*(?:,?\s*(?:and|or)\s*)\}|\band\b|\bor\b)*$"
)
_SPACES = re.compile(r"\s+|\\[,;:!]|\\left|\\right")
# One value as a response writes it (hedge.py's candidates): a box, inline or display math,
# bold, or a plain number / fraction / root / multiple of pi; an optional "x =" before it; no
# operator after it ("3+5=8" is work, not a value). The first non-empty group is the value.
MATH_VALUE = re.compile(
    r"(?:[a-zA-Z]\s*+=\s*+)?+(?:"
    r"\\(?:boxed|fbox)\s*+\{((?:[^{}]++|\{(?:[^{}]++|\{[^{}]*+\})*+\})*+)\}"
    r"|\$\$?([^$]{1,200}?)\$\$?"
    r"|\\\((.{1,200}?)\\\)|\\\[(.{1,200}?)\\\]"
    r"|\*\*([^*]{0,100}?\d[^*]{0,100}?)\*\*"
    r"|((?:[-+]\s?)?+(?:\d*+\\[dt]?frac\{[^{}]*\}\{[^{}]*\}|\\sqrt\{[^{}]*\}|\d*\\pi"
    r"|(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?!\d)|\.\d+)(?:\s*/\s*\d+)?(?:\s*\\?%)?)"
    r")(?!\s*(?:[-+*/^=<>]|\\(?:cdot|times|div|pm|mp|le|ge|leq|geq|neq|ne)\b))",
    re.DOTALL,
)

def boxed_answers(text: str) -> list[tuple[int, int, str]]:
    """Every ``\\boxed{...}`` / ``\\fbox{...}`` in ``text``: (start, end, content), braces
    balanced; nested boxes count once (the outer one)."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        m = _BOX.search(text, pos)
        if m is None:
            return out
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth:  # unclosed: the rest of the text
            return out
        out.append((m.start(), i, text[m.end() : i - 1]))
        pos = i


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
    s = _SPACES.sub("", latex).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return s.rstrip(".")


def _parse_boxed(contents: tuple[str, ...]) -> list[Any]:
    """``parse`` of a boxed answer; short ones cached (a GRPO group repeats them)."""
    if sum(map(len, contents)) > 500:
        return _parse_boxed_uncached(contents)
    return _parse_boxed_cached(contents)


def _parse_boxed_uncached(contents: tuple[str, ...]) -> list[Any]:
    return parse("\\boxed{" + ", ".join(contents) + "}", parsing_timeout=None)  # type: ignore[arg-type]


_parse_boxed_cached = lru_cache(maxsize=256)(_parse_boxed_uncached)


def _distinct_boxed(text: str) -> list[str] | None:
    """The distinct boxed answers when there are several that differ, else None."""
    groups = _box_groups(text)
    if len(groups) < 2:
        return None
    keys = {tuple(_norm(c) for c in g): g for g in groups}
    if len(keys) < 2:
        return None
    final = tuple(groups[-1])
    final_parsed = _parse_boxed(final)
    different = [
        g for k, g in keys.items()
        if k != tuple(_norm(c) for c in final)
        and not verify(final_parsed, _parse_boxed(tuple(g)), timeout_seconds=None)
    ]
    if not different:
        return None
    return [", ".join(g) for g in [*different, list(final)]]


_PHRASE = re.compile(r"answer", re.IGNORECASE)


def _answer_span(where: re.Match[str]) -> tuple[int, int, int]:
    """(commitment start, answer start, answer end) of the library's final answer. The answer
    is what its named groups matched (a phrase pattern may span an earlier statement: ``answer
    is 32. The answer is $\\frac58$``); the plain-\\boxed pattern runs to the end of the
    text, so there it is the last box. The commitment starts at the last ``answer`` before the
    answer within the match, or at a box; else the answer is a bare value."""
    if where.groupdict().get("first_latexBoxed"):
        boxes = boxed_answers(where.group(0))
        if boxes:
            s, e, _ = boxes[-1]
            return where.start() + s, where.start() + s, where.start() + e
    spans = [where.span(name) for name, v in where.groupdict().items() if v]
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


def _hedged(text: str, where: re.Match[str] | None, pred: list[Any], boxes: list[str]) -> str | None:
    """Rule 1: the reason when the response offers more than one distinct final answer
    (hedge.py: its closing part), plus the distinct boxes found anywhere, else None."""
    if where is None:
        return None
    commit, a0, a1 = _answer_span(where)

    def same(value: str) -> bool:
        other = _parse_boxed((value,))
        return not other or not _is_value(other[0]) or bool(verify(pred, other, timeout_seconds=None))

    others = hedge.distinct_candidates(text, commit, (a0, a1), MATH_VALUE, same)
    others += [b for b in boxes if b not in others]
    if not others:
        return None
    return hedge.hedge_reason(str(pred[-1]), others, clip)


# --- rule 2: exact values stay exact ----------------------------------------------------------


def _is_constant(x: Any) -> bool:
    return (
        isinstance(x, sympy.Expr)
        and not isinstance(x, sympy.MatrixBase)
        and not x.free_symbols
        and bool(x.is_number)
    )


def _unwrap(gold: Any, pred: Any) -> tuple[Any, Any]:
    """The library's own unwrapping of ``x = 3`` against ``3`` (see ``sympy_expr_eq``)."""
    if is_relation(pred) and is_equation(pred) and not is_equation(gold):
        return gold, take_last_relation(pred).rhs
    if is_assignment_relation(gold) and not is_equation(pred):
        return take_last_relation(gold).rhs, pred
    if isinstance(gold, sympy.Eq) and isinstance(pred, sympy.Eq) and gold.lhs == pred.lhs:
        return gold.rhs, pred.rhs
    return gold, pred


def _decimal(x: sympy.Float) -> Decimal:
    return Decimal(str(x)).normalize()


def _exact(x: Any) -> Fraction | None:
    """The exact value of an integer, fraction or decimal literal; None for others."""
    if isinstance(x, sympy.Integer | sympy.Rational):
        return Fraction(int(x.p), int(x.q))
    if isinstance(x, sympy.Float):
        try:
            return Fraction(_decimal(x))
        except (InvalidOperation, ValueError, OverflowError):
            return None
    return None


def _terminates(q: Fraction) -> bool:
    d = q.denominator
    for f in (2, 5):
        while d % f == 0:
            d //= f
    return d == 1


def _show(x: Any) -> str:
    try:
        return clip(f"{_decimal(x):f}" if isinstance(x, sympy.Float) else x, 40)
    except ValueError:  # an integer past Python's int-to-str digit limit
        return "<a very large number>"


def _differ(gold: Any, pred: Any) -> str:
    return rule_reason("exact", f"different exact values: answer {_show(pred)}, gold {_show(gold)}")


def _number_veto(gold: Any, pred: Any) -> str | None:
    """Why two constants the library called equal are not, or None when they are."""
    g_float, p_float = gold.has(sympy.Float), pred.has(sympy.Float)
    if not g_float and not p_float:
        g_exact, p_exact = _exact(gold), _exact(pred)
        if (g_exact is None or p_exact is None) and gold.is_rational and pred.is_rational:
            g_exact, p_exact = _exact(gold.doit()), _exact(pred.doit())  # 1/2**98: exact
        if g_exact is not None and p_exact is not None:
            return None if g_exact == p_exact else _differ(gold, pred)
        try:
            diff = abs(sympy.N(gold - pred, 30))
            size = max(abs(sympy.N(gold, 30)), abs(sympy.N(pred, 30)))
            if diff.is_comparable and size.is_comparable and diff > size * sympy.Float("1e-20"):
                return _differ(gold, pred) + " (the library's 15-digit comparison chops the difference)"
        except (TypeError, ValueError, ArithmeticError):
            return None
        return None
    if g_float and p_float:
        decimal, other = (gold, pred) if isinstance(gold, sympy.Float) else (pred, gold)
    else:
        decimal, other = (gold, pred) if g_float else (pred, gold)
    if not isinstance(decimal, sympy.Float):
        return None  # a float inside an expression: leave it to the library
    d = _decimal(decimal)
    d_exact = Fraction(d)
    o_exact = _exact(other)
    if o_exact is not None and o_exact == d_exact:
        return None
    if o_exact is not None and _terminates(o_exact):
        return _differ(gold, pred)
    places = max(0, -int(d.as_tuple().exponent))
    significant = len(d.as_tuple().digits) if d != 0 else 0
    try:
        err = abs(sympy.N(other, 30) - sympy.Rational(d_exact.numerator, d_exact.denominator))
        close = bool(err < sympy.Rational(1, 10**places))
    except (TypeError, ValueError, ArithmeticError):
        return None
    if not close or significant < 3:
        return rule_reason(
            "exact",
            f"{_show(decimal)} does not pin down {_show(other)} "
            "(a decimal needs >= 3 significant digits, within its last place)",
        )
    return None


def _sorted_elements(s: Any) -> list[Any] | None:
    args = list(s._unsorted_args) if isinstance(s, L2SFiniteSet) else list(s.args)
    if not all(_is_constant(a) for a in args):
        return None
    try:
        return sorted(args, key=lambda a: float(sympy.N(a, 30)))
    except (TypeError, ValueError):
        return None


def _pairs(gold: Any, pred: Any, depth: int = 0) -> Iterator[tuple[Any, Any]]:
    """Pairs of constants the library compares with each other inside gold and pred."""
    if depth > 4:
        return
    gold, pred = _unwrap(gold, pred)
    if _is_constant(gold) and _is_constant(pred):
        yield gold, pred
    elif isinstance(gold, sympy.Tuple) and isinstance(pred, sympy.Tuple):
        if len(gold) == len(pred):
            for g, p in zip(gold.args, pred.args, strict=True):
                yield from _pairs(g, p, depth + 1)
    elif isinstance(gold, sympy.FiniteSet) and isinstance(pred, sympy.FiniteSet):
        gs, ps = _sorted_elements(gold), _sorted_elements(pred)
        if gs is not None and ps is not None and len(gs) == len(ps):
            for g, p in zip(gs, ps, strict=True):
                yield from _pairs(g, p, depth + 1)
    elif isinstance(gold, sympy.Interval) and isinstance(pred, sympy.Interval):
        yield from _pairs(gold.start, pred.start, depth + 1)
        yield from _pairs(gold.end, pred.end, depth + 1)


# --- rule 3: percent --------------------------------------------------------------------------


def _pct(x: Any) -> Any | None:
    return get_pct_val(x) if isinstance(x, sympy.Mul) else None


def _same(gold: Any, pred: Any) -> bool:
    if not verify(gold, pred, timeout_seconds=None):
        return False
    return all(_number_veto(g, p) is None for g, p in _pairs(gold, pred))


def _percent(gold: Any, pred: Any) -> tuple[bool, str] | None:
    """(verdict, reason) when either side is a percentage, else None."""
    gold, pred = _unwrap(gold, pred)
    g, p = _pct(gold), _pct(pred)
    if g is None and p is None:
        return None
    if g is not None and p is not None:
        return _same(g, p), "percent: both percentages, numbers compared"
    if g is not None:
        ok = _same(g, pred) or _same(g * sympy.Rational(1, 100), pred)
        return ok, "percent: gold is a percentage; the number or the number / 100 accepted"
    assert p is not None
    size = _magnitude(gold)
    if size is not None and size < 1:
        return _same(gold, p * sympy.Rational(1, 100)), (
            "percent: the gold has no percent sign and is below 1 in size, so the answer's "
            "percentage is read as its value (10% matches 0.1; 0.1% does not)"
        )
    return _same(gold, p), (
        "percent: the gold has no percent sign and is at least 1 in size, so the answer's "
        "percentage is read as its number (10% matches 10: MATH writes percentages without "
        "the sign; 1000% does not)"
    )


def _magnitude(x: Any) -> float | None:
    """``|x|`` of a constant, else None."""
    if not _is_constant(x):
        return None
    try:
        return float(abs(sympy.N(x, 20)))
    except (TypeError, ValueError, ArithmeticError):
        return None


# --- rule 7: scientific notation --------------------------------------------------------------

# 1e5, 2E-3, 1.5e+3: a number, then e/E and an integer exponent; not part of a word (x1e5) or
# of a longer number. LaTeX's 1.5 \times 10^{3} the library already reads as its value.
_SCIENTIFIC = re.compile(r"(?<![\w.])((?:\d+(?:\.\d*)?|\.\d+)[eE][-+]?\d+)(?![\w]|\.\d)")
_MANTISSA = re.compile(r"[eE]")
_SCIENTIFIC_HINT = re.compile(r"\d[eE][-+]?\d")  # a cheap test before the full pattern
_MAX_EXPONENT = 400  # 1e400 is written out as 401 digits; larger exponents are not read


def read_scientific(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """``text`` with every scientific literal written as its decimal value (``1e5`` →
    ``100000``, ``2E-3`` → ``0.002``), and where each now is (start, end, as written). The
    library reads ``1e5`` in text as ``1`` and in LaTeX as ``1 \\cdot e \\cdot 5``. A literal
    with an exponent beyond 400 is replaced by ``(overflow)``: it is no number any gold
    holds, and its mantissa must not be read as the answer."""
    if _SCIENTIFIC_HINT.search(text) is None:
        return text, []
    out: list[str] = []
    spans: list[tuple[int, int, str]] = []
    pos = size = 0
    for m in _SCIENTIFIC.finditer(text):
        written = m.group(1)
        mantissa, exponent = _MANTISSA.split(written)
        if len(exponent.lstrip("+-")) > 3 or abs(int(exponent)) > _MAX_EXPONENT:
            value = "(overflow)"
        else:
            value = f"{Decimal(mantissa).scaleb(int(exponent)).normalize():f}"
        out.append(text[pos : m.start()])
        size += m.start() - pos
        spans.append((size, size + len(value), written))
        out.append(value)
        size += len(value)
        pos = m.end()
    if not spans:
        return text, []
    out.append(text[pos:])
    return "".join(out), spans


# --- rule 5: units ----------------------------------------------------------------------------

_UNIT = re.compile(r"\\(?:text|mbox|mathrm|textrm|textnormal|operatorname)\s*\{\s*([A-Za-z][A-Za-z ]*?)\s*\}")
# Spellings of common units → one name. Only units named here are compared: a word we do
# not know (a name, "units", "ways") never refuses an answer.
_UNITS: dict[str, str] = {
    spelling: unit
    for unit, spellings in {
        "mm": "mm millimeter millimeters millimetre millimetres",
        "cm": "cm centimeter centimeters centimetre centimetres",
        "m": "m meter meters metre metres",
        "km": "km kilometer kilometers kilometre kilometres",
        "in": "in inch inches",
        "ft": "ft foot feet",
        "yd": "yd yard yards",
        "mi": "mi mile miles",
        "mg": "mg milligram milligrams",
        "g": "g gram grams",
        "kg": "kg kilogram kilograms",
        "lb": "lb lbs pound pounds",
        "oz": "oz ounce ounces",
        "ml": "ml mL milliliter milliliters millilitre millilitres",
        "l": "l L liter liters litre litres",
        "s": "s sec secs second seconds",
        "min": "min mins minute minutes",
        "h": "h hr hrs hour hours",
        "day": "day days",
        "week": "week weeks",
        "year": "year years yr yrs",
        "cent": "cent cents",
        "dollar": "dollar dollars",
        "deg": "deg degree degrees",
        "rad": "rad radian radians",
    }.items()
    for spelling in spellings.split()
}


def _unit(latex: str) -> str | None:
    """The known unit named last in an answer (``\\text{ cm}`` → ``cm``), or None."""
    for word in reversed(_UNIT.findall(latex)):
        unit = _UNITS.get(word.strip()) or _UNITS.get(word.strip().lower())
        if unit is not None:
            return unit
    return None


# --- the scorer -------------------------------------------------------------------------------

_DOLLARS = re.compile(r"^\s*\$+([^$]+)\$+\s*$")


def strict_gold(ground_truth: str) -> str:
    """The gold as the ``math`` profile parses it: one enclosing ``$...$`` stripped, then
    wrapped in ``\\boxed{}`` unless already boxed."""
    m = _DOLLARS.match(ground_truth)
    return boxed_gold(m.group(1) if m else ground_truth)


def _shown(parsed: list[Any]) -> str | None:
    return clip(parsed[-1]) if parsed else None


class MathStrictScorer:
    """The ``math`` profile. Shares the gold cache and log tap of a :class:`MathVerifyScorer`
    (pass the worker's one) so a gold parsed for either profile is parsed once."""

    name = "math"

    def __init__(self, base: MathVerifyScorer | None = None) -> None:
        self._base = base if base is not None else MathVerifyScorer()

    def __call__(self, response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
        base = self._base
        base.reset_errors()
        gold_text = strict_gold(ground_truth)
        gold = base.parse_gold(gold_text)
        if base.resource_error:
            return Verdict("error", reason=f"{base.resource_error} while parsing the ground truth")
        if not gold:
            return Verdict("bad_ground_truth", reason="nothing parseable in the ground truth")
        response, literals = read_scientific(response)
        try:
            pred, where = _extract(response)
        except (MemoryError, RecursionError) as exc:
            return Verdict("error", extracted_gold=_shown(gold),
                           reason=f"{resource_error_reason(exc)} while parsing the response")
        if base.resource_error:
            return Verdict("error", reason=f"{base.resource_error} while parsing the response")
        if not pred:
            return Verdict("no_answer", extracted_gold=_shown(gold), reason="no answer found")
        ok, reason = self._judge(response, ground_truth, gold, pred, where)
        if reason is None and literals and where is not None:
            reason = self._scientific(gold_text, gold, ok, where, literals)
        if base.resource_error:
            return Verdict("error", _shown(pred), _shown(gold), f"{base.resource_error} in verify")
        return Verdict("correct" if ok else "incorrect", _shown(pred), _shown(gold), reason)

    def _scientific(self, gold_text: str, gold: list[Any], ok: bool, where: re.Match[str],
                    literals: list[tuple[int, int, str]]) -> str | None:
        """The ``scientific`` reason when the final answer holds a literal like ``1e5`` and
        reading its mantissa alone (as the library does) would give another verdict."""
        for start, end, written in literals:
            if where.start() <= start and end <= where.end():
                mantissa = _parse_boxed((_MANTISSA.split(written)[0],))
                if bool(mantissa) and self._base.verify(gold_text, gold, mantissa) != ok:
                    return rule_reason("scientific", f"{clip(written, 30)} read as its value, "
                                       "not as its mantissa")
        return None

    def _judge(
        self,
        response: str,
        ground_truth: str,
        gold: list[Any],
        pred: list[Any],
        where: re.Match[str] | None,
    ) -> tuple[bool, str | None]:
        ok = self._base.verify(strict_gold(ground_truth), gold, pred)
        reason: str | None = None
        g0 = gold[0] if isinstance(gold[0], sympy.Basic) else None
        p0 = pred[0] if isinstance(pred[0], sympy.Basic) else None
        if g0 is not None and p0 is not None:
            decided = _percent(g0, p0)
            if decided is not None:  # rule 3
                verdict, why = decided
                if verdict != ok:
                    ok, reason = verdict, why
            elif ok and not _same_text(gold, pred):  # rule 2
                for g, p in _pairs(g0, p0):
                    veto = _number_veto(g, p)
                    if veto is not None:
                        return False, veto
            elif not ok and _relation_as_set(g0, p0):  # rule 4
                ok, reason = True, rule_reason(
                    "rescued", "the inequality compared as a set (the library does not)")
        if not ok:
            return False, reason
        dropped = _dropped_element(gold, pred)  # rule 6
        if dropped is not None:
            return False, dropped
        distinct = (  # rule 1: boxes anywhere, then the closing part
            _distinct_boxed(response)
            if where is not None and _BOX.search(where.group(0)) and not _several(g0)
            else None
        )
        hedged = _hedged(response, where, pred, distinct[:-1] if distinct else [])
        if hedged is not None:
            return False, hedged
        units = _units_differ(ground_truth, where)  # rule 5
        if units is not None:
            return False, units
        return True, reason


def _units_differ(ground_truth: str, where: re.Match[str] | None) -> str | None:
    if where is None or "\\" not in ground_truth:
        return None
    answer = where.group(0)
    boxes = boxed_answers(answer)
    if boxes:
        answer = boxes[-1][2]
    g, p = _unit(ground_truth), _unit(answer)
    if g is not None and p is not None and g != p:
        return rule_reason("units", f"units differ: {clip(p, 20)} vs gold {clip(g, 20)}")
    return None


def _relation_as_set(gold: Any, pred: Any) -> bool:
    """Rule 4: gold ``[1, 2)`` or ``x \\in [1, 2)``, answer ``1 \\le x < 2``."""
    if not is_relation(pred):
        return False
    if isinstance(gold, sympy.Eq) and isinstance(gold.rhs, sympy.Set):
        if pred.free_symbols != {gold.lhs}:
            return False
        gold = gold.rhs
    if not isinstance(gold, sympy.Set):
        return False
    return bool(verify(gold, pred, allow_set_relation_comp=True, timeout_seconds=None))


# a list element left empty: ", ," / a trailing ", " / a leading ","; not LaTeX's "\,"
_EMPTY_ELEMENT = re.compile(r"(?<!\\),\s*,|(?<!\\),\s*$|^\s*,")


def _dropped_element(gold: list[Any], pred: list[Any]) -> str | None:
    """Rule 6: the library's normaliser deletes ``\\ldots`` and friends, leaving an empty list
    element, and the rest may parse to anything (``1, 2, \\ldots, n`` parses to 2). Then the
    two are compared as written (spaces aside)."""
    g, p = gold[-1], pred[-1]
    if not (isinstance(g, str) and isinstance(p, str)):
        return None
    if not (_EMPTY_ELEMENT.search(g) or _EMPTY_ELEMENT.search(p)):
        return None
    if _SPACES.sub("", g) == _SPACES.sub("", p):
        return None
    return rule_reason("dropped", "an element did not parse (e.g. \\ldots): compared as written, "
                       "and they differ")


def _several(gold: Any) -> bool:
    """A gold of several values (a list, a set, several equations): its parts may be boxed
    one by one."""
    if isinstance(gold, sympy.FiniteSet | sympy.Tuple):
        return len(gold.args) > 1
    return isinstance(gold, sympy.And) or (
        isinstance(gold, sympy.Eq) and isinstance(gold.rhs, sympy.FiniteSet | sympy.Tuple)
    )


def _same_text(gold: list[Any], pred: list[Any]) -> bool:
    g, p = gold[-1], pred[-1]
    return isinstance(g, str) and isinstance(p, str) and bool(g.strip()) and g.strip() == p.strip()
