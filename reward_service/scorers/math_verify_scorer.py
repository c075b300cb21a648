"""math-verify with the library's default extraction and comparison configs.

Parity contract: the verdict equals in-process ``verify(parse(gold), parse(response))`` with
default configs. Differences, all deliberate:

* the library's own ``signal.alarm`` timeouts are off (``None``): the supervisor enforces a
  wall-clock deadline by killing the worker, which also stops work stuck inside C;
* the parsed gold is cached per worker (a GRPO group shares one gold);
* sympy's ``parse_expr`` namespace is built once (``sympy_namespace.py``), not per number;
* math-verify's two 20-entry parse memos hold 8192 entries, and the numbers it extracts are
  built through a memo (``parse_cache.py``);
* an extraction regex is not run on a text that lacks a string all its matches contain
  (``regex_prefilter.py``);
* ``verify`` is decided without sympy when every (gold, answer) pair it would compare is two
  rationals, a float and a number far apart, or involves a string (:func:`integer_verdict`,
  exact by reading the library);
* ``verify`` is memoised per worker on (gold text, the parsed answer's structure as sympy
  compares it, class by class): within a GRPO group most answers repeat, and verify is a
  pure function of its inputs;
* a ``MemoryError`` (the worker's address-space cap) or ``RecursionError`` that the library
  logs is reported as ``error`` with a reason instead of being swallowed into a silent
  ``incorrect``/``no_answer`` as the library does.

The speed patches (namespace, memos, prefilter) are not installed by building a scorer: see
``patches.py``. Building one installs only the log tap (a handler on the library's two
loggers), without which a resource error could not be told from a wrong answer.

Public API for scorers that build on this one (``math_strict.py``): :meth:`parse_gold`,
:meth:`verify`, :meth:`reset_errors` and :attr:`resource_error`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from math_verify import parse, verify
from sympy import Basic, Float, Number, Rational

from reward_service.lru import LRU
from reward_service.scorers.base import Verdict, clip
from reward_service.scorers.patches import MAX_KEY_CHARS

__all__ = ["MathVerifyScorer", "boxed_gold", "resource_error_reason", "verify_default"]


RESOURCE_ERRORS: dict[type[BaseException], str] = {
    MemoryError: "memory limit reached",
    RecursionError: "recursion limit reached",
}


def resource_error_reason(exc: BaseException) -> str | None:
    """``"memory limit reached"`` / ``"recursion limit reached"`` for a resource error, else None."""
    return next((why for t, why in RESOURCE_ERRORS.items() if isinstance(exc, t)), None)


class _ErrorTap(logging.Handler):
    """Swallows math-verify's log records (they embed whole inputs) and notes resource errors
    (``MemoryError``, ``RecursionError``) that the library caught and logged."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.resource_error: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and self.resource_error is None:
            self.resource_error = resource_error_reason(exc)


_TAP: _ErrorTap | None = None


def _install_tap() -> _ErrorTap:
    """The process's one tap (every scorer instance shares it, so none silences another)."""
    global _TAP
    if _TAP is None:
        _TAP = _ErrorTap()
        for name in ("math_verify", "latex2sympy2_extended"):
            lg = logging.getLogger(name)
            lg.handlers[:] = [_TAP]
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
    return _TAP


def _evaluate_alone(parsed: list[Any]) -> None:
    """What ``verify`` does to a gold by itself before it compares it with anything:
    math-verify 0.9.0's ``sympy_numeric_eq`` evaluates both sides with ``doit()``. A gold such
    as ``2^{2^{2^{2^{20}}}}`` parses in milliseconds and then hangs there, for every answer.
    Done here, inside the worker's gold phase, that hang is the gold's (``bad_ground_truth``
    for every item that shares it, ``server/pool/bad_golds.py``), not each response's. The
    result is not kept (sympy's own cache remembers it for the ``verify`` that follows):
    verdicts are unchanged."""
    for value in parsed:
        if isinstance(value, Basic):
            # as math-verify's safe_sympy_doit: an error here, verify meets again and handles
            with contextlib.suppress(Exception):
                value.doit()


def boxed_gold(ground_truth: str) -> str:
    """Wrap the gold in ``\\boxed{}`` unless it already has one (as verl does)."""
    return ground_truth if "\\boxed" in ground_truth else "\\boxed{" + ground_truth + "}"


def _shown(parsed: list[Any]) -> str | None:
    # parse() returns [sympy_object, matched_string] (or just the string on fallback).
    return clip(parsed[-1]) if parsed else None


_MAX_NODES = 2000


class _TooLarge(Exception):
    pass


