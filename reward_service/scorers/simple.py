"""The light scorers: GSM8K, numeric with tolerance, multiple choice. Pure functions."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from reward_service.scorers.base import Verdict, clip
from reward_service.scorers.numbers import after_hashes, last_boxed, last_number, to_fraction

__all__ = ["score_choice", "score_gsm8k", "score_numeric"]


def _gold_number(ground_truth: str) -> str | None:
    gt = ground_truth.strip()
    if "####" in gt:
        return after_hashes(gt)
    boxed = last_boxed(gt)
    return boxed if boxed is not None else gt


# "#### 5 or 6" / "... 17 or 18 dollars": an alternative next to the answer taken (a hedge)
_HEDGE_AFTER_HASHES = re.compile(r"####[^\n]*?\d\s*,?\s*(?:or|and/or)\s+\$?\s*[-+]?\.?\d", re.IGNORECASE)
_HEDGE_LAST = re.compile(
    r"\d\s*,?\s*(?:or|and/or)\s+(?:maybe\s+|perhaps\s+)?\$?\s*[-+]?[\d,]*\.?\d+[^\d]*$", re.IGNORECASE
)


def _hedged(response: str, marked: bool) -> bool:
    if marked:
        return bool(_HEDGE_AFTER_HASHES.search(response[response.rfind("####") :]))
    return bool(_HEDGE_LAST.search(response[-200:]))


def score_gsm8k(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """GSM8K: the number after the last ``####``, else the last number; exact comparison.
    A hedge next to that number (``#### 5 or 6``, ``... 17 or 18 dollars``) is incorrect."""
    gold_text = _gold_number(ground_truth)
    gold = to_fraction(gold_text) if gold_text else None
    if gold is None:
        return Verdict("bad_ground_truth", reason="ground truth is not a number")
    marked = after_hashes(response)
    pred_text = marked or last_number(response)
    if pred_text is None:
        return Verdict("no_answer", extracted_gold=clip(gold_text), reason="no number found")
    pred = to_fraction(pred_text)
    if pred is None:
        return Verdict("no_answer", clip(pred_text), clip(gold_text), "answer is not a number")
    if pred == gold and _hedged(response, marked is not None):
        return Verdict("incorrect", clip(pred_text), clip(gold_text), "hedged: '... or ...' at the answer")
    return Verdict.judge(pred == gold, clip(pred_text), clip(gold_text))


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
    gold_text = _gold_number(ground_truth)
    gold = to_fraction(gold_text) if gold_text else None
    if gold is None:
        return Verdict("bad_ground_truth", reason="ground truth is not a number")
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


# "(B) or (C)", "B, C", "B and C" right after the committed letter: a hedge
_OTHER_LETTER = re.compile(
    r"\s*\)?\s*(?:,|/|\bor\b|\band\b|\band/or\b)\s*(?:maybe\s+|perhaps\s+)?"
    r"\(?\s*\\?(?:text\{)?([A-Za-z])\}?\)?(?![A-Za-z])",
    re.IGNORECASE,
)
_LETTER_BEFORE = re.compile(
    r"(?:^|[^A-Za-z\\])\(?\s*(?:\\boxed\{)?\s*([A-Za-z])\s*\}?\s*\)?\s*"
    r"(?:,|/|\bor\b|\band\b|\band/or\b)\s*(?:maybe\s+|perhaps\s+)?$",
    re.IGNORECASE,
)


def score_choice(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """Multiple choice: the last committed letter among ``extra.choices`` (default A-J).
    Another allowed letter offered right after it (``(B) or (C)``) makes it incorrect."""
    choices = str(params.get("choices", "ABCDEFGHIJ")).upper()
    gold = ground_truth.strip().strip("().: ").upper()
    if len(gold) != 1 or gold not in choices:
        return Verdict("bad_ground_truth", reason=f"ground truth is not one of {choices!r}")
    pred: str | None = None
    start, end = 0, len(response)
    for pattern in _LETTER_PATTERNS:
        found = [m for m in re.finditer(pattern, response, flags=re.IGNORECASE)
                 if m.group(1).upper() in choices]
        if found:
            pred, start, end = found[-1].group(1).upper(), found[-1].start(), found[-1].end(1)
            break
    if pred is None:
        bare = response.strip().strip("().: ").upper()
        pred = bare if len(bare) == 1 and bare in choices else None
    if pred is None:
        return Verdict("no_answer", extracted_gold=gold, reason="no choice letter found")
    after = _OTHER_LETTER.match(response, end)
    before = _LETTER_BEFORE.search(response[max(0, start - 40) : start])
    for other in (after, before):
        letter = other.group(1).upper() if other else None
        if pred == gold and letter is not None and letter in choices and letter != pred:
            return Verdict("incorrect", pred, gold, f"hedged: {pred} or {letter}")
    return Verdict.judge(pred == gold, pred, gold)
