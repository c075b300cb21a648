"""The race's results (``bench/trainer_vs_trl.py``): each trainer's phases from its own logs,
the summary against the target, the plot, and the tables docs/trainer.md quotes
(``python -m bench.trainer_vs_trl --report RESULTS.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["first_reach", "ours_phases", "paired", "plot", "summarize", "tables", "trl_phases"]


def ours_phases(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Steps, tokens/s and mean seconds per step by phase, from our metrics lines (one per
    step: the race sets ``run.log_every: 1``)."""
    steps = [r for r in rows if r.get("step", 0) > 0]
    b = len(steps)

    def mean(k: str) -> float:
        return sum(r.get(k, 0.0) for r in steps) / max(1, b)

    # generated tokens of a step: its rollout time x its rollout tokens/s
    gen_tokens = sum(r["throughput/rollout_tokens_per_second"] * r["timings/rollout_seconds"]
                     for r in steps)
    trained = [(r["throughput/train_tokens_per_second"] * r["timings/train_seconds"],
                r["timings/train_seconds"]) for r in steps if "timings/train_seconds" in r]
    return {
        "steps": b,
        "trained_steps": len(trained),  # the others had no reward spread (skip_no_signal)
        "generated_tokens_per_s": gen_tokens / max(1e-9, sum(r["timings/rollout_seconds"]
                                                              for r in steps)),
        "trained_tokens_per_s": sum(t for t, _ in trained) / max(1e-9, sum(s for _, s in trained)),
        "seconds_per_step": {"generate": mean("timings/rollout_seconds"),
                             "reward_wait": mean("timings/reward_wait_seconds"),
                             "train": mean("timings/train_seconds"),
                             "sync": mean("timings/sync_seconds"),
                             "checkpoint": mean("timings/checkpoint_seconds"),
                             "step": mean("timings/step_seconds")},
    }



def trl_phases(report: dict[str, Any]) -> dict[str, Any]:
    steps = report["steps"]
    n = max(1, len(steps))
    gen_s = sum(s["generate_s"] for s in steps)
    train_s = sum(s["train_s"] for s in steps)
    return {
        "steps": len(steps),
        "trained_steps": len(steps),
        "generated_tokens_per_s": sum(s["completion_tokens"] for s in steps) / max(1e-9, gen_s),
        "trained_tokens_per_s": sum(s["trained_tokens"] for s in steps) / max(1e-9, train_s),
        "seconds_per_step": {
            "generate": gen_s / n, "reward": sum(s["reward_s"] for s in steps) / n,
            "generate_and_score": sum(s["generate_and_score_s"] for s in steps) / n,
            "train": train_s / n,
            "checkpoint": sum(c["save_s"] for c in report["checkpoints"]) / n,
            "step": sum(s["step_s"] for s in steps) / n},
    }



def first_reach(points: Sequence[dict[str, Any]], target: float, *,
                interpolate: bool = False) -> float | None:
    """The first wall-clock point at which ``points`` reach ``target`` accuracy; with
    ``interpolate``, the wall-clock at which the straight line between the point before and
    that point crosses ``target`` (the points are minutes apart: the first point reached
    overstates the time)."""
    prev = None
    for p in points:
        if p["accuracy"] >= target - 1e-12:
            if not interpolate or prev is None or p["accuracy"] == prev["accuracy"]:
                return float(p["wall_s"])
            frac = (target - prev["accuracy"]) / (p["accuracy"] - prev["accuracy"])
            return float(prev["wall_s"] + frac * (p["wall_s"] - prev["wall_s"]))
        prev = p
    return None


