"""The light scorers: GSM8K, numeric with tolerance, multiple choice. Pure functions."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from reward_service.scorers.base import Verdict, clip
from reward_service.scorers.rules import hedge
from reward_service.scorers.rules.number_words import WORDS, word_value
from reward_service.scorers.rules.numbers import (
    after_hashes,
    hashes,
    last_boxed,
    last_number,
    last_number_span,
    to_fraction,
)
from reward_service.scorers.rules.text_forms import plain_text, prepare
from reward_service.scorers.rules.think import judged_text, unclosed

__all__ = ["score_choice", "score_gsm8k", "score_numeric"]


def _gold_number(ground_truth: str) -> str | None:
    gt = ground_truth.strip()
    if "####" in gt:
        return after_hashes(gt)
    boxed = last_boxed(gt)
    return boxed if boxed is not None else gt


# a number as GSM8K responses write one ($1,234.50, -3); no operator after it (work, not a value)
_GSM8K_FORMS = (
    r"(?:(?:\$\s?)?+([-+]?+(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+)(?![\d.]\d){words})"
    r"(?!\s*(?:[-+*/^=<>\u00d7]|x\s*\d))"  # \u00d7: the multiplication sign
)
GSM8K_NUMBER = re.compile(_GSM8K_FORMS.replace("{words}", ""))
# or in words (six, thirty-one: number_words.py), where a value is expected (hedge.candidates)
GSM8K_VALUE = re.compile(_GSM8K_FORMS.replace("{words}", "|(" + WORDS + ")"))


def _value(text: str) -> Fraction | None:
    """A candidate's value: a number, or a number in words."""
    return word_value(text) if text[:1].isalpha() else to_fraction(text)


def _judged(response: str, params: Mapping[str, Any], gold: str | None) -> str | Verdict:
    """The response as the rules read it (``think.judged_text``), or the verdict that ends
    scoring: ``unclosed_think``, or an ``error`` for a bad ``extra.think``."""
    try:
        text = judged_text(response, params)
    except ValueError as exc:
        return Verdict("error", reason=str(exc))
    return unclosed(clip(gold) if gold else None) if text is None else text


def _gsm8k_hedge(response: str, pred: object) -> str | None:
    """One committed answer (``hedge.py``): every ``#### n`` anywhere, and the candidates of
    the closing part, must be the answer's number (``#### 20`` then ``#### 24`` is a hedge;
    ``The answer is 20. #### 20`` is not)."""
    marks = hashes(response)
    if marks:
        last = marks[-1]
        commit, span = last.start(), last.span(1)
        extra = [m.group(1) for m in marks[:-1]]
    else:
        found = last_number_span(response)
        if found is None:
            return None
        commit, span, extra = found[0], found, []
    others = hedge.distinct_candidates(
        response, commit, span, GSM8K_VALUE, lambda v: _value(v) == pred, extra,
        scan=GSM8K_NUMBER)
    return hedge.hedge_reason(response[span[0] : span[1]], others, clip) if others else None


