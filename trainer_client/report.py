"""A run's figures as markdown, from its ``metrics.jsonl``: the table ``docs/trainer.md`` shows.

    python -m trainer_client.report runs/smollm2-gsm8k/metrics.jsonl

Per training step: reward, statuses, hedged and multi-answer fractions, truncation, tokens/s
and seconds by phase; then held-out greedy eval at the first and last eval rows, and means.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer_client.metrics import read_metrics

__all__ = ["format_report", "main"]

_STEP_COLUMNS = (  # (header, key, format)
    ("step", "step", "{:d}"),
    ("reward", "rewards/mean", "{:.3f}"),
    ("correct", "rewards/status/correct", "{:.3f}"),
    ("no answer", "rewards/status/no_answer", "{:.3f}"),
    ("hedged", "rewards/hedged_fraction", "{:.3f}"),
    ("multi-answer", "completions/multi_answer_fraction", "{:.3f}"),
    ("truncated", "completions/truncated_fraction", "{:.3f}"),
    ("len", "completions/mean_length", "{:.0f}"),
    ("updated", "train/skipped", "{}"),
    ("rollout tok/s", "throughput/rollout_tokens_per_second", "{:.1f}"),
    ("train tok/s", "throughput/train_tokens_per_second", "{:.1f}"),
    ("rollout s", "timings/rollout_seconds", "{:.0f}"),
    ("reward wait s", "timings/reward_wait_seconds", "{:.2f}"),
    ("train s", "timings/train_seconds", "{:.0f}"),
    ("sync s", "timings/sync_seconds", "{:.1f}"),
    ("step s", "timings/step_seconds", "{:.0f}"),
)
_EVAL = ("eval/accuracy", "eval/status/no_answer", "eval/hedged_fraction",
         "eval/multi_answer_fraction", "eval/truncated_fraction", "eval/mean_length")


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    v = row.get(key)
    if v is None:
        return "-"
    if key == "train/skipped":
        return "no" if v else "yes"
    return fmt.format(v)


def _mean(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def format_report(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown tables of the training steps and the evals in ``rows``."""
    steps = [r for r in rows if r.get("step", 0) > 0 and "rewards/mean" in r]
    lines = ["| " + " | ".join(h for h, _, _ in _STEP_COLUMNS) + " |",
             "|" + "---|" * len(_STEP_COLUMNS)]
    lines += ["| " + " | ".join(_cell(r, k, f) for _, k, f in _STEP_COLUMNS) + " |"
              for r in steps]
    means = {"step": None, **{k: _mean(steps, k) for _, k, _ in _STEP_COLUMNS[1:]}}
    means["train/skipped"] = None
    lines.append("| mean | " + " | ".join(
        "-" if means[k] is None else f.format(means[k]) for _, k, f in _STEP_COLUMNS[1:])
        + " |")
    evals = [r for r in rows if r.get("eval/accuracy") is not None]
    if evals:
        lines += ["", "| held-out greedy eval | step | " + " | ".join(
            k.removeprefix("eval/") for k in _EVAL) + " |", "|---|---|" + "---|" * len(_EVAL)]
        for label, r in (("before", evals[0]), ("after", evals[-1])):
            lines.append(f"| {label} | {r['step']} | " + " | ".join(
                "-" if r.get(k) is None else f"{r[k]:.3f}" for k in _EVAL) + " |")
    trained = sum(1 for r in steps if not r.get("train/skipped"))
    lines += ["", f"{len(steps)} steps, {trained} with an update; "
              f"{sum(r.get('timings/step_seconds', 0.0) for r in steps):.0f} s of steps."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m trainer_client.report METRICS_JSONL\n")
        return 1
    sys.stdout.write(format_report(read_metrics(Path(args[0]))) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
