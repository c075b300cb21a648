"""The default math profile, ``math``: math-verify's verdict, made strict where it is wrong.

It extracts and compares exactly as the ``math_verify`` profile does (same extraction, same
``verify``, same per-worker gold cache), then applies a few rules. A rule that changes the
library's verdict says so in the verdict's ``reason``.

Which answer is final: the library's choice, i.e. the last one written in the strongest form
present (``The final answer is ...`` > ``\\boxed{}`` > ``Answer: ...`` > ``answer ... is`` >
a bare number), so a revised answer (``the answer is 7. Wait ... the answer is 8``) is judged
by its last statement. A box is a declaration of the final answer: two different boxes are
two final answers, not a revision (rule 1).

Rules (the value rules 7, 8, 2, 3, 4, 6 run first, then the answer rules 1, 9 and 5 on what
is still correct); each is documented in full beside its code:

1. **One committed answer** (veto). A response earns the reward only if it commits to one
   final answer: different ``\\boxed{}`` answers, or alternatives in the response's closing
   part (``The final answer is 5. Or maybe 6.``), are a hedge. ``strict_commit.py`` (where
   the closing part starts and why: ``hedge.py``).
2. **Exact values stay exact** (veto). Values the library rounds or chops into equality
   (``0.0000001 = 0.0000002``, ``1/2^98 = 1/2^99``) are different; ``0.333333 = 1/3``
   still holds. ``strict_values.py``.
3. **Percent, one reading** (decides both ways when either side has a ``%``): one reading
   per gold, chosen by the gold alone (``10%`` matches ``10`` and ``0.1``; ``1000%`` does
   not match ``10``, ``0.1%`` does not match ``0.1``). ``strict_values.py``.
4. **Inequality for an interval** (rescue). Answer ``1 \\le x < 2`` matches gold
   ``[1, 2)`` (``strict_values.py``); a union of inequalities (``x < 2 or x > 3``), a chained
   one and set-builder notation (``\\{x \\mid -1 < x \\le 5\\}``) match the equal interval
   or union, endpoints included (``solution_sets.py``).
5. **Units must not contradict** (veto). ``10\\text{ m}`` is not ``10\\text{ cm}``; a unit
   on one side only, or a word not in the table, refuses nothing. ``strict_forms.py``.
6. **Nothing dropped** (veto). When the normaliser deleted an element (``\\ldots``), the two
   must be the same as written. ``strict_forms.py``.
7. **Scientific notation** (both ways). ``1e5`` is read as its value ``100000``, not as its
   mantissa (:func:`read_scientific`). ``strict_forms.py``.
8. **A gold's trailing letter is a variable** (both ways). The library deletes ``t``, ``h``,
   ``c``, ... after a number as units, so gold ``4t`` reads as ``4``; a letter written right
   after a digit or ``}`` in the gold is kept, on both sides. ``variables.py``.
9. **One answer, not one per reading** (veto, after rule 1). Values bound to different
   readings or cases in the closing part with no commitment to one (``6 if rotations count
   as different, 2 if they do not``) are refused (``per_reading``). ``readings.py``.

Module map: this module holds the scorer and its flow (gold, extraction, the rules in
order, the verdict); ``strict_read.py`` reads the response (the library's extraction,
keeping where the final answer was found; the boxes; a cached parse of a boxed answer);
``strict_commit.py`` is rule 1, ``strict_values.py`` rules 2, 3, 4, ``strict_forms.py``
rules 5, 6, 7.

Every overriding reason starts with its rule's label (``rules.py``: ``hedged``, ``exact``,
``percent``, ``rescued``, ``units``, ``dropped``, ``scientific``, ``variable``,
``per_reading``).

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
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import sympy

from reward_service.scorers.base import Verdict, clip
from reward_service.scorers.math_verify_scorer import (
    MathVerifyScorer,
    boxed_gold,
    resource_error_reason,
)
from reward_service.scorers.rule_labels import rule_reason
from reward_service.scorers.rules.solution_sets import answer_texts, is_set_gold, union_rescue
from reward_service.scorers.rules.strict_commit import MATH_VALUE, answer_span, hedged, per_reading
from reward_service.scorers.rules.strict_forms import (
    dropped_element,
    read_scientific,
    scientific_reason,
    units_differ,
)
from reward_service.scorers.rules.strict_read import boxed_answers
from reward_service.scorers.rules.strict_read import (
    extract as _extract,  # tests import _extract here
)
from reward_service.scorers.rules.strict_values import (
    exact_veto,
    percent,
    relation_as_set,
    same_text,
)
from reward_service.scorers.rules.text_forms import (
    answer_needs_forms,
    join_digit_groups,
    prepare,
    symbols_as_words,
)
from reward_service.scorers.rules.think import judged_text, unclosed
from reward_service.scorers.rules.variables import letter_gold, variable_verdict

__all__ = ["MATH_VALUE", "MathStrictScorer", "boxed_answers", "gold_form", "read_scientific",
           "strict_gold"]


_DOLLARS = re.compile(r"^\s*\$+([^$]+)\$+\s*$")


@lru_cache(maxsize=4096)
def gold_form(ground_truth: str) -> str:
    """The gold as the rules read it: ``text_forms.prepare`` (invisible characters, digits in
    other forms, digit groups), scientific literals as their values (``1e-5`` is 0.00001)."""
    return read_scientific(prepare(ground_truth))[0]


def strict_gold(ground_truth: str) -> str:
    """The gold as the ``math`` profile parses it: one enclosing ``$...$`` stripped, then
    wrapped in ``\\boxed{}`` unless already boxed."""
    m = _DOLLARS.match(ground_truth)
    return boxed_gold(m.group(1) if m else ground_truth)


def _shown(parsed: list[Any]) -> str | None:
    return clip(parsed[-1]) if parsed else None


def _read(text: str) -> tuple[str, list[tuple[int, int, str]], list[Any], re.Match[str] | None]:
    """(text as read, its scientific literals, the parsed answer, where it was found); read
    again with digit groups joined and disjunction symbols as words when the answer found
    first needs them (``text_forms.answer_needs_forms``)."""
    response, literals = read_scientific(text)
    pred, where = _extract(response)
    if where is not None and answer_needs_forms(response, where.start(), where.end()):
        response, literals = read_scientific(symbols_as_words(join_digit_groups(text)))
        pred, where = _extract(response)
    return response, literals, pred, where


class MathStrictScorer:
    """The ``math`` profile. Shares the gold cache and log tap of a :class:`MathVerifyScorer`
    (pass the worker's one) so a gold parsed for either profile is parsed once."""

    name = "math"

    def __init__(self, base: MathVerifyScorer | None = None) -> None:
        self._base = base if base is not None else MathVerifyScorer()

    def __call__(self, response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
        base = self._base
        base.reset_errors()
        ground_truth = gold_form(ground_truth)
        gold_text = strict_gold(ground_truth)
        gold = base.parse_gold(gold_text)
        if base.resource_error:
            return Verdict("error", reason=f"{base.resource_error} while parsing the ground truth")
        if not gold:
            return Verdict("bad_ground_truth", reason="nothing parseable in the ground truth")
        try:
            text = judged_text(response, params, forms=False)  # text_forms.py, think.py
        except ValueError as exc:
            return Verdict("error", reason=str(exc))
        if text is None:
            return unclosed(_shown(gold))
        try:
            response, literals, pred, where = _read(text)
        except (MemoryError, RecursionError) as exc:
            return Verdict("error", extracted_gold=_shown(gold),
                           reason=f"{resource_error_reason(exc)} while parsing the response")
        if base.resource_error:
            return Verdict("error", reason=f"{base.resource_error} while parsing the response")
        if not pred:
            return Verdict("no_answer", extracted_gold=_shown(gold), reason="no answer found")
        ok, reason = self._judge(response, ground_truth, gold_text, gold, pred, where)
        if reason is None and literals and where is not None:  # rule 7
            reason = scientific_reason(
                where, literals, ok, lambda mantissa: base.verify(gold_text, gold, mantissa))
        if base.resource_error:
            return Verdict("error", _shown(pred), _shown(gold), f"{base.resource_error} in verify")
        return Verdict("correct" if ok else "incorrect", _shown(pred), _shown(gold), reason)

    def _judge(
        self,
        response: str,
        ground_truth: str,
        gold_text: str,
        gold: list[Any],
        pred: list[Any],
        where: re.Match[str] | None,
    ) -> tuple[bool, str | None]:
        ok = self._base.verify(gold_text, gold, pred)
        reason: str | None = None
        g0 = gold[0] if isinstance(gold[0], sympy.Basic) else None
        p0 = pred[0] if isinstance(pred[0], sympy.Basic) else None
        letter = letter_gold(ground_truth)
        if letter is not None:  # rule 8: decides the value both ways
            texts = answer_texts(response, answer_span(where)[1:] if where else None, None)
            kept = variable_verdict(gold_text, letter, texts[0] if texts else None)
            if kept is not None:
                if kept[0] != ok:
                    ok, reason = kept
                g0 = None  # the value rules read the library's parse, which lost the letter
        if g0 is not None and p0 is not None:
            decided = percent(g0, p0)
            if decided is not None:  # rule 3
                verdict, why = decided
                if verdict != ok:
                    ok, reason = verdict, why
            elif ok and not same_text(gold, pred):  # rule 2
                veto = exact_veto(g0, p0)
                if veto is not None:
                    return False, veto
            elif not ok and relation_as_set(g0, p0):  # rule 4
                ok, reason = True, rule_reason(
                    "rescued", "the inequality compared as a set (the library does not)")
        if not ok and reason is None and g0 is not None and is_set_gold(g0):
            # rule 4 widened: a union of inequalities, set-builder notation
            span = answer_span(where)[1:] if where is not None else None
            reason = union_rescue(g0, answer_texts(response, span, pred[-1]))
            ok = reason is not None
        if not ok:
            return False, reason
        dropped = dropped_element(gold, pred)  # rule 6
        if dropped is not None:
            return False, dropped
        hedge = hedged(response, where, pred, g0)  # rule 1
        if hedge is not None:
            return False, hedge
        reading = per_reading(response, where, pred, g0)  # rule 9
        if reading is not None:
            return False, reading
        units = units_differ(ground_truth, where)  # rule 5
        if units is not None:
            return False, units
        return True, reason

