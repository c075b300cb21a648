"""The fixed vocabulary of scoring rules, read back from a verdict's ``reason``.

A rule that overrides the library's verdict (or a light scorer's plain reading) says so in the
verdict's ``reason``, which starts with the rule's label and a colon: ``hedged: 2 distinct
final answers (5; 6)``. The worker → server frame carries only status, extracted values and
reason, so the label travels inside ``reason``; :func:`rule_of` is the one place that reads it
back, for the Prometheus counter ``reward_rule_overrides_total{scorer,rule}``, the
``/get_reward`` ``extra_logs`` and verl's ``reward_extra_info``. No math-verify import: the
server and the trainer client use this module.

Labels:

``hedged``      the response does not commit to one final answer (``math``, ``gsm8k``, ``choice``)
``exact``       the library called two different exact values equal (rounding, chopped digits)
``percent``     a ``%`` read one way only
``rescued``     an inequality answer compared with an interval gold as a set
``units``       the answer and the gold name different units
``dropped``     an element the library's normaliser deleted (``\\ldots``): compared as written
``scientific``  ``1e5`` read as its value, not as its mantissa
``unclosed_think`` a ``<think>`` never closed: no answer was given (``math``, ``gsm8k``,
                ``choice``, ``numeric``; status ``no_answer``)
``variable``    the gold's trailing letter (``4t``) kept as a variable, which the library
                deletes as a unit (``math``; both ways)
``per_reading`` the closing part gives values bound to different readings or cases and
                never commits to one (``math``)
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["RULES", "RULE_KEYS", "rule_counts", "rule_flags", "rule_of", "rule_reason"]

RULES: tuple[str, ...] = ("hedged", "exact", "percent", "rescued", "units", "dropped", "scientific",
                          "unclosed_think", "variable", "per_reading")
# per-item log keys (OpenRLHF extra_logs, verl reward_extra_info): 1.0 where the rule decided
RULE_KEYS: tuple[str, ...] = tuple(f"rule/{rule}" for rule in RULES)


def rule_reason(rule: str, detail: str) -> str:
    """The ``reason`` of a verdict decided by ``rule``: ``"<rule>: <detail>"``."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    return f"{rule}: {detail}"


def rule_of(reason: str | None) -> str | None:
    """The rule that decided a verdict, read from its ``reason``; None when no rule did (a
    plain verdict, or a reason such as ``no answer found`` or ``memory limit reached``)."""
    if not reason:
        return None
    head, sep, _ = reason.partition(": ")
    return head if sep and head in RULES else None


def rule_counts(reasons: Iterable[str | None]) -> dict[str, int]:
    """How many of ``reasons`` each rule decided: every label of :data:`RULES`, 0 included."""
    counts = dict.fromkeys(RULES, 0)
    for reason in reasons:
        rule = rule_of(reason)
        if rule is not None:
            counts[rule] += 1
    return counts


def rule_flags(reason: str | None) -> dict[str, float]:
    """``{"rule/hedged": 1.0, "rule/exact": 0.0, ...}``: which rule decided one verdict, as
    the same numeric keys for every item (a trainer's mean of ``rule/hedged`` over a batch is
    the share of hedged responses)."""
    rule = rule_of(reason)
    return {key: float(rule == r) for key, r in zip(RULE_KEYS, RULES, strict=True)}
