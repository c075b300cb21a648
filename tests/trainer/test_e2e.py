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

pytest.importorskip("reward_service.server.app",
                    reason="the reward service (extra 'service') is not installed")

from tests.helpers import Service
from tests.trainer.procs import procs_mentioning
from trainer_client.metrics import read_metrics
from trainer_client.model.checkpoint import list_checkpoints
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
    assert steps_of(rows) == list(range(1, 251))
    means = [r["rewards/mean"] for r in rows]
    ma10 = [sum(means[i - 10:i]) / 10 for i in range(10, len(means) + 1)]  # 10-step means
    assert ma10[0] < 0.3, ma10[0]  # from random init: about chance (1/11)
    assert max(ma10) >= 0.8, max(ma10)  # the sampled (T=1) reward rose to >= 0.8
    assert ma10[-1] >= 0.7, ma10[-1]  # and stayed there (not a lucky spike)
    assert rows[-1]["eval/accuracy"] >= 0.8  # greedy
    for key in ("rewards/status/correct", "losses/kl", "policy/entropy",
                "completions/mean_length", "timings/rollout_seconds", "timings/train_seconds",
                "timings/reward_wait_seconds", "rewards/status/unavailable"):
        assert key in rows[-1], key
    assert all(r["rewards/status/unavailable"] == 0 for r in rows)
    assert (out / "reward_curve.png").stat().st_size > 10_000
    assert [s for s, _ in list_checkpoints(out / "checkpoints")] == [200, 250]  # keep_last 2
    # the rollout log of tiny-cpu.yaml: all 256 samples of every 5th step, on Ray too
    logged = sorted(int(p.stem.split("_")[1]) for p in (out / "rollouts").glob("step_*.jsonl"))
    assert logged == list(range(5, 251, 5))
    last = (out / "rollouts" / "step_250.jsonl").read_text().splitlines()
    assert len(last) == 256
    assert sum(json.loads(x)["correct"] for x in last) / 256 == pytest.approx(
        rows[-1]["rewards/status/correct"])
    assert list((out / "tensorboard").glob("events.out.tfevents.*"))
    assert "metrics:" in log and "plot:" in log
    print(f"ray e2e: 250 steps in {took:.1f}s")


def test_grpo_eval_before_vs_after(ray_run, reward_url, capsys):
    from trainer_client.cli import eval_main

    out, rc, _, _ = ray_run
    assert rc == 0
    trained = out / "checkpoints" / "step_000250" / "model"
    assert eval_main(["--model", str(out / "base_model"), "--model", str(trained),
                      "--config", TINY, "--reward-url", reward_url]) == 0
    table = capsys.readouterr().out
    lines = table.strip().splitlines()
    assert lines[0].split()[:3] == ["model", "n", "accuracy"]
    base_acc, trained_acc = float(lines[2].split()[2]), float(lines[3].split()[2])
    assert trained_acc >= 0.8 > base_acc + 0.3, table


def _local_cfg(reward_url: str, **over):
    """tiny-cpu, run in this process (backend local) with small steps."""
    from trainer_client.config import load_config

    base = {"run": {"backend": "local", "prompts_per_step": 8},
            "reward": {"urls": [reward_url]}}
    for k, v in over.items():
        base.setdefault(k, {}).update(v)
    return load_config(TINY, overrides=base)


def _rows_so_far(path: Path) -> list[dict]:
    """The complete metrics rows a running trainer has written (a line being written is left
    out)."""
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def test_dynamic_sampling_trains_only_groups_with_a_spread(reward_url, tmp_path):
    """``run.rollout_prompts``: 16 prompts rolled out, the step trains on at most 4 groups,
    each with a reward spread (real service, real tiny model, local backend)."""
    from trainer_client.trainer import train

    cfg = _local_cfg(reward_url, run={"prompts_per_step": 4, "rollout_prompts": 16,
                                      "steps": 6}, eval={"every": 0},
                     checkpoint={"every": 0})
    train(cfg, output_dir=tmp_path)
    rows = [r for r in _rows_so_far(tmp_path / "metrics.jsonl") if r["step"] > 0]
    assert [r["step"] for r in rows] == list(range(1, 7))
    for r in rows:
        assert 0 <= r["train/groups_trained"] <= min(4, r["train/groups_with_signal"])
        assert r["train/groups_with_signal"] <= 16
    assert sum(r["train/groups_trained"] for r in rows) > 0  # the toy task has spread at once
    assert all(r["train/skipped"] == 0 for r in rows if r["train/groups_trained"])