def paired(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """The exact McNemar test of two points' per-problem outcomes (``correct``: 0/1 strings
    over the same held-out problems): ``a_only`` problems only ``a`` solved, ``b_only`` the
    reverse. ``None`` when either point has no per-problem record (older results)."""
    from trainer_client.report import mcnemar_exact

    ca, cb = a.get("correct"), b.get("correct")
    if not ca or not cb or len(ca) != len(cb):
        return None
    a_only = sum(x == "1" and y == "0" for x, y in zip(ca, cb, strict=True))
    b_only = sum(x == "0" and y == "1" for x, y in zip(ca, cb, strict=True))
    return {"a_step": a["step"], "b_step": b["step"], "a_only": a_only, "b_only": b_only,
            "p": mcnemar_exact(a_only, b_only)}


def summarize(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per round: TRL's final accuracy and wall; when ours first reached it; the ratio."""
    out = []
    for k in sorted({r["round"] for r in runs}):
        by = {r["trainer"]: r for r in runs if r["round"] == k}
        if set(by) != {"ours", "trl"} or not by["trl"]["points"]:
            continue
        trl_final = by["trl"]["points"][-1]
        reach = first_reach(by["ours"]["points"], trl_final["accuracy"])
        # per step, paired: ours at its last checkpoint with no more steps than TRL's last
        # (ours never gets more steps than TRL in this comparison)
        ours_near = max((p for p in by["ours"]["points"] if p["step"] <= trl_final["step"]),
                        key=lambda p: p["step"])
        out.append({"round": k, "trl_final_accuracy": trl_final["accuracy"],
                    "trl_final_wall_s": trl_final["wall_s"], "trl_steps": trl_final["step"],
                    "ours_final_accuracy": by["ours"]["points"][-1]["accuracy"],
                    "ours_steps": by["ours"]["points"][-1]["step"],
                    "ours_reaches_trl_final_at_s": reach,
                    "wall_ratio": None if reach is None else reach / trl_final["wall_s"],
                    "wall_ratio_interpolated": None if reach is None else first_reach(
                        by["ours"]["points"], trl_final["accuracy"], interpolate=True)
                    / trl_final["wall_s"],
                    "per_step_ours_vs_trl": paired(ours_near, trl_final),
                    "final_ours_vs_trl": paired(by["ours"]["points"][-1], trl_final)})
    return out


def plot(runs: Sequence[dict[str, Any]], path: Path, title: str) -> Path:
    """Held-out accuracy against wall-clock minutes (the race) and against steps (the same
    points: whether a trainer is worse per step)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (wall, steps) = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    colors = {"ours": "tab:blue", "trl": "tab:orange"}
    for r in runs:
        ys = [100 * p["accuracy"] for p in r["points"]]
        style = {"marker": "o", "color": colors[r["trainer"]],
                 "linestyle": "-" if r["round"] % 2 else "--",
                 "label": f"{r['trainer']} (round {r['round']}, {r['phases']['steps']} steps)"}
        wall.plot([p["wall_s"] / 60 for p in r["points"]], ys, **style)
        steps.plot([p["step"] for p in r["points"]], ys, **style)
    wall.set_xlabel("wall-clock minutes of training")
    steps.set_xlabel("optimizer steps")
    wall.set_ylabel("held-out greedy accuracy (%)")
    for ax in (wall, steps):
        ax.grid(alpha=0.3)
    wall.legend(fontsize=8)
    fig.suptitle("\n".join(textwrap.wrap(title, 110)), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def tables(result: dict[str, Any]) -> str:
    """Markdown: one row per run (steps, tokens/s, seconds per step by phase) and one per
    run with its held-out accuracy at each wall-clock point; then the summary per round."""
    out = ["| run | steps (trained) | generated tok/s | trained tok/s | s/step: generate | "
           "reward | train | sync | checkpoint | step |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["runs"]:
        ph, s = r["phases"], r["phases"]["seconds_per_step"]
        gen = s.get("generate", 0.0)
        reward = s.get("reward_wait", s.get("reward", 0.0))
        out.append(f"| {r['trainer']} round {r['round']} | {ph['steps']} ({ph['trained_steps']}) "
                   f"| {ph['generated_tokens_per_s']:.0f} | {ph['trained_tokens_per_s']:.0f} "
                   f"| {gen:.1f} | {reward:.2f} | {s['train']:.1f} | {s.get('sync', 0.0):.1f} "
                   f"| {s['checkpoint']:.1f} | {s['step']:.1f} |")
    out += ["", "| run | held-out accuracy at (wall s, step) |", "|---|---|"]
    for r in result["runs"]:
        pts = ", ".join(f"{100 * p['accuracy']:.1f}% ({p['wall_s']:.0f} s, {p['step']})"
                        for p in r["points"])
        out.append(f"| {r['trainer']} round {r['round']} | {pts} |")
    out += ["", "| round | TRL final (wall s, steps) | ours final (steps) | ours reaches TRL's "
            "final at | wall ratio (interpolated) |", "|---|---|---|---|---|"]
    for s in result.get("summary", []):
        reach = s["ours_reaches_trl_final_at_s"]
        ratio = s["wall_ratio"]
        out.append(f"| {s['round']} | {100 * s['trl_final_accuracy']:.1f}% "
                   f"({s['trl_final_wall_s']:.0f} s, {s['trl_steps']}) "
                   f"| {100 * s['ours_final_accuracy']:.1f}% ({s['ours_steps']}) "
                   f"| {'never' if reach is None else f'{reach:.0f} s'} "
                   f"| {_num(ratio)} ({_num(s.get('wall_ratio_interpolated'))}) |")
    tests = [(s["round"], label, s.get(key)) for s in result.get("summary", [])
             for key, label in (("per_step_ours_vs_trl", "per step: ours at <= TRL's last step"),
                                ("final_ours_vs_trl", "final: ours vs TRL"))]
    if any(t for _, _, t in tests):
        out += ["", "| round | paired test (exact McNemar) | ours step | TRL step | only ours "
                "solved | only TRL solved | p |", "|---|---|---|---|---|---|---|"]
        out += [f"| {k} | {label} | {t['a_step']} | {t['b_step']} | {t['a_only']} "
                f"| {t['b_only']} | {t['p']:.3g} |" for k, label, t in tests if t]
    return "\n".join(out)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"
