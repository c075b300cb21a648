"""The rows every peer and our service score, the hostile mix, and how answers are counted.

The same rows for every peer: ``n`` corpus rows, the first half in file order (a GRPO-shaped
stream: a problem's responses adjacent) and the second half drawn from the rest of the corpus
and shuffled (seeded). The hostile mix replaces 2% of those rows, at seeded positions, by
``adversarial.jsonl`` items (cycled): inputs that make math-verify slow, hang inside C, or eat
memory. Clean rows keep their corpus ``label`` so that a disagreement between a peer and ours
can say which one matches the label.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Row = dict[str, Any]

#: How an item ended, the keys of the ``hostile`` counts: a verdict (any answer of the
#: scorer, right or wrong), the scorer's own timeout, an error (an HTTP error, a failed
#: request, a peer process that died on it), or no answer at all within the pass's cap.
Outcome = Literal["verdict", "timeout", "error", "unanswered"]
OUTCOMES: tuple[Outcome, ...] = ("verdict", "timeout", "error", "unanswered")

HOSTILE_SHARE = 0.02


def peer_rows(corpus: Sequence[Row], n: int, seed: int = 0) -> list[Row]:
    """``n`` rows: ``corpus[:n // 2]`` in file order, then ``n - n // 2`` rows drawn from the
    rest of the corpus, shuffled."""
    if not 2 <= n <= len(corpus):
        raise ValueError(f"n must be within 2..{len(corpus)}, got {n}")
    head = list(corpus[: n // 2])
    tail = random.Random(seed).sample(list(corpus[n // 2:]), n - n // 2)
    return [{"response": r["response"], "gold": r["gold"], "label": bool(r["label"])}
            for r in head + tail]


def boxed_rows(corpus: Sequence[Row], n: int | None = None) -> list[Row]:
    """The corpus rows whose response holds a ``\\boxed{`` (at most ``n``, in file order):
    the rows both peers score. Without one, each peer answers 0.0 at once, unparsed
    (NeMo-Gym's ``_extract_last_boxed_answer``, verifiers' ``extract_boxed_answer(strict=True)``),
    so a pass over rows without a box measures that shortcut, not scoring."""
    out = [{"response": r["response"], "gold": r["gold"], "label": bool(r["label"])}
           for r in corpus if "\\boxed{" in r["response"]]
    return out[:n] if n is not None else out


def hostile_mix(rows: Sequence[Row], hostile: Sequence[Row], seed: int = 1,
                ) -> tuple[list[Row], list[int]]:
    """``rows`` with ``HOSTILE_SHARE`` of them (at least one) replaced by ``hostile`` items
    (cycled); returns the mix and the replaced positions (sorted)."""
    k = max(1, round(len(rows) * HOSTILE_SHARE))
    at = sorted(random.Random(seed).sample(range(len(rows)), k))
    mix = list(rows)
    for j, i in enumerate(at):
        h = hostile[j % len(hostile)]
        mix[i] = {"response": h["response"], "gold": h["gold"], "hostile_id": h["id"]}
    return mix, at


@dataclass
class Answer:
    """One item's end: its outcome, the verdict if any (``True`` = scored correct), what the
    scorer extracted (where it says), and the seconds from its dispatch to its answer."""

    outcome: Outcome
    correct: bool | None = None
    extracted: str | None = None
    seconds: float | None = None
    detail: str | None = None


@dataclass
class Pass:
    """One timed pass: every item's answer, in the rows' order, and the wall time."""

    answers: list[Answer]
    wall_s: float
    rate_items_s: float | None = None  # set where the rate is not len / wall (process pairs)
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def items_s(self) -> float:
        return self.rate_items_s if self.rate_items_s is not None else len(self.answers) / self.wall_s

    def latency_ms(self) -> dict[str, float | None]:
        xs = [a.seconds * 1000 for a in self.answers if a.seconds is not None]
        if len(xs) < 2:
            return {"p50_ms": None, "p99_ms": None}
        q = statistics.quantiles(xs, n=100)
        return {"p50_ms": q[49], "p99_ms": q[98]}

    def counts(self, at: Iterable[int] | None = None) -> dict[str, int]:
        """Outcome counts over the items at ``at`` (all items if None)."""
        picked = self.answers if at is None else [self.answers[i] for i in at]
        return {k: sum(a.outcome == k for a in picked) for k in OUTCOMES}


def agreement(rows: Sequence[Row], peer: Pass, ours: Pass, limit: int = 40) -> dict[str, Any]:
    """Verdict agreement on the rows both answered with a verdict; each difference with its
    row, both verdicts and extractions, and which side matches the corpus label."""
    both = [i for i in range(len(rows))
            if peer.answers[i].outcome == "verdict" and ours.answers[i].outcome == "verdict"]
    diffs = [i for i in both if peer.answers[i].correct != ours.answers[i].correct]
    listed = []
    for i in diffs[:limit]:
        label = rows[i].get("label")
        p, o = peer.answers[i], ours.answers[i]
        listed.append({
            "row": i, "gold": rows[i]["gold"][:80], "label": label,
            "peer": p.correct, "ours": o.correct,
            "peer_extracted": (p.extracted or "")[:80], "ours_extracted": (o.extracted or "")[:80],
            # the two verdicts differ, so exactly one matches a label
            "right": None if label is None else "peer" if p.correct == label else "ours",
            "response_tail": rows[i]["response"][-120:]})
    labels = [rows[i].get("label") for i in diffs]  # which side each label takes, over all
    right = {"peer": sum(lab is not None and peer.answers[i].correct == lab
                         for i, lab in zip(diffs, labels, strict=True)),
             "ours": sum(lab is not None and ours.answers[i].correct == lab
                         for i, lab in zip(diffs, labels, strict=True))}
    return {"compared": len(both), "agree": len(both) - len(diffs), "differ": len(diffs),
            "agree_share": (len(both) - len(diffs)) / len(both) if both else None,
            "right": right, "differences": listed}
