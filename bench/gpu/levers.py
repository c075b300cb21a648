"""Issue 38's levers, per step, on a lent GPU: the GSM8K demo config and one-lever variants
of it, all trained at once on one GPU for the same wall-clock budget, each evaluated greedy
on the demo's 500 held-out test problems at its start and its end.

    python -m bench.gpu.levers --gguf DIR --data DIR --out DIR [--budget-s 300]
    python -m bench.gpu.levers --dry --out /tmp/levers     # tiny model on CPU: the plumbing

Why a GPU: on the 2-core machine one 30-minute run is one lever's figure; here every
variant runs side by side, with several times the CPU demo's steps. What moves is read per
step (the runs share the GPU, so their step counts differ and are recorded), not per
second: these runs say nothing about the CPU demo's wall clock. The lent machine has no
vLLM, so rollouts are HF ``generate`` on the GPU (the CPU demo: vLLM bf16); every other
setting is the CPU config's (``configs/smollm2-gsm8k-cpu.yaml``) but the one lever.

Writes ``OUT/levers.json``: per variant its overrides, steps, seconds, the step-0 and final
evals (accuracy, per-problem correctness, finished and '####' fractions), the mean
training reward, and the tail of its log. McNemar tests are computed where it is read
(``trainer_client.report.mcnemar_exact``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIG = ROOT / "configs" / "smollm2-gsm8k-cpu.yaml"

#: one lever each, against the CPU demo's settings (``demo``)
VARIANTS: dict[str, dict[str, Any]] = {
    "demo": {},
    "no_format_score": {"reward": {"extra": {"format_score": 0.0}}},
    "tokens_256": {"rollout": {"max_new_tokens": 256}},
    "calc_1": {"data": {"max_gold_steps": 1}},
    "group_16": {"rollout": {"n": 16}},
    "lr_3e-5": {"optim": {"lr": 3.0e-5}},
    "no_dynamic_sampling": {"run": {"rollout_prompts": 0}},
}
#: what one H200 holds side by side (each run's caching allocator takes ~20 GB, 7 did not fit)
DEFAULT = ("demo", "no_format_score", "calc_1", "group_16", "no_dynamic_sampling")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``; refuses an override that would change nothing (an
    empty mapping merges into the base's, which is how a first version of the
    ``no_format_score`` variant ran with the demo's format score)."""
    from trainer_client.config import _merge as merge

    out = merge(base, over)
    for key, value in over.items():
        if isinstance(value, dict):
            if not value:
                raise ValueError(f"override {key}: {{}} changes nothing; name the values")
            _merge(base.get(key) or {}, value)
    return out


