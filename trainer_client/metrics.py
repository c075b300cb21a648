"""Per-step metrics: reward statistics, the JSONL log, and the reward-curve plot.

Keys (namespaced; units in the name where there is one):

- ``step``; ``rewards/mean`` (over available rewards), ``rewards/std``
- ``rewards/status/<s>``: fraction of the step's completions with service status ``s``
  (``correct``, ``incorrect``, ``no_answer``, ``bad_ground_truth``, ``timeout``, ``error``)
  or ``unavailable`` (the service could not be reached in time)
- ``rewards/unavailable_fraction``: rewards that are ``None`` (left out of advantages)
- ``rewards/service_failures_total``: failed scoring attempts of the step (service down)
- ``advantages/*``, ``losses/*`` (``losses/kl``, ``losses/policy``, ``losses/clip_fraction``),
  ``policy/entropy``, ``policy/grad_norm``, ``policy/lr``
- ``rewards/hedged_fraction``: completions the scorer refused as hedged (several answers)
- ``completions/mean_length``, ``completions/max_length`` (tokens),
  ``completions/truncated_fraction`` (cut at ``max_new_tokens``),
  ``completions/multi_answer_fraction`` (two or more different ``#### x`` / ``\\boxed{x}``
  answers in one response, counted here whatever the scorer says)
- ``rewards/truncated_paid_fraction``: truncated completions the scorer paid (before
  ``grpo.truncated`` is applied)
- ``throughput/rollout_tokens_per_second`` (generated tokens / rollout seconds),
  ``throughput/train_tokens_per_second`` (prompt + completion tokens of the batch, times
  ``ppo_epochs``, / train seconds)
- ``timings/*_seconds``: rollout, reward (total), reward_wait (after generation ended),
  train, sync, eval, checkpoint, step; rollout_log (building and writing the step's
  rollout records and sampled completions, on logged steps)
- ``eval/accuracy``, ``eval/status/<s>`` every ``eval.every`` steps
- ``train/skipped``: 1 when no update was made (no reward of the step was available, or
  ``grpo.skip_no_signal`` and no group had a reward spread)
- ``system/rss_gb``: resident memory at the step's end, this process and its child processes
  summed (backend ``local``: the whole run, vLLM's engine process included; ``ray``: the
  driver only, the actors are Ray's children)
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer_client.reward_client import ScoreResult, reward_or_none
from trainer_client.tracking.files import JsonlAppender
from trainer_client.tracking.files import write_text_atomic as write_text_atomic

__all__ = [
    "STATUSES",
    "MetricsWriter",
    "completion_metrics",
    "final_answers",
    "plot_reward_curve",
    "read_metrics",
    "reward_metrics",
    "rss_gb",
    "write_text_atomic",
]

STATUSES = ("correct", "incorrect", "no_answer", "bad_ground_truth", "timeout", "error",
            "unavailable")


def reward_metrics(results: Sequence[ScoreResult | None],
                   prefix: str = "rewards") -> tuple[list[float | None], dict[str, float]]:
    """TRL-style rewards and their metrics; ``None`` in ``results`` means the service was
    unreachable for that item."""
    rewards = [None if r is None else reward_or_none(r) for r in results]
    avail = [r for r in rewards if r is not None]
    counts = Counter("unavailable" if r is None else r.status for r in results)
    n = max(1, len(results))
    m: dict[str, float] = {f"{prefix}/status/{s}": counts.get(s, 0) / n for s in STATUSES}
    mean = sum(avail) / len(avail) if avail else float("nan")
    m[f"{prefix}/mean"] = mean
    m[f"{prefix}/std"] = (math.sqrt(sum((a - mean) ** 2 for a in avail) / len(avail))
                          if avail else float("nan"))
    m[f"{prefix}/unavailable_fraction"] = (len(rewards) - len(avail)) / n
    m[f"{prefix}/hedged_fraction"] = sum(
        1 for r in results if r is not None and (r.reason or "").startswith("hedged")) / n
    return rewards, m


_MARKED = re.compile(r"####\s*([^\n]*)|\\boxed\{([^{}]*)\}")


def final_answers(text: str) -> set[str]:
    """The distinct answers a response marks as final (``#### x`` lines, ``\\boxed{x}``),
    whitespace and thousands commas dropped."""
    return {re.sub(r"[\s,]|\.$", "", a or b) for a, b in _MARKED.findall(text)} - {""}


def completion_metrics(completions: Sequence[Any], rollout_seconds: float) -> dict[str, float]:
    """Lengths, truncation, multi-answer responses and generation speed of a step's
    completions (:class:`~trainer_client.model.rollout.Completion`)."""
    lengths = [len(c.completion_ids) for c in completions]
    n = max(1, len(completions))
    return {
        "completions/mean_length": sum(lengths) / n,
        "completions/max_length": float(max(lengths, default=0)),
        "completions/truncated_fraction": sum(not c.finished for c in completions) / n,
        "completions/multi_answer_fraction": sum(
            len(final_answers(c.text)) >= 2 for c in completions) / n,
        "throughput/rollout_tokens_per_second": sum(lengths) / max(rollout_seconds, 1e-9),
    }


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None  # JSON has no NaN
    return v


class MetricsWriter:
    """Appends one JSON object per line to ``path``; on resume, drops lines of steps after
    the checkpoint so no step appears twice. A line is written whole or not at all (a full
    disk raises :class:`~trainer_client.tracking.DiskFullError` and leaves no half line)."""

    def __init__(self, path: str | Path, *, resume_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_step is None:
            write_text_atomic(self.path, "")
        elif self.path.exists():
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line)["step"] <= resume_step]
            write_text_atomic(self.path, "".join(k + "\n" for k in kept))
        self._out = JsonlAppender(self.path)

    def write(self, row: dict[str, Any]) -> None:
        self._out.append(json.dumps({k: _clean(v) for k, v in row.items()}))

    def close(self) -> None:
        self._out.close()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def plot_reward_curve(metrics_path: str | Path, out_png: str | Path, *,
                      title: str = "GRPO") -> Path:
    """Reward mean per step (and a moving average), eval accuracy (all, and on complete
    answers), unavailable fraction, and
    the truncated / hedged / multi-answer fractions when any is non-zero."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    steps = [r["step"] for r in rows if r.get("rewards/mean") is not None]
    means = [r["rewards/mean"] for r in rows if r.get("rewards/mean") is not None]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.plot(steps, means, color="tab:blue", alpha=0.35, lw=1, label="reward (train batch)")
    w = 10
    if len(means) >= w:
        ma = [sum(means[i - w + 1:i + 1]) / w for i in range(w - 1, len(means))]
        ax.plot(steps[w - 1:], ma, color="tab:blue", lw=2, label=f"reward ({w}-step mean)")
    ev = [(r["step"], r["eval/accuracy"]) for r in rows if r.get("eval/accuracy") is not None]
    if ev:
        ax.plot(*zip(*ev, strict=True), "o-", color="tab:green", label="eval accuracy (greedy)")
    ca = [(r["step"], r["eval/complete_accuracy"]) for r in rows
          if r.get("eval/complete_accuracy") is not None]
    if ca:
        ax.plot(*zip(*ca, strict=True), "s:", color="darkgreen", ms=4,
                label="eval accuracy on complete answers")
    for key, color, label in (
            ("completions/truncated_fraction", "tab:gray", "truncated (fraction)"),
            ("rewards/hedged_fraction", "tab:orange", "refused as hedged (fraction)"),
            ("completions/multi_answer_fraction", "tab:purple", "several final answers")):
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if any(v for _, v in pts):
            ax.plot(*zip(*pts, strict=True), "--", color=color, lw=1, label=label)
    un = [(r["step"], r["rewards/status/unavailable"]) for r in rows
          if r.get("rewards/status/unavailable")]
    if un:
        ax.bar(*zip(*un, strict=True), color="tab:red", alpha=0.5,
               label="rewards unavailable (fraction)")
    ax.set_xlabel("step")
    ax.set_ylabel("reward / accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", framealpha=0.85)
    ax.set_title(title)
    fig.tight_layout()
    out = Path(out_png)
    fig.savefig(out)
    plt.close(fig)
    return out


def rss_gb() -> float | None:
    """Resident memory of this process and its children, summed, in GB (shared pages
    counted in each); None where psutil is missing (it comes with vLLM and Ray)."""
    try:
        import psutil
    except ImportError:
        return None
    me = psutil.Process()
    total = 0
    for proc in [me, *me.children(recursive=True)]:
        try:
            total += proc.memory_info().rss
        except psutil.Error:  # a child that ended meanwhile
            continue
    return total / 1e9