def _structure(x: Basic, budget: list[int]) -> tuple[Any, ...]:
    """``x`` as sympy compares it (``__eq__`` and the cache use ``_hashable_content``: the args,
    a number's value and precision, a symbol's name and assumptions), with the class of every
    node. No printing and no evaluation, so it cannot raise or run long on odd expressions."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLarge
    return (type(x), tuple(_structure(a, budget) if isinstance(a, Basic) else a
                           for a in x._hashable_content()))


def _answer_key(parsed: list[Any]) -> tuple[Any, ...] | None:
    """A key equal for two parse results only if they are the same structure, class by class
    (two classes may share a name, e.g. sympy's and latex2sympy2's ``FiniteSet``). ``None``
    when an element is neither text nor a sympy expression, or the key would be large or
    unhashable: such answers are verified every time."""
    key: list[Any] = []
    budget = [_MAX_NODES]
    size = 0
    try:
        for x in parsed:
            if isinstance(x, str):
                key.append(x)
                size += len(x)
            elif isinstance(x, Basic):
                key.append(_structure(x, budget))
            else:
                return None
        if size > MAX_KEY_CHARS:
            return None
        out = tuple(key)
        hash(out)
    except (_TooLarge, TypeError, RecursionError):
        return None
    return out


# A Float-involving pair whose values differ by more than this is decided without sympy
# (see integer_verdict); closer pairs go to the library.
_FAR_ABS = Fraction(1, 10**3)
_FAR_REL = Fraction(1, 10**6)
_MAX_BITS = 1024  # larger numerators, denominators, exponents: the library decides
_MIN_PREC = 53  # bits; every Float math-verify builds has at least this (15 digits)


def _exact_value(x: Any) -> Fraction | None:
    """The exact value of a finite sympy ``Rational`` (``Integer`` included) or ``Float`` of at
    least double precision, as a fraction; None for anything else or anything huge."""
    if isinstance(x, Rational):
        if x.p.bit_length() > _MAX_BITS or x.q.bit_length() > _MAX_BITS:
            return None
        return Fraction(x.p, x.q)
    if isinstance(x, Float):
        if x._prec < _MIN_PREC:
            return None
        sign, man, exp, bc = x._mpf_
        if not man:  # zero is (0, 0, 0, 0); nan and the infinities have other exponents
            return Fraction(0) if exp == 0 and bc == 0 else None
        if abs(exp) > _MAX_BITS or bc > _MAX_BITS:
            return None
        value = Fraction(man) * 2**exp if exp >= 0 else Fraction(man, 2**-exp)
        return -value if sign else value
    return None


def _numbers_differ(g: Fraction, t: Fraction) -> bool:
    return abs(g - t) > _FAR_ABS + _FAR_REL * max(abs(g), abs(t))


def integer_verdict(gold: list[Any], pred: list[Any]) -> bool | None:
    """``verify(gold, pred)`` (default options) when it is decidable without sympy, else None.

    verify is ``any(compare(g, t) for g, t in product(gold, pred))``, and for these pairs
    math-verify 0.9.0's ``compare_single_extraction`` reduces to:

    * two strings: equal after ``strip()`` and not empty;
    * a string and a sympy object: ``False``;
    * two sympy ``Rational`` (``Integer`` included): ``sympy_expr_eq`` → ``sympy_str_eq`` is
      ``g == t``; if unequal, ``sympy_numeric_eq`` compares ``g == t`` again (its Integer
      branch, or ``doit()`` of both: a number's ``doit`` is itself) and ``sympy_symbolic_eq``
      simplifies ``g - t``, a nonzero Rational, which ``simplify`` returns as is (an atom), not
      zero. So ``g == t``, skipping a ``simplify`` (about 0.1 ms) per wrong answer;
    * a sympy ``Float`` (finite, at least double precision) with a ``Float`` or ``Rational``
      whose exact values differ by more than ``1e-3 + 1e-6 * max(|g|, |t|)``: ``False``.
      ``sympy_str_eq`` is ``g == t``, and sympy's number equality is exact (different values
      are unequal). ``sympy_numeric_eq`` compares ``g.round(6) == t.round(6)``: ``round``
      moves a value by at most 0.5e-6 plus rounding to ``min(mag + 6, dps)`` significant
      digits (dps >= 15 here), far inside the margin, so the rounded values differ too (and
      an exception there is caught: ``False``). ``sympy_symbolic_eq`` simplifies ``g - t``:
      the difference of a Float and a number is the correctly rounded difference at the
      Float's precision (53+ bits), nonzero for values this far apart, and ``simplify``
      returns a number unchanged. This skips ``round`` and ``simplify`` (about 1.5 ms) for
      each wrong decimal answer (``10.95`` against ``460``).

    Any other pair (close floats, expressions, sets, percentages, ...) → None: the library
    decides. ``tests/test_parse_cache.py`` compares this with ``verify`` on every pair of
    numbers the corpus and the golden suite extract, and on random and adversarial ones.
    """
    for g in gold:
        for t in pred:
            if isinstance(g, str) and isinstance(t, str):
                a, b = g.strip(), t.strip()
                ok = bool(a) and a == b
            elif isinstance(g, Rational) and isinstance(t, Rational):
                ok = bool(g == t)
            elif isinstance(g, Number) and isinstance(t, Number):
                gv, tv = _exact_value(g), _exact_value(t)
                if gv is None or tv is None or not _numbers_differ(gv, tv):
                    return None
                ok = False
            elif (isinstance(g, str) and isinstance(t, Basic)) or (
                    isinstance(t, str) and isinstance(g, Basic)):
                ok = False
            else:
                return None
            if ok:
                return True
    return False


def verify_default(gold: list[Any], pred: list[Any]) -> bool:
    """``verify(gold, pred)`` with default options (timeouts off), through
    :func:`integer_verdict` first."""
    fast = integer_verdict(gold, pred)
    if fast is not None:
        return fast
    return bool(verify(gold, pred, timeout_seconds=None))


class MathVerifyScorer:
    name = "math_verify"

    def __init__(self, gold_cache_size: int = 4096, verdict_cache_size: int = 16384, *,
                 on_gold_parse: Callable[[bool], None] | None = None) -> None:
        self._on_gold_parse = on_gold_parse  # True before a gold is parsed, False after
        self._tap = _install_tap()
        self._gold = LRU(gold_cache_size)  # gold text → parse(gold text)
        self._verdicts = LRU(verdict_cache_size)  # (gold text, answer key) → verify's result

    def verify(self, gold_text: str, gold: list[Any], pred: list[Any]) -> bool:
        """``verify(gold, pred)`` with default options; ``gold`` must be ``parse(gold_text)``.
        Memoised on (gold text, the answer's structure); a verify that ran out of memory is
        not remembered."""
        fast = integer_verdict(gold, pred)
        if fast is not None:
            return fast
        answer = _answer_key(pred) if len(gold_text) <= MAX_KEY_CHARS else None
        if answer is None:
            return bool(verify(gold, pred, timeout_seconds=None))
        key = (gold_text, answer)
        hit = self._verdicts.get(key)
        if hit is not None:
            return bool(hit)
        ok = bool(verify(gold, pred, timeout_seconds=None))
        if self._tap.resource_error is None:
            self._verdicts.put(key, ok)
        return ok

    def parse_gold(self, gold_text: str) -> list[Any]:
        """``parse(gold_text)`` (default configs), cached per scorer; a parse that hit a
        resource error is not remembered. A parse that is not a cache hit is announced to
        ``on_gold_parse`` (before: True, after: False), and with a hook the gold is also
        evaluated alone in between (:func:`_evaluate_alone`), so a deadline passed there is
        the gold's."""
        hit: list[Any] | None = self._gold.get(gold_text)
        if hit is not None:
            return hit
        hook = self._on_gold_parse
        if hook is not None:
            hook(True)
        parsed = parse(gold_text, parsing_timeout=None)  # type: ignore[arg-type]
        if hook is not None:
            _evaluate_alone(parsed)
            hook(False)
        if self._tap.resource_error is None:
            self._gold.put(gold_text, parsed)
        return parsed

    def reset_errors(self) -> None:
        """Forget resource errors noted so far: call before scoring an item."""
        self._tap.resource_error = None

    @property
    def resource_error(self) -> str | None:
        """A resource error the library caught and logged since :meth:`reset_errors`
        (``"memory limit reached"``, ``"recursion limit reached"``), or None."""
        return self._tap.resource_error

    def __call__(self, response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
        self.reset_errors()
        gold_text = boxed_gold(ground_truth)
        gold = self.parse_gold(gold_text)
        if self.resource_error:
            return Verdict("error", reason=f"{self.resource_error} while parsing the ground truth")
        if not gold:
            return Verdict("bad_ground_truth", reason="nothing parseable in the ground truth")
        pred = parse(response, parsing_timeout=None)  # type: ignore[arg-type]
        if self.resource_error:
            return Verdict("error", reason=f"{self.resource_error} while parsing the response")
        if not pred:
            return Verdict("no_answer", extracted_gold=_shown(gold), reason="no answer found")
        ok = self.verify(gold_text, gold, pred)
        if self.resource_error:
            return Verdict("error", _shown(pred), _shown(gold), f"{self.resource_error} in verify")
        return Verdict.judge(ok, _shown(pred), _shown(gold))
