"""A run's figures as markdown: the tables ``docs/trainer.md`` shows.

    python -m trainer_client.report runs/smollm2-addition            # a run directory
    python -m trainer_client.report runs/smollm2-addition/metrics.jsonl

Per training step: reward, statuses, hedged and multi-answer fractions, truncation, the
train/inference mismatch, tokens/s and seconds by phase; then held-out greedy eval at the
first and last eval rows, and means. Given a run directory, also the paired comparison of
its first and last ``eval/step_<N>.jsonl`` (same problems): accuracy before and after, the
discordant pairs and an exact McNemar test, accuracy on completely answered problems, and
how each problem's status moved. With a rollout log (``rollouts/step_<N>.jsonl``), from it:
the status mix and every scoring-rule override (``hedged``, ``unclosed_think``, ...) per
logged step, the mean length of correct vs incorrect completions, and a few completions of
the first and the last logged step.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer_client.metrics import STATUSES, read_metrics
from trainer_client.tracking.rollout_log import step_files

__all__ = ["PairedEval", "RolloutSummary", "answer_form", "format_paired", "format_report",
           "format_rollouts", "main", "mcnemar_exact", "paired_eval", "rollout_summary"]

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
    ("p diff mean", "rollout/probs_diff_mean", "{:.4f}"),
    ("rollout tok/s", "throughput/rollout_tokens_per_second", "{:.1f}"),
    ("train tok/s", "throughput/train_tokens_per_second", "{:.1f}"),
    ("rollout s", "timings/rollout_seconds", "{:.0f}"),
    ("reward wait s", "timings/reward_wait_seconds", "{:.2f}"),
    ("train s", "timings/train_seconds", "{:.0f}"),
    ("sync s", "timings/sync_seconds", "{:.1f}"),
    ("step s", "timings/step_seconds", "{:.0f}"),
)
_EVAL = ("eval/accuracy", "eval/complete_fraction", "eval/complete_accuracy",
         "eval/status/no_answer", "eval/hedged_fraction", "eval/multi_answer_fraction",
         "eval/truncated_fraction", "eval/mean_length")


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


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (the binomial
    test of ``min(b, c)`` successes in ``b + c`` fair trials)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True)
class PairedEval:
    """The first and last eval of a run on the same problems."""

    first_step: int
    last_step: int
    n: int
    before: float  # accuracy
    after: float
    gained: int  # wrong before, right after (b)
    lost: int  # right before, wrong after (c)
    p_value: float  # exact McNemar
    complete_before: tuple[int, int]  # (correct, complete) before
    complete_after: tuple[int, int]
    transitions: dict[tuple[str, str], int]  # (status before, status after) -> problems
    mean_tokens: tuple[float, float]
    truncated: tuple[float, float]
    forms: dict[tuple[str, str], int]  # (answer form before, after) -> problems: answer_form


def answer_form(record: dict[str, Any]) -> str:
    """How an eval answer is written, apart from its value: ``cut`` (stopped at the token
    limit), ``unmarked`` (ended without a ``####`` line), else ``#### right`` / ``#### wrong``
    (an answer after ``####``; ``right`` is the scorer's verdict). Separates what GRPO
    taught about the form (stopping, the marker) from what it taught about the value."""
    if not record["finished"]:
        return "cut"
    if "####" not in record.get("response", ""):
        return "unmarked"
    return "#### right" if record["correct"] else "#### wrong"


def _eval_files(run_dir: Path) -> list[tuple[int, Path]]:
    found = []
    for f in (run_dir / "eval").glob("step_*.jsonl"):
        m = re.fullmatch(r"step_(\d+)\.jsonl", f.name)
        if m:
            found.append((int(m.group(1)), f))
    return sorted(found)


def _read_records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in (json.loads(line) for line in
                                 path.read_text(encoding="utf-8").splitlines() if line.strip())}


def paired_eval(run_dir: Path) -> PairedEval | None:
    """The paired comparison of the run's first and last eval files (None: fewer than 2).
    Raises ``ValueError`` when they are not on the same problems."""
    files = _eval_files(run_dir)
    if len(files) < 2:
        return None
    (s0, f0), (s1, f1) = files[0], files[-1]
    a, z = _read_records(f0), _read_records(f1)
    if set(a) != set(z):
        raise ValueError(f"{f0} and {f1} are not on the same problems")
    ids = sorted(a)
    gained = sum(1 for i in ids if not a[i]["correct"] and z[i]["correct"])
    lost = sum(1 for i in ids if a[i]["correct"] and not z[i]["correct"])

    def complete(recs: dict[str, dict[str, Any]]) -> tuple[int, int]:
        done = [r for r in recs.values() if r.get("complete")]
        return sum(r["correct"] for r in done), len(done)

    n = len(ids)
    return PairedEval(
        first_step=s0, last_step=s1, n=n,
        before=sum(a[i]["correct"] for i in ids) / n, after=sum(z[i]["correct"] for i in ids) / n,
        gained=gained, lost=lost, p_value=mcnemar_exact(gained, lost),
        complete_before=complete(a), complete_after=complete(z),
        transitions=dict(Counter((a[i]["status"], z[i]["status"]) for i in ids)),
        mean_tokens=(sum(a[i]["tokens"] for i in ids) / n, sum(z[i]["tokens"] for i in ids) / n),
        truncated=(sum(not a[i]["finished"] for i in ids) / n,
                   sum(not z[i]["finished"] for i in ids) / n),
        forms=dict(Counter((answer_form(a[i]), answer_form(z[i])) for i in ids)))


def format_paired(p: PairedEval) -> str:
    def frac(x: tuple[int, int]) -> str:
        return f"{x[0]}/{x[1]} = {x[0] / x[1]:.3f}" if x[1] else "0/0"

    lines = [
        f"Paired held-out eval, step {p.first_step} vs step {p.last_step}, {p.n} problems:",
        "",
        "| | before | after |", "|---|---|---|",
        f"| greedy accuracy | {p.before:.3f} | {p.after:.3f} |",
        f"| accuracy on complete answers (ended, answer found) | {frac(p.complete_before)} "
        f"| {frac(p.complete_after)} |",
        f"| truncated | {p.truncated[0]:.3f} | {p.truncated[1]:.3f} |",
        f"| mean tokens | {p.mean_tokens[0]:.1f} | {p.mean_tokens[1]:.1f} |",
        "",
        f"Change {100 * (p.after - p.before):+.1f} points; wrong->right {p.gained}, "
        f"right->wrong {p.lost}; exact McNemar p = {p.p_value:.3g}.",
        "", "| status before -> after | problems |", "|---|---|"]
    lines += [f"| {a} -> {b} | {k} |" for (a, b), k in
              sorted(p.transitions.items(), key=lambda kv: -kv[1])]
    lines += ["", "| answer form before -> after (cut: at the token limit; unmarked: no "
              "'####') | problems |", "|---|---|"]
    lines += [f"| {a} -> {b} | {k} |" for (a, b), k in
              sorted(p.forms.items(), key=lambda kv: -kv[1])]
    return "\n".join(lines)


@dataclass(frozen=True)
class RolloutSummary:
    """What a run's rollout log says, step by step."""

    statuses: dict[int, Counter[str]]  # step -> status -> completions
    rules: dict[int, Counter[str]]  # step -> scoring rule that overrode the verdict -> count
    tokens: dict[str, tuple[int, int]]  # status -> (completions, total tokens), all steps
    first: list[dict[str, Any]]  # the records of the first logged step
    last: list[dict[str, Any]]  # ... and of the last


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


def rollout_summary(run_dir: Path) -> RolloutSummary | None:
    """Read ``run_dir/rollouts/step_<N>.jsonl`` (None: no rollout log)."""
    files = step_files(run_dir / "rollouts")
    if not files:
        return None
    statuses: dict[int, Counter[str]] = {}
    rules: dict[int, Counter[str]] = {}
    tokens: dict[str, list[int]] = {}
    first: list[dict[str, Any]] = []
    last: list[dict[str, Any]] = []
    for i, (step, path) in enumerate(files):
        recs = _records(path)
        statuses[step] = Counter(r["status"] for r in recs)
        rules[step] = Counter(r["rule"] for r in recs if r.get("rule"))
        for r in recs:
            t = tokens.setdefault(r["status"], [0, 0])
            t[0] += 1
            t[1] += r["tokens"]
        if i == 0:
            first = recs
        if i == len(files) - 1:
            last = recs
    return RolloutSummary(statuses=statuses, rules=rules,
                          tokens={k: (v[0], v[1]) for k, v in tokens.items()},
                          first=first, last=last)


def _examples(recs: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """Up to ``k`` records: one of each status present first, then spread over the step."""
    picked: list[dict[str, Any]] = []
    for status in STATUSES:
        hit = next((r for r in recs if r["status"] == status), None)
        if hit is not None and len(picked) < k:
            picked.append(hit)
    for i in range(len(recs)):
        if len(picked) >= k:
            break
        r = recs[i * len(recs) // k] if i < k else recs[i]
        if r not in picked:
            picked.append(r)
    return picked


def format_rollouts(s: RolloutSummary, examples: int = 4, max_chars: int = 400) -> str:
    """Markdown: status mix and rule overrides per step, lengths by status, examples."""
    steps = sorted(s.statuses)
    present = [st for st in STATUSES if any(s.statuses[k][st] for k in steps)]
    lines = [f"Rollout log (`rollouts/step_<N>.jsonl`): {len(steps)} logged steps, "
             f"{sum(sum(c.values()) for c in s.statuses.values())} completions.", "",
             "| step | completions | " + " | ".join(present) + " | rule overrides |",
             "|---|---|" + "---|" * len(present) + "---|"]
    for k in steps:
        rules = ", ".join(f"{rule} {n}" for rule, n in sorted(s.rules[k].items())) or "-"
        lines.append(f"| {k} | {sum(s.statuses[k].values())} | "
                     + " | ".join(str(s.statuses[k][st]) for st in present)
                     + f" | {rules} |")
    total_rules: Counter[str] = Counter()
    for c in s.rules.values():
        total_rules.update(c)
    lines += ["", "Rule overrides over the log: " + (", ".join(
        f"{rule} {n}" for rule, n in sorted(total_rules.items())) or "none") + "."]

    def mean_len(recs: Sequence[dict[str, Any]], status: str) -> str:
        sel = [r["tokens"] for r in recs if r["status"] == status]
        return f"{sum(sel) / len(sel):.1f} ({len(sel)})" if sel else "-"

    lines += ["", f"Mean completion length in tokens (completions), by status: all logged "
              f"steps, step {steps[0]}, step {steps[-1]}", "",
              "| status | all steps | first step | last step |", "|---|---|---|---|"]
    for st in present:
        n, tok = s.tokens.get(st, (0, 0))
        lines.append(f"| {st} | {tok / n:.1f} ({n}) | {mean_len(s.first, st)} | "
                     f"{mean_len(s.last, st)} |" if n else f"| {st} | - | - | - |")
    for label, recs in ((f"first logged step ({steps[0]})", s.first),
                        (f"last logged step ({steps[-1]})", s.last)):
        lines += ["", f"Completions of the {label}:", ""]
        for r in _examples(recs, examples):
            text = r["response"]
            if len(text) > max_chars:
                text = text[:max_chars] + f"\u2026 ({len(text) - max_chars} more characters)"
            reward = "-" if r.get("reward") is None else f"{r['reward']:g}"
            adv = "-" if r.get("advantage") is None else f"{r['advantage']:+.2f}"
            got = ("nothing extracted" if r.get("extracted") is None
                   else f"extracted `{r['extracted']}`")
            lines.append(f"- `{r['id']}` sample {r['sample']}: **{r['status']}**, reward "
                         f"{reward}, advantage {adv}, {got}, gold `{r.get('ground_truth')}`, "
                         f"{r['tokens']} token{'' if r['tokens'] == 1 else 's'}"
                         + ("" if r["finished"] else " (cut at max_new_tokens)")
                         + (f"; reason: {r['reason']}" if r.get("reason") else ""))
            lines += ["", "  ```", *("  " + t for t in text.splitlines() or [""]), "  ```"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m trainer_client.report RUN_DIR | METRICS_JSONL\n")
        return 1
    path = Path(args[0])
    run_dir = path if path.is_dir() else None
    metrics = path / "metrics.jsonl" if run_dir is not None else path
    out = format_report(read_metrics(metrics))
    if run_dir is not None and (paired := paired_eval(run_dir)) is not None:
        out += "\n\n" + format_paired(paired)
    if run_dir is not None and (rollouts := rollout_summary(run_dir)) is not None:
        out += "\n\n" + format_rollouts(rollouts)
    sys.stdout.write(out + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