def test_a_tokenizer_without_a_pad_token_trains(reward_url, tmp_path):
    """A model whose tokenizer names no pad token (SmolLM2's GGUF converted by transformers
    5.17 on the lent GPU machine: the first step died on ``int(None)``) trains; padding is
    masked, so EOS pads."""
    from transformers import AutoTokenizer

    from trainer_client.model.tiny_model import TinyModelSettings, build_tiny_model
    from trainer_client.trainer import train

    model = build_tiny_model(TinyModelSettings(), tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(model)
    tok.pad_token = None
    tok.save_pretrained(model)
    assert AutoTokenizer.from_pretrained(model).pad_token_id is None  # the case under test
    cfg = _local_cfg(reward_url, model={"path": str(model), "tiny": None},
                     run={"steps": 2}, eval={"every": 0}, checkpoint={"every": 0})
    train(cfg, output_dir=tmp_path / "out")
    rows = [r for r in _rows_so_far(tmp_path / "out" / "metrics.jsonl") if r["step"] > 0]
    assert [r["step"] for r in rows] == [1, 2]
    assert any("timings/train_seconds" in r for r in rows)  # a step really trained
    # the process's resident memory rides along (psutil comes with Ray and vLLM)
    assert all(0.1 < r["system/rss_gb"] < 64 for r in rows)


def test_a_stop_while_a_step_logs_still_ends_on_a_saved_evaluated_step(reward_url, tmp_path):
    """The stop flag set after a step decided it was not the last (here from the progress
    callback, which runs after the step's metrics line: where a SIGTERM landed in CI) ends
    the next step, which evaluates and saves. Before, the loop left at once: step 2 was the
    last, with no checkpoint and no eval."""
    import threading

    from trainer_client.trainer import train

    stop = threading.Event()
    cfg = _local_cfg(reward_url, run={"steps": 50}, eval={"every": 1000},
                     checkpoint={"every": 0})
    res = train(cfg, output_dir=tmp_path, stop=stop,
                progress=lambda step, row: stop.set() if step == 2 else None)
    rows = _rows_so_far(tmp_path / "metrics.jsonl")
    assert steps_of([r for r in rows if r["step"] > 0]) == [1, 2, 3]
    assert res.last_step == 3 and res.stopped
    assert [s for s, _ in list_checkpoints(tmp_path / "checkpoints")] == [3]
    assert "eval/accuracy" in rows[-1]


def test_resume_continues_without_repeating(reward_url, tmp_path):
    from trainer_client.trainer import train

    cfg = _local_cfg(reward_url, checkpoint={"every": 3, "keep_last": 2}, eval={"every": 4})
    r = train(cfg, output_dir=tmp_path, max_steps=7)
    assert r.last_step == 7 and not r.stopped
    # checkpoints at 3, 6 and the final 7; keep_last 2
    assert [s for s, _ in list_checkpoints(tmp_path / "checkpoints")] == [6, 7]
    before = read_metrics(tmp_path / "metrics.jsonl")
    assert steps_of(before) == list(range(1, 8))
    # the run manifest: resolved config, the engine that ran, versions, the service's scorers
    manifest = json.loads((tmp_path / "run.json").read_text())
    assert manifest["rollout_engine"]["kind"] == "hf"  # tiny-cpu asks for hf
    assert manifest["config"]["rollout"]["n"] == cfg.rollout.n
    assert manifest["config"]["optim"]["lr"] == cfg.optim.lr
    assert manifest["versions"]["torch"].startswith("2.13.0")
    assert manifest["versions"]["math-reward-service"]
    assert manifest["git"] is None or len(manifest["git"]["commit"]) == 40
    assert "numeric" in json.dumps(manifest["reward_service"]["scorers"])
    assert manifest["started_at"] and manifest["resumed_from_step"] is None
    # per-problem evals at steps 4 and 7 (the last), on the same problems
    evals = {p.name: [json.loads(x) for x in p.read_text().splitlines()]
             for p in (tmp_path / "eval").glob("step_*.jsonl")}
    assert sorted(evals) == ["step_4.jsonl", "step_7.jsonl"]
    assert [r["id"] for r in evals["step_4.jsonl"]] == [r["id"] for r in evals["step_7.jsonl"]]
    assert len(evals["step_7.jsonl"]) == 55
    rec = evals["step_7.jsonl"][0]
    assert {"id", "correct", "response", "status", "complete"} <= set(rec)
    assert rec["correct"] == (rec["status"] == "correct")
    acc7 = sum(r["correct"] for r in evals["step_7.jsonl"]) / 55
    assert before[-1]["eval/accuracy"] == pytest.approx(acc7)
    # a crash after step 7's checkpoint would leave extra lines: resume must drop them
    with open(tmp_path / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"step": 8, "rewards/mean": 0.0}) + "\n")

    # resume for one step with lr 0 (AdamW then leaves every weight as it is): the weights
    # it saves must be exactly those of the checkpoint it resumed from, not the base model's
    import shutil

    import torch
    from safetensors.torch import load_file

    saved = tmp_path / "step7"
    shutil.copytree(tmp_path / "checkpoints" / "step_000007", saved)
    frozen = _local_cfg(reward_url, checkpoint={"every": 3, "keep_last": 2},
                        eval={"every": 4}, optim={"lr": 0.0})
    r = train(frozen, output_dir=tmp_path, max_steps=8, resume=True)
    assert r.last_step == 8
    assert json.loads((tmp_path / "run.json").read_text()) == manifest  # the first is kept
    assert json.loads((tmp_path / "run.resume_7.json").read_text())["resumed_from_step"] == 7
    ck7 = load_file(str(saved / "model" / "model.safetensors"))
    ck8 = load_file(str(tmp_path / "checkpoints" / "step_000008" / "model" / "model.safetensors"))
    base = load_file(str(tmp_path / "base_model" / "model.safetensors"))
    assert set(ck8) == set(ck7)
    for k in ck7:
        assert torch.equal(ck8[k], ck7[k]), k
    assert any(not torch.equal(base[k], ck7[k]) for k in base)  # control: 7 steps trained
    opt7 = torch.load(saved / "optimizer.pt", weights_only=False)
    opt8 = torch.load(tmp_path / "checkpoints" / "step_000008" / "optimizer.pt",
                      weights_only=False)
    assert opt8["_opt_steps"] == opt7["_opt_steps"] + 1  # the optimizer state was resumed too

    r = train(cfg, output_dir=tmp_path, max_steps=12, resume=True)
    assert r.last_step == 12
    after = read_metrics(tmp_path / "metrics.jsonl")
    assert steps_of(after) == list(range(1, 13))  # no step repeated, none missing
    assert after[:7] == before  # history kept as it was
    assert [s for s, _ in list_checkpoints(tmp_path / "checkpoints")] == [9, 12]
    assert "eval/accuracy" in after[7] and "eval/accuracy" in after[11]  # steps 8 and 12
    s12 = load_file(str(tmp_path / "checkpoints" / "step_000012" / "model" / "model.safetensors"))
    assert any(not torch.equal(base[k], s12[k]) for k in base)
    last = tmp_path / "checkpoints" / "step_000012"
    assert (last / "optimizer.pt").is_file()
    assert json.loads((last / "trainer_state.json").read_text())["step"] == 12


