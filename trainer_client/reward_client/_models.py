"""What travels: one item to score, the service's verdict on it, and TRL's reading of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from trainer_client.errors import RewardProtocolError

Status = Literal["correct", "incorrect", "no_answer", "bad_ground_truth", "timeout", "error"]

#: Statuses whose ``score`` is a real reward. The others (``bad_ground_truth``, ``timeout``,
#: ``error``) mean "could not score": :func:`reward_or_none` maps them to ``None``.
AVAILABLE_STATUSES: frozenset[str] = frozenset({"correct", "incorrect", "no_answer"})


@dataclass(frozen=True, kw_only=True)
class ScoreItem:
    """One response to score; fields as in the API contract."""

    response: str
    ground_truth: str
    data_source: str | None = None
    scorer: str | None = None
    id: str | None = None
    extra: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"response": self.response, "ground_truth": self.ground_truth}
        for key in ("data_source", "scorer", "id"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        if self.extra is not None:
            out["extra"] = self.extra
        return out


@dataclass(frozen=True, kw_only=True)
class ScoreResult:
    """The service's verdict on one item."""

    score: float
    status: str
    extracted: str | None = None
    scorer: str = ""
    scorer_version: str = ""
    elapsed_s: float = 0.0
    reason: str | None = None
    id: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScoreResult:
        """One result of the service's reply. Built without the frozen ``__init__`` (one
        ``object.__setattr__`` per field, ~3 µs a result: 1.5 ms of a 512-item reply): every
        field is set here, converted as ``__init__`` would be given it."""
        try:
            fields = {"score": float(d["score"]), "status": str(d["status"]),
                      "extracted": d.get("extracted"), "scorer": str(d.get("scorer", "")),
                      "scorer_version": str(d.get("scorer_version", "")),
                      "elapsed_s": float(d.get("elapsed_s", 0.0)), "reason": d.get("reason"),
                      "id": d.get("id")}
        except (KeyError, TypeError, ValueError) as e:
            raise RewardProtocolError(f"malformed result {str(d)[:200]}: {e}") from e
        out = object.__new__(cls)  # tests/trainer/test_reward_client.py: == the constructor's
        out.__dict__.update(fields)
        return out


def reward_or_none(result: ScoreResult) -> float | None:
    """TRL's contract: the score, or ``None`` when the item could not be scored."""
    return result.score if result.status in AVAILABLE_STATUSES else None
