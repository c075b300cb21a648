"""The verdict record every scorer returns, and shared helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["STATUSES", "Status", "Verdict", "clip"]

Status = Literal["correct", "incorrect", "no_answer", "bad_ground_truth", "timeout", "error"]
STATUSES: tuple[Status, ...] = (
    "correct",
    "incorrect",
    "no_answer",
    "bad_ground_truth",
    "timeout",
    "error",
)

_CLIP = 200


def clip(text: object, limit: int = _CLIP) -> str:
    """``str(text)`` cut to ``limit`` characters: never echo or log a whole untrusted input."""
    s = str(text)
    return s if len(s) <= limit else s[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of scoring one item."""

    status: Status
    extracted: str | None = None  # what was taken from the response as its final answer
    extracted_gold: str | None = None  # what was taken from the ground truth
    reason: str | None = None  # why, for statuses other than correct/incorrect
    credit: float = 0.0  # the score of a verdict that is not ``correct``: 0, or gsm8k's
    #                      ``extra.format_score`` for a well-formed wrong answer

    @property
    def score(self) -> float:
        return 1.0 if self.status == "correct" else self.credit

    @classmethod
    def judge(cls, ok: bool, extracted: str | None, extracted_gold: str | None) -> Verdict:
        return cls("correct" if ok else "incorrect", extracted, extracted_gold)