def test_service_restart_mid_run_delays_but_does_not_crash(tmp_path):
    import threading

    from trainer_client.trainer import train

    with Service() as svc:
        cfg = _local_cfg(svc.url, run={"prompts_per_step": 16},
                         reward={"request_deadline_s": 1, "step_max_wait_s": 2,
                                 "step_retry_backoff_s": 0.5})
        result: dict = {}

        def run() -> None:
            try:
                result["r"] = train(cfg, output_dir=tmp_path / "out", max_steps=20)
            except BaseException as e:  # reported below
                result["error"] = e

        t = threading.Thread(target=run)
        t.start()
        try:
            metrics = tmp_path / "out" / "metrics.jsonl"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and t.is_alive():
                if metrics.exists() and len(metrics.read_text().splitlines()) >= 5:
                    break
                time.sleep(0.2)
            assert t.is_alive(), result
            t_down = time.monotonic()
            assert svc.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
            # Down until the trainer has given up on a step's rewards. A fixed outage raced
            # the trainer: a step whose chunks were partly scored before the stop is not
            # skipped, and the next step's could reach the restarted service within
            # step_max_wait_s, so no step was skipped (1 run in 3 here). Every chunk of the
            # first step begun after the stop waits step_max_wait_s and gets nothing.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and t.is_alive():
                if any(r.get("train/skipped") == 1 for r in _rows_so_far(metrics)):
                    break
                time.sleep(0.2)
            svc.start()
            outage = time.monotonic() - t_down
        finally:
            t.join(timeout=240)
    assert not t.is_alive()
    assert "error" not in result, result
    assert result["r"].last_step == 20
    rows = read_metrics(tmp_path / "out" / "metrics.jsonl")
    assert steps_of(rows) == list(range(1, 21))
    hit = [r for r in rows if r["rewards/service_failures_total"] > 0]
    assert hit, "the outage was not seen"
    skipped = [r for r in rows if r["train/skipped"] == 1]
    assert skipped and all(r["rewards/status/unavailable"] == 1.0 for r in skipped)
    assert sum(r["timings/step_seconds"] for r in hit) >= 2.0  # steps were delayed
    assert rows[-1]["rewards/status/unavailable"] == 0.0  # recovered
    assert rows[-1]["rewards/mean"] is not None
    print(f"outage {outage:.1f}s: {len(hit)} steps saw it, {len(skipped)} skipped")


