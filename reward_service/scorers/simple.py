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


def score_gsm8k(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """GSM8K: the number after the last ``####``, else the last number; exact comparison."""
    gold_text = _gold_number(ground_truth)
    gold = to_fraction(gold_text) if gold_text else None
    if gold is None:
        return Verdict("bad_ground_truth", reason="ground truth is not a number")
    pred_text = after_hashes(response) or last_number(response)
    if pred_text is None:
        return Verdict("no_answer", extracted_gold=clip(gold_text), reason="no number found")
    pred = to_fraction(pred_text)
    if pred is None:
        return Verdict("no_answer", clip(pred_text), clip(gold_text), "answer is not a number")
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


def score_choice(response: str, ground_truth: str, params: Mapping[str, Any]) -> Verdict:
    """Multiple choice: the last committed letter among ``extra.choices`` (default A-J)."""
    choices = str(params.get("choices", "ABCDEFGHIJ")).upper()
    gold = ground_truth.strip().strip("().: ").upper()
    if len(gold) != 1 or gold not in choices:
        return Verdict("bad_ground_truth", reason=f"ground truth is not one of {choices!r}")
    pred: str | None = None
    for pattern in _LETTER_PATTERNS:
        found = [m for m in re.findall(pattern, response, flags=re.IGNORECASE) if m.upper() in choices]
        if found:
            pred = found[-1].upper()
            break
    if pred is None:
        bare = response.strip().strip("().: ").upper()
        pred = bare if len(bare) == 1 and bare in choices else None
    if pred is None:
        return Verdict("no_answer", extracted_gold=gold, reason="no choice letter found")
    return Verdict.judge(pred == gold, pred, gold)
