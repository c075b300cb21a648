"""Worker-side scorer table: name → callable. Importing this module imports math-verify."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from reward_service.scorers.base import Verdict
from reward_service.scorers.math_strict import MathStrictScorer
from reward_service.scorers.math_verify_scorer import MathVerifyScorer
from reward_service.scorers.registry import SCORERS
from reward_service.scorers.simple import score_choice, score_gsm8k, score_numeric

__all__ = ["ScoreFn", "build_scorers"]

ScoreFn = Callable[[str, str, Mapping[str, Any]], Verdict]


def build_scorers(*, on_gold_parse: Callable[[bool], None] | None = None) -> dict[str, ScoreFn]:
    """The table; ``on_gold_parse`` is called around each parse of a ground truth not parsed
    before, by ``math`` and ``math_verify`` (the worker's ``phase`` frames)."""
    stock = MathVerifyScorer(on_gold_parse=on_gold_parse)
    table: dict[str, ScoreFn] = {
        "math": MathStrictScorer(stock),  # shares the parsed-gold cache with math_verify
        "math_verify": stock,
        "gsm8k": score_gsm8k,
        "numeric": score_numeric,
        "choice": score_choice,
    }
    assert table.keys() == SCORERS.keys()
    return table