def score_gsm8k(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """GSM8K: the number after the last ``####``, else the last number; exact comparison.
    A response that offers more than one distinct final answer (``#### 5 or 6``, ``#### 20``
    then ``#### 24``, ``... 17, or maybe 18``) is incorrect (``hedged``). With
    ``extra.format_score`` a wrong but well-formed answer (a number after ``####``, one
    committed answer) scores that much; its status stays ``incorrect``."""
    gold_text = _gold_number(prepare(ground_truth))
    gold = to_fraction(gold_text) if gold_text else None
    if gold is None:
        return Verdict("bad_ground_truth", reason="ground truth is not a number")
    format_score = _format_score(params)
    text = _judged(response, params, gold_text)
    if isinstance(text, Verdict):
        return text
    response = text
    marks = hashes(response)
    pred_text = marks[-1].group(1) if marks else last_number(response)
    if pred_text is None:
        return Verdict("no_answer", extracted_gold=clip(gold_text), reason="no number found")
    pred = to_fraction(pred_text)
    if pred is None:
        return Verdict("no_answer", clip(pred_text), clip(gold_text), "answer is not a number")
    if pred == gold:
        hedged = _gsm8k_hedge(response, pred)
        if hedged is not None:
            return Verdict("incorrect", clip(pred_text), clip(gold_text), hedged)
        return Verdict("correct", clip(pred_text), clip(gold_text))
    if format_score and marks and _gsm8k_hedge(response, pred) is None:
        return Verdict("incorrect", clip(pred_text), clip(gold_text),
                       f"format_score: a wrong answer after '####' earns {format_score:g}",
                       format_score)
    return Verdict("incorrect", clip(pred_text), clip(gold_text))


def _format_score(params: Mapping[str, Any]) -> float:
    """``extra.format_score`` (default 0): the score of a well-formed wrong answer, as verl's
    ``gsm8k.compute_score(..., format_score=)`` pays it; a number in [0, 1)."""
    value = params.get("format_score", 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
        raise ValueError("extra.format_score must be a number in [0, 1)")
    return float(value)


def _tolerance(params: Mapping[str, Any], key: str, default: float) -> float:
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"extra.{key} must be a number >= 0")
    return float(value)


def score_numeric(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """Numbers compared with tolerance: ``|a-b| <= max(rel_tol*max(|a|,|b|), abs_tol)``."""
    try:
        rel_tol = _tolerance(params, "rel_tol", 1e-6)
        abs_tol = _tolerance(params, "abs_tol", 1e-9)
    except ValueError as exc:
        return Verdict("error", reason=str(exc))
    gold_text = _gold_number(prepare(ground_truth))
    gold = to_fraction(gold_text) if gold_text else None
    if gold is None:
        return Verdict("bad_ground_truth", reason="ground truth is not a number")
    text = _judged(response, params, gold_text)
    if isinstance(text, Verdict):
        return text
    response = text
    pred_text = last_boxed(response) or after_hashes(response) or last_number(response)
    if pred_text is None:
        return Verdict("no_answer", extracted_gold=clip(gold_text), reason="no number found")
    pred = to_fraction(pred_text)
    if pred is None:
        return Verdict("no_answer", clip(pred_text), clip(gold_text), "answer is not a number")
    ok = pred == gold or math.isclose(float(pred), float(gold), rel_tol=rel_tol, abs_tol=abs_tol)
    return Verdict.judge(ok, clip(pred_text), clip(gold_text))


_LETTER_PATTERNS = (
    r"\\boxed\{\s*\(?\s*\\?(?:text\{)?([A-Z])\}?\s*\)?\s*\}",
    r"answer\s*(?:is|:)?\s*:?\s*\**\s*\(?([A-Z])\)?(?![A-Za-z])",
    r"\(([A-Z])\)",
)


_LETTER_VALUES: dict[str, re.Pattern[str]] = {}


def _letter_value(choices: str) -> re.Pattern[str]:
    """One choice letter as a value: ``(B)``, ``\\boxed{B}``, ``\\textbf{B}``, or a capital
    standing alone before punctuation, ``or``/``and`` or the end (not the pronoun in ``I am``)."""
    pattern = _LETTER_VALUES.get(choices)
    if pattern is None:
        c = "[" + re.escape(choices) + "]"
        pattern = _LETTER_VALUES[choices] = re.compile(
            r"\\boxed\{\s*\(?\s*\\?(?:text(?:bf)?\{)?(" + c + r")\}?\s*\)?\s*\}"
            r"|\(\s*(" + c + r")\s*\)|\*\*\(?(" + c + r")\)?\*\*"
            r"|(?<![A-Za-z'\\])(" + c + r")(?![A-Za-z'])(?=\s*(?:[).,;:!?/]|$|\s+(?:or|and)\b))"
        )
    return pattern


def _choice_hedge(response: str, pred: str, choices: str, found: re.Match[str], bare: bool) -> str | None:
    """One committed letter (``hedge.py``): every candidate of the closing part must be the
    answer's letter (``(B) or (C)``, ``(B). Or maybe (C).``, ``(B)/(C)`` are hedges)."""
    value = _letter_value(choices)
    span = found.span(1)
    commit = span[0] if bare else found.start()
    slash = re.compile(r"\s*\)?\s*/\s*(?=\(|\\boxed|[A-Z])").match(response, span[1])
    extra = []
    if slash is not None:
        other = value.match(response, slash.end())
        if other is not None:
            extra.append(next(g for g in other.groups() if g))
    others = hedge.distinct_candidates(
        response, commit, span, value, lambda v: v.upper() == pred, extra)
    return hedge.hedge_reason(pred, others, clip) if others else None


def score_choice(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """Multiple choice: the last committed letter among ``extra.choices`` (default A-J).
    A response that offers more than one distinct letter as its answer (``(B) or (C)``,
    ``(B). Actually, (C).``) is incorrect (``hedged``)."""
    choices = str(params.get("choices", "ABCDEFGHIJ")).upper()
    gold = plain_text(ground_truth).strip().strip("().: ").upper()
    if len(gold) != 1 or gold not in choices:
        return Verdict("bad_ground_truth", reason=f"ground truth is not one of {choices!r}")
    text = _judged(response, params, gold)
    if isinstance(text, Verdict):
        return text
    response = text
    pred: str | None = None
    last: re.Match[str] | None = None
    bare = False
    for i, pattern in enumerate(_LETTER_PATTERNS):
        found = [m for m in re.finditer(pattern, response, flags=re.IGNORECASE)
                 if m.group(1).upper() in choices]
        if found:
            last, pred, bare = found[-1], found[-1].group(1).upper(), i == len(_LETTER_PATTERNS) - 1
            break
    if pred is None:
        stripped = response.strip().strip("().: ").upper()
        pred = stripped if len(stripped) == 1 and stripped in choices else None
    if pred is None:
        return Verdict("no_answer", extracted_gold=gold, reason="no choice letter found")
    if pred == gold and last is not None:
        hedged = _choice_hedge(response, pred, choices, last, bare)
        if hedged is not None:
            return Verdict("incorrect", pred, gold, hedged)
    return Verdict.judge(pred == gold, pred, gold)