def test_service_down_at_start_exits_2(tmp_path, capsys):
    from trainer_client.cli import train_main

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(Path(TINY).read_text().replace("step_max_wait_s: 120",
                                                  "step_max_wait_s: 120\n  ready_timeout_s: 1"))
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    t0 = time.monotonic()
    rc = train_main(["--config", str(cfg), "--output-dir", str(tmp_path / "o"),
                     "--reward-url", dead, "--backend", "local", "--no-progress"])
    assert rc == 2
    assert "reward service not reachable" in capsys.readouterr().err
    assert time.monotonic() - t0 < 30


def test_ray_start_failure_halfway_cleans_up(reward_url, tmp_path):
    """Three policy ranks cannot be placed on a 2-CPU Ray: start-up fails after Ray, the
    placement group and the client are up. The run must end (no hang), and no Ray process
    of this run may be left behind."""
    import tempfile

    ray_tmp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray puts sockets under it
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(Path(TINY).read_text().replace("world_size: 1", "world_size: 3\n  timeout_s: 3")
                   .replace("prompts_per_step: 32", "prompts_per_step: 3"))
    t0 = time.monotonic()
    rc, log = grpo_train("--config", str(cfg), "--output-dir", str(tmp_path / "o"),
                         "--reward-url", reward_url, timeout_s=180,
                         env={"RAY_TMPDIR": ray_tmp})
    assert rc == 1, log[-3000:]
    assert "GetTimeoutError" in log, log[-3000:]
    assert time.monotonic() - t0 < 150
    deadline = time.monotonic() + 15  # Ray's own processes exit asynchronously
    while procs_mentioning(ray_tmp) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert procs_mentioning(ray_tmp) == []


def test_sigterm_stops_at_step_boundary_with_checkpoint(reward_url, tmp_path):
    out = tmp_path / "o"
    proc = grpo_train("--config", TINY, "--output-dir", str(out), "--reward-url", reward_url,
                      "--backend", "local", "--max-steps", "100000", wait=False,
                      log=tmp_path / "log")
    try:
        deadline = time.monotonic() + 120
        metrics = out / "metrics.jsonl"
        while time.monotonic() < deadline and proc.poll() is None:
            if metrics.exists() and len(metrics.read_text().splitlines()) >= 3:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = (tmp_path / "log").read_text()
    assert rc == 130, log[-3000:]
    rows = read_metrics(out / "metrics.jsonl")
    last = rows[-1]["step"]
    assert steps_of(rows) == list(range(1, last + 1))
    assert [s for s, _ in list_checkpoints(out / "checkpoints")][-1] == last
    assert "eval/accuracy" in rows[-1]  # the final step evaluates too
    assert (out / "reward_curve.png").exists()