def device_overrides(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """What the GPU run changes in every variant: where the model and data are, cuda."""
    if args.dry:
        return {"model": {"tiny": {"arch": "llama", "hidden_size": 64, "num_layers": 2,
                                   "num_heads": 1, "num_kv_heads": 1,
                                   "intermediate_size": 128, "seed": 0},
                          "package": None, "gguf_file": None},
                "data": {"train_path": str(ROOT / "../shared/data/gsm8k_train.jsonl"),
                         "eval_path": str(ROOT / "../shared/data/gsm8k_test.jsonl"),
                         "eval_size": 8, "use_chat_template": False},
                "rollout": {"engine": {"kind": "hf", "device": "cpu", "dtype": "float32"},
                            "max_new_tokens": 8},
                "policy": {"device": "cpu", "num_threads": 1, "compute_dtype": "float32"},
                "run": {"time_limit_s": args.budget_s},
                "eval": {"max_problems": 8}, "log": {"loggers": []}}
    data = Path(args.data).resolve()
    return {"model": {"path": base_model(Path(args.gguf), out.parent / "base_model"),
                      "package": None, "gguf_file": None},
            "data": {"train_path": str(data / "gsm8k_train.jsonl"),
                     "eval_path": str(data / "gsm8k_test.jsonl")},
            "rollout": {"engine": {"kind": "hf", "device": "cuda", "dtype": "bfloat16"}},
            "policy": {"device": "cuda", "num_threads": 0},
            "run": {"time_limit_s": args.budget_s},
            "log": {"loggers": [], "rollouts_every": 0}}


def base_model(gguf_dir: Path, out: Path) -> str:
    """The GGUF de-quantized once for every variant. The lent machine's transformers
    (5.17) gives the converted tokenizer no pad token; it is set to EOS here (padding is
    masked everywhere)."""
    from transformers import AutoTokenizer

    from trainer_client.model.pretrained import convert_gguf

    path = convert_gguf(gguf_dir, "SmolLM2-135M-Instruct.Q4_1.gguf", out)
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
        tok.save_pretrained(path)
    return str(path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _eval(path: Path) -> dict[str, Any]:
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    n = max(1, len(rows))
    return {"n": len(rows), "accuracy": sum(r["correct"] for r in rows) / n,
            "correct": "".join("1" if r["correct"] else "0" for r in rows),
            "ids": [r["id"] for r in rows][:3],
            "finished": sum(bool(r.get("finished")) for r in rows) / n,
            "hashes": sum("####" in (r.get("response") or "") for r in rows) / n,
            "mean_tokens": sum(r.get("tokens", 0) for r in rows) / n}


def summarize(name: str, run_dir: Path, rc: int | None, seconds: float) -> dict[str, Any]:
    evals = sorted((run_dir / "eval").glob("step_*.jsonl"),
                   key=lambda p: int(p.stem.split("_")[1]))
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()
               if x.strip()] if (run_dir / "metrics.jsonl").exists() else []
    steps = [m for m in metrics if m.get("step", 0) > 0 and "rewards/mean" in m]
    log = run_dir / "train.log"
    return {"name": name, "overrides": VARIANTS[name], "rc": rc, "seconds": round(seconds, 1),
            "steps": max((m["step"] for m in steps), default=0),
            "trained_steps": sum(1 for m in steps if "timings/train_seconds" in m),
            "mean_train_reward": (sum(m["rewards/mean"] for m in steps) / len(steps)
                                  if steps else None),
            "evals": {p.stem: _eval(p) for p in (evals[:1] + evals[-1:] if evals else [])},
            "log_tail": log.read_text()[-1500:] if log.exists() else ""}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gguf", help="dir holding SmolLM2-135M-Instruct.Q4_1.gguf")
    p.add_argument("--data", help="dir holding gsm8k_train.jsonl and gsm8k_test.jsonl")
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=300.0, help="training seconds per run")
    p.add_argument("--only", nargs="*", choices=list(VARIANTS), help="a subset of variants")
    p.add_argument("--workers", type=int, default=8, help="reward service workers")
    p.add_argument("--dry", action="store_true", help="tiny model on CPU, 2 variants")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path("/tmp/levers/runs")
    base = yaml.safe_load(CPU_CONFIG.read_text())
    dev = device_overrides(args, work)
    names = args.only or (["demo", "no_format_score"] if args.dry else list(DEFAULT))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false",
           "PYTHONUNBUFFERED": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    sandbox = [] if args.dry else ["--sandbox", "best-effort"]
    svc = subprocess.Popen([sys.executable, "-m", "reward_service", "serve", "--host",
                            "127.0.0.1", "--port", str(port), "--workers", str(args.workers),
                            *sandbox], stdout=(out / "service.log").open("w"),
                           stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    procs: dict[str, tuple[subprocess.Popen[bytes], float]] = {}
    results = []
    try:
        from trainer_client.reward_client import RewardClient, RewardClientSettings

        with RewardClient(RewardClientSettings(urls=(url,))) as client:
            client.wait_ready(timeout_s=180)
        for name in names:
            run_dir = work / name
            run_dir.mkdir(parents=True, exist_ok=True)
            cfg = _merge(_merge(base, VARIANTS[name]), dev)
            cfg["run"]["output_dir"] = str(run_dir)
            cfg_path = run_dir / "config.yaml"
            cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
            log = (run_dir / "train.log").open("w")
            procs[name] = (subprocess.Popen(
                [sys.executable, "-m", "trainer_client.cli", "--config", str(cfg_path),
                 "--reward-url", url, "--no-progress", "--log-level", "warning"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                start_new_session=True), time.monotonic())
        deadline = time.monotonic() + args.budget_s + 240  # start-up, evals, saves
        for name, (proc, t0) in procs.items():
            try:
                rc: int | None = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None  # killed at the deadline: its evals so far are still read
            results.append(summarize(name, work / name, rc, time.monotonic() - t0))
            (out / "levers.json").write_text(json.dumps({"budget_s": args.budget_s,
                                                         "variants": results}, indent=1))
    finally:
        for proc, _ in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        svc.send_signal(signal.SIGTERM)
        try:
            svc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            svc.kill()
    for r in results:
        ev = list(r["evals"].values())
        print(r["name"], r["rc"], r["steps"], [round(e["accuracy"], 3) for e in ev])
    return 0


if __name__ == "__main__":
    sys.exit(main())
