"""The race bench (``bench/trainer_vs_trl.py``, ``make bench-trainer``) end to end, lean: a
tiny model on the toy sums, a few seconds of budget per trainer, one round. Both trainers
really run (ours in its own process; TRL 1.16.0's ``GRPOTrainer`` from its pinned folder with
HF ``generate``), the real reward service scores their rewards and, afterwards, every
checkpoint; the test checks the results file's schema, that both configurations say the
same hyperparameters, that the points lie at the wall-clock marks, and the plot.

Skipped when TRL's folder is not installed (``make frameworks``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bench.trainer_vs_trl import TRL_DIR

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900),
              pytest.mark.skipif(not (TRL_DIR / "trl").is_dir(),
                                 reason=f"TRL 1.16.0 not installed in {TRL_DIR}: "
                                        "run `make frameworks`")]

CONFIG = {
    "run": {"prompts_per_step": 2, "seed": 0, "backend": "local", "time_limit_s": 60},
    "model": {"tiny": {"arch": "llama", "hidden_size": 64, "num_layers": 2, "num_heads": 4,
                       "num_kv_heads": 2, "intermediate_size": 128, "seed": 0},
              "dtype": "float32"},
    "data": {"format": "toy", "toy_max_sum": 9, "eval_size": 6, "template": "plain",
             "scorer": "numeric"},
    "rollout": {"engine": {"kind": "hf", "device": "cpu", "num_threads": 1}, "n": 4,
                "max_new_tokens": 2, "temperature": 1.0, "chunks": 1},
    "policy": {"world_size": 1, "device": "cpu", "fsdp": True, "micro_batch_size": 8,
               "num_threads": 1},
    "optim": {"lr": 0.002, "grad_clip": 1.0},
    "grpo": {"kl_coef": 0.0, "clip_eps_low": 0.2, "clip_eps_high": 0.28,
             "aggregation": "token", "ppo_epochs": 1, "truncated": "keep"},
    "eval": {"max_problems": 6},
}


def test_the_race_runs_end_to_end_and_writes_its_schema(tmp_path):
    cfg = tmp_path / "race.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "race.json"
    budget = 8.0
    proc = subprocess.run(
        [sys.executable, "-m", "bench.trainer_vs_trl", "--config", str(cfg), "--budget-s",
         str(budget), "--points", "2", "--rounds", "1", "--trl-generation", "hf",
         "--threads", "1", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=840,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"})
    assert proc.returncode == 0, proc.stderr[-5000:]
    res = json.loads(out.read_text())
    assert res["trl_generation"] == "hf" and res["eval_problems"] == 6
    runs = {r["trainer"]: r for r in res["runs"]}
    assert set(runs) == {"ours", "trl"} and {r["round"] for r in res["runs"]} == {1}
    for who, r in runs.items():
        assert set(r) >= {"trainer", "round", "task", "config", "versions", "points", "phases"}
        pts = r["points"]
        assert pts[0] == {"wall_s": 0.0, "step": 0, "accuracy": pts[0]["accuracy"],
                          "correct": pts[0]["correct"]}
        assert len(pts) == 3, (who, pts)  # the base model, budget/2, the budget
        walls = [p["wall_s"] for p in pts]
        assert walls == sorted(walls) and walls[1] >= budget / 2 and walls[2] >= budget, who
        steps = [p["step"] for p in pts]
        assert steps[1] < steps[2] == r["phases"]["steps"], (who, steps, r["phases"])
        for p in pts:
            assert 0.0 <= p["accuracy"] <= 1.0
            # one outcome per held-out problem, and the accuracy is their mean
            assert len(p["correct"]) == 6 and set(p["correct"]) <= {"0", "1"}
            assert p["accuracy"] == pytest.approx(p["correct"].count("1") / 6)
        ph = r["phases"]
        assert ph["generated_tokens_per_s"] > 0 and ph["trained_tokens_per_s"] > 0
        assert ph["seconds_per_step"]["step"] > 0
    # both runs start from the same model, scored once
    assert runs["ours"]["points"][0] == runs["trl"]["points"][0]
    # the same hyperparameters, each in its trainer's names
    trl = runs["trl"]["config"]["GRPOConfig"]
    ours = runs["ours"]["config"]
    assert trl["use_cpu"] is True and trl["loss_type"] == "dapo" and trl["beta"] == 0.0
    assert trl["learning_rate"] == ours["optim"]["lr"]
    assert trl["num_generations"] == ours["rollout"]["n"]
    assert trl["per_device_train_batch_size"] == ours["run"]["prompts_per_step"] * 4
    assert trl["generation_batch_size"] == trl["per_device_train_batch_size"]  # one update
    assert (trl["epsilon"], trl["epsilon_high"]) == (0.2, 0.28)
    assert trl["max_completion_length"] == ours["rollout"]["max_new_tokens"]
    assert trl["max_grad_norm"] == ours["optim"]["grad_clip"]
    assert ours["checkpoint"]["every_s"] == budget / 2 and ours["eval"]["every"] == 0
    assert runs["trl"]["versions"]["trl"] == "1.16.0"
    assert runs["trl"]["config"]["prompt_ids_same_as_ours"] is not None
    assert len(res["summary"]) == 1 and res["summary"][0]["trl_steps"] == steps_of(runs["trl"])
    final = res["summary"][0]["final_ours_vs_trl"]
    o, t = runs["ours"]["points"][-1]["correct"], runs["trl"]["points"][-1]["correct"]
    assert (final["a_only"], final["b_only"]) == (
        sum(a > b for a, b in zip(o, t, strict=True)), sum(a < b for a, b in zip(o, t, strict=True)))
    per_step = res["summary"][0]["per_step_ours_vs_trl"]
    assert per_step["b_step"] == steps_of(runs["trl"]) and per_step["a_step"] <= per_step["b_step"]
    png = out.with_suffix(".png")
    assert png.stat().st_size > 5000 and png.read_bytes()[:4] == b"\x89PNG"
    # checkpoints are deleted once scored
    assert not list((tmp_path / "race").glob("*/checkpoints/step_*"))


def steps_of(run: dict) -> int:
    return int(run["points"][-1]["step"])


def test_paired_counts_discordant_problems_and_skips_old_results():
    from bench.race_results import paired

    a = {"step": 10, "correct": "110010"}
    b = {"step": 12, "correct": "011010"}
    t = paired(a, b)
    assert (t["a_only"], t["b_only"], t["a_step"], t["b_step"]) == (1, 1, 10, 12)
    assert t["p"] == 1.0
    strong = paired({"step": 1, "correct": "1" * 12 + "0" * 8}, {"step": 1, "correct": "0" * 20})
    assert strong["a_only"] == 12 and strong["p"] == pytest.approx(2 / 2**12)
    assert paired({"step": 1, "accuracy": 0.5}, b) is None  # a results file from before
    assert paired({"step": 1, "correct": "10"}, b) is None  # not the same problems


def test_the_per_step_pair_never_gives_ours_more_steps_than_trl():
    from bench.race_results import summarize

    def run(who, steps_and_correct):
        pts = [{"wall_s": 10.0 * i, "step": st, "accuracy": c.count("1") / len(c), "correct": c}
               for i, (st, c) in enumerate(steps_and_correct)]
        return {"trainer": who, "round": 1, "points": pts}

    ours = run("ours", [(0, "0000"), (20, "1000"), (45, "1100"), (70, "1111")])
    trl = run("trl", [(0, "0000"), (30, "1000"), (60, "1110")])
    (s,) = summarize([ours, trl])
    # ours at 45 (not 70, the nearer in steps but with more steps than TRL's 60)
    assert (s["per_step_ours_vs_trl"]["a_step"], s["per_step_ours_vs_trl"]["b_step"]) == (45, 60)
    assert (s["per_step_ours_vs_trl"]["a_only"], s["per_step_ours_vs_trl"]["b_only"]) == (0, 1)
    assert s["final_ours_vs_trl"]["a_only"] == 1 and s["ours_reaches_trl_final_at_s"] == 30.0


def test_gsm8k_answers_counts_the_arithmetic_and_the_copies(tmp_path):
    from bench import gsm8k_answers

    records = [
        # right arithmetic, the answer copied from the question, correct
        {"question": "Tom has 3 apples and 4 pears.", "response": "3 + 4 = 7 #### 7",
         "tokens": 9, "finished": True, "complete": True, "correct": True, "extracted": "7"},
        # wrong arithmetic ("x" as the product), cut at the limit, the answer copied
        {"question": "A box holds 12 eggs.", "response": "12 x 2 = 25 so 12",
         "tokens": 128, "finished": False, "complete": False, "correct": False,
         "extracted": "12"},
    ]
    path = tmp_path / "step_0.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    summary = gsm8k_answers.summarize(path)
    assert (summary.problems, summary.correct, summary.cut, summary.marked) == (2, 1, 1, 1)
    assert (summary.equations, summary.equations_right) == (2, 1)
    assert summary.copied == 1  # 7 is not in the first question; 12 is in the second
    assert (summary.complete, summary.complete_correct) == (1, 1)
    text = gsm8k_answers.table([path, path])
    assert "| of those, arithmetic right | 1/2 = 0.50 | 1/2 = 0.50 |" in text
