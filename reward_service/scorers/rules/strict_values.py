"""Rules 2, 3 and 4 of the ``math`` profile (``math_strict.py``): values the library compares.

They run first, on the first parsed value of the gold and of the answer (sympy objects).

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
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import sympy
from latex2sympy2_extended.sets import FiniteSet as L2SFiniteSet
from math_verify import verify
from math_verify.grader import (
    get_pct_val,
    is_assignment_relation,
    is_equation,
    is_relation,
    take_last_relation,
)

from reward_service.scorers.base import clip
from reward_service.scorers.math_verify_scorer import verify_default
from reward_service.scorers.rule_labels import rule_reason

__all__ = ["exact_veto", "percent", "relation_as_set", "same_text"]


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


def exact_veto(gold: Any, pred: Any) -> str | None:
    """Rule 2: the ``exact`` reason when a pair of constants the library called equal inside
    ``gold`` and ``pred`` (top level, tuples, sets, intervals, ``x = ...``) are not, else None."""
    for g, p in _pairs(gold, pred):
        veto = _number_veto(g, p)
        if veto is not None:
            return veto
    return None


def same_text(gold: list[Any], pred: list[Any]) -> bool:
    """The final values of both are the same non-empty text: rule 2 has nothing to check."""
    g, p = gold[-1], pred[-1]
    return isinstance(g, str) and isinstance(p, str) and bool(g.strip()) and g.strip() == p.strip()


# --- rule 3: percent --------------------------------------------------------------------------


def _pct(x: Any) -> Any | None:
    return get_pct_val(x) if isinstance(x, sympy.Mul) else None


def _same(gold: Any, pred: Any) -> bool:
    # verify takes a bare value as a one-element list
    if not verify_default(gold if isinstance(gold, list) else [gold],
                          pred if isinstance(pred, list) else [pred]):
        return False
    return exact_veto(gold, pred) is None


def percent(gold: Any, pred: Any) -> tuple[bool, str] | None:
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


# --- rule 4: inequality for an interval -------------------------------------------------------


def relation_as_set(gold: Any, pred: Any) -> bool:
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
