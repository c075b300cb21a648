"""Scorers: pure functions from (response, ground truth, params) to a :class:`Verdict`.

The registry here is metadata only (names, versions, routing) so the server process can
validate requests without importing math-verify; implementations are imported by workers.
"""

from __future__ import annotations

from reward_service.scorers.base import STATUSES, Status, Verdict
from reward_service.scorers.registry import (
    DEFAULT_SCORER,
    SCORERS,
    ScorerInfo,
    UnknownScorerError,
    resolve_scorer,
)
from reward_service.scorers.rule_labels import (
    RULE_KEYS,
    RULES,
    rule_counts,
    rule_flags,
    rule_of,
    rule_reason,
)

__all__ = [
    "DEFAULT_SCORER",
    "RULES",
    "RULE_KEYS",
    "SCORERS",
    "STATUSES",
    "ScorerInfo",
    "Status",
    "UnknownScorerError",
    "Verdict",
    "resolve_scorer",
    "rule_counts",
    "rule_flags",
    "rule_of",
    "rule_reason",
]
