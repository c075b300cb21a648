"""Scoring-rule labels read back from a result's ``reason``, for the adapters' per-item logs.

The client's own copy of ``reward_service.scorers.rule_labels.RULES`` / ``rule_flags``, so that the
client and its adapters never import the service package (they install with httpx alone).
``tests/integrations/test_client_standalone.py`` checks that the two copies agree.
"""

from __future__ import annotations

__all__ = ["RULES", "RULE_KEYS", "rule_flags"]

#: The labels a rule puts before the colon of a verdict's ``reason`` (``hedged: ...``).
RULES: tuple[str, ...] = ("hedged", "exact", "percent", "rescued", "units", "dropped", "scientific",
                          "unclosed_think", "variable", "per_reading")
#: Per-item log keys (verl's reward_extra_info): 1.0 where that rule decided the item.
RULE_KEYS: tuple[str, ...] = tuple(f"rule/{rule}" for rule in RULES)


def rule_flags(reason: str | None) -> dict[str, float]:
    """``{"rule/hedged": 1.0, "rule/exact": 0.0, ...}`` for one result's ``reason``."""
    head, sep, _ = (reason or "").partition(": ")
    rule = head if sep and head in RULES else None
    return {key: float(rule == r) for key, r in zip(RULE_KEYS, RULES, strict=True)}
