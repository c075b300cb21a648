"""End to end: the real reward service on loopback, the real trainer (Ray and local).

Timings on the 2-core dev machine are in docs/trainer.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import Service
from trainer_client.checkpoint import list_checkpoints
from trainer_client.metrics import read_metrics
from trainer_client.reward_client import RewardClient, RewardClientSettings, ScoreItem

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "configs" / "tiny-cpu.yaml")

pytestmark = pytest.mark.slow


def grpo_train(*args: str, timeout_s: float = 300, wait: bool = True, log: Path | None = None,
               env: dict | None = None):
    cmd = [sys.executable, "-c", "import sys; from trainer_client.cli import train_main; "
           "sys.exit(train_main())", "--no-progress", *args]
    out = open(log, "wb") if log else subprocess.PIPE  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                            env={**os.environ, **(env or {})})
    if not wait:
        return proc
    try:
        stdout, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
        raise
    return proc.returncode, (stdout or b"").decode(errors="replace")


def steps_of(rows):
    return [r["step"] for r in rows]


def test_client_against_real_service(reward_url):
    with RewardClient(RewardClientSettings(urls=(reward_url,), chunk_size=7)) as c:
        c.wait_ready(timeout_s=30)
        items = [ScoreItem(response=r, ground_truth="7", scorer="numeric", id=str(i))
                 for i, r in enumerate(["7", "8", "", "07"] * 5)]
        res = c.score(items)
    assert [r.id for r in res] == [str(i) for i in range(20)]
    assert [r.status for r in res[:4]] == ["correct", "incorrect", "no_answer", "correct"]


@pytest.fixture(scope="module")
def ray_run(reward_url, tmp_path_factory):
    out = tmp_path_factory.mktemp("ray-run")
    t0 = time.monotonic()
    rc, log = grpo_train("--config", TINY, "--output-dir", str(out), "--reward-url", reward_url,
                         timeout_s=400)
    return out, rc, log, time.monotonic() - t0


def test_ray_tiny_cpu_learns_to_0_8(ray_run):
    out, rc, log, took = ray_run
    assert rc == 0, log[-3000:]
    rows = read_metrics(out / "metrics.jsonl")
    assert steps_of(rows) == list(range(1, 201))
    first = sum(r["rewards/mean"] for r in rows[:10]) / 10
    last = sum(r["rewards/mean"] for r in rows[-10:]) / 10
    assert first < 0.3, first  # from random init: about chance (1/11)
    assert last >= 0.8, (first, last)
    assert rows[-1]["eval/accuracy"] >= 0.8
    for key in ("rewards/status/correct", "losses/kl", "policy/entropy",
                "completions/mean_length", "timings/rollout_seconds", "timings/train_seconds",
                "timings/reward_wait_seconds", "rewards/status/unavailable"):
        assert key in rows[-1], key
    assert all(r["rewards/status/unavailable"] == 0 for r in rows)
    assert (out / "reward_curve.png").stat().st_size > 10_000
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [150, 200]  # keep_last 2
    assert "metrics:" in log and "plot:" in log
    print(f"ray e2e: 200 steps in {took:.1f}s")


def test_grpo_eval_before_vs_after(ray_run, reward_url, capsys):
    from trainer_client.cli import eval_main

    out, rc, _, _ = ray_run
    assert rc == 0
    trained = out / "checkpoints" / "step_000200" / "model"
    assert eval_main(["--model", str(out / "base_model"), "--model", str(trained),
                      "--config", TINY, "--reward-url", reward_url]) == 0
    table = capsys.readouterr().out
    lines = table.strip().splitlines()
    assert lines[0].split()[:3] == ["model", "n", "accuracy"]
    base_acc, trained_acc = float(lines[2].split()[2]), float(lines[3].split()[2])
    assert trained_acc >= 0.8 > base_acc + 0.3, table


def test_resume_continues_without_repeating(reward_url, tmp_path):
    common = ["--config", TINY, "--output-dir", str(tmp_path), "--reward-url", reward_url,
              "--backend", "local"]
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(Path(TINY).read_text().replace("every: 50", "every: 3")
                   .replace("every: 25", "every: 4")
                   .replace("prompts_per_step: 32", "prompts_per_step: 8"))
    common[1] = str(cfg)
    rc, log = grpo_train(*common, "--max-steps", "7")
    assert rc == 0, log[-3000:]
    # checkpoints at 3, 6 and the final 7; keep_last 2
    assert [s for s, _ in list_checkpoints(tmp_path / "checkpoints")] == [6, 7]
    before = read_metrics(tmp_path / "metrics.jsonl")
    assert steps_of(before) == list(range(1, 8))
    # a crash after step 7's checkpoint would leave extra lines: resume must drop them
    with open(tmp_path / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"step": 8, "rewards/mean": 0.0}) + "\n")

    rc, log = grpo_train(*common, "--max-steps", "12", "--resume")
    assert rc == 0, log[-3000:]
    after = read_metrics(tmp_path / "metrics.jsonl")
    assert steps_of(after) == list(range(1, 13))  # no step repeated, none missing
    assert after[:7] == before  # history kept as it was
    assert [s for s, _ in list_checkpoints(tmp_path / "checkpoints")] == [9, 12]
    assert "eval/accuracy" in after[7] and "eval/accuracy" in after[11]  # steps 8 and 12


def test_service_restart_mid_run_delays_but_does_not_crash(tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(Path(TINY).read_text()
                   .replace("prompts_per_step: 32", "prompts_per_step: 16")
                   .replace("request_deadline_s: 10", "request_deadline_s: 1")
                   .replace("step_max_wait_s: 120", "step_max_wait_s: 2")
                   .replace("step_retry_backoff_s: 1.0", "step_retry_backoff_s: 0.5"))
    log = tmp_path / "train.log"
    with Service() as svc:
        proc = grpo_train("--config", str(cfg), "--output-dir", str(tmp_path / "out"),
                          "--reward-url", svc.url, "--backend", "local", "--max-steps", "30",
                          wait=False, log=log)
        try:
            metrics = tmp_path / "out" / "metrics.jsonl"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and proc.poll() is None:
                if metrics.exists() and len(metrics.read_text().splitlines()) >= 5:
                    break
                time.sleep(0.2)
            assert proc.poll() is None, log.read_text()[-3000:]
            t_down = time.monotonic()
            assert svc.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
            time.sleep(3.0)  # down for 3 s, plus the new service's start-up
            svc.start()
            outage = time.monotonic() - t_down
            rc = proc.wait(timeout=240)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert rc == 0, log.read_text()[-3000:]
    rows = read_metrics(tmp_path / "out" / "metrics.jsonl")
    assert steps_of(rows) == list(range(1, 31))
    hit = [r for r in rows if r["rewards/service_failures_total"] > 0]
    assert hit, "the outage was not seen"
    skipped = [r for r in rows if r["train/skipped"] == 1]
    assert skipped and all(r["rewards/status/unavailable"] == 1.0 for r in skipped)
    assert sum(r["timings/step_seconds"] for r in hit) >= 2.0  # steps were delayed
    assert rows[-1]["rewards/status/unavailable"] == 0.0  # recovered
    assert rows[-1]["rewards/mean"] is not None
    print(f"outage {outage:.1f}s: {len(hit)} steps saw it, {len(skipped)} skipped")
