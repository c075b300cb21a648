"""A race: our GRPO trainer against TRL's released ``GRPOTrainer`` on this machine.

    python -m bench.trainer_vs_trl [--config configs/smollm2-addition-cpu.yaml]
        [--budget-s 1140] [--points 4] [--rounds 2] [--out bench/results/trainer_vs_trl.json]
    make bench-trainer

Both trainers, one after the other, each in a fresh process, get: the same model directory
(the config's, de-quantized once), the same prompts (the config's training problems rendered
by :func:`trainer_client.data.render_prompt`: the same chat-template strings), the same reward
(a reward service started here; TRL calls it through
:func:`trainer_client.integrations.trl.make_reward_func`), the same hyperparameters (group
size, prompts per step, max new tokens, temperature, top-p, learning rate and AdamW settings,
clip range, token-level loss, no KL, grad clip, one optimizer step per rollout) and the same
wall-clock budget. Each saves its model after the step during which ``k * budget / points``
seconds of training have passed (ours: ``checkpoint.every_s``; TRL: a ``TrainerCallback``,
:mod:`bench.trl_grpo`) and stops after the step that reaches the budget. Every checkpoint,
and the base model once, is then scored by the same greedy evaluator
(:func:`trainer_client.evaluate.evaluate_model`, the config's rollout engine) on the same
held-out problems. ``rounds`` rounds alternate the order (ours first, then TRL first) so
that the machine's drift falls on both.

TRL runs from its pinned folder (``.venv/frameworks/trl-1.16.0``, ``make frameworks``)
first on ``PYTHONPATH``; its generation is colocated vLLM if that runs (a 2-step probe; its
error is recorded in the results), else HF ``generate``.

Writes ``--out`` (JSON: ``{"runs": [{"trainer", "round", "task", "config", "versions",
"points": [{"wall_s", "step", "accuracy", "correct"}], "phases"}], ...}``;
``correct``: each held-out problem's greedy outcome, 0/1, for the paired tests of the summary) and a PNG beside it
(held-out accuracy against wall-clock seconds). Each run's files stay under
``<out dir>/trainer_vs_trl/``; checkpoints are deleted once scored (``--keep-checkpoints``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from bench.race_results import ours_phases, plot, summarize, tables, trl_phases

ROOT = Path(__file__).resolve().parents[1]
TRL_DIR = Path(os.environ.get("REWARD_FRAMEWORKS_DIR", ROOT / ".venv" / "frameworks")) \
    / "trl-1.16.0"

logger = logging.getLogger("bench.trainer_vs_trl")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def reward_service(log: Path, workers: int = 2) -> Iterator[str]:
    """``python -m reward_service serve`` on a free loopback port until the block ends."""
    from trainer_client.reward_client import RewardClient, RewardClientSettings

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with log.open("w") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "reward_service", "serve", "--host",
                                 "127.0.0.1", "--port", str(port), "--workers", str(workers)],
                                stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT,
                                env={**os.environ, "REWARD_LOG_LEVEL": "warning"})
        try:
            with RewardClient(RewardClientSettings(urls=(url,))) as client:
                client.wait_ready(timeout_s=120)
            yield url
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def race_config(raw: dict[str, Any], *, budget_s: float, points: int, out: Path) -> dict[str, Any]:
    """Our config for the race: the budget, checkpoints at the wall points only, no in-loop
    eval (every checkpoint is scored afterwards, as TRL's), a metrics line per step."""
    from trainer_client.config import _merge

    return _merge(raw, {
        "run": {"time_limit_s": budget_s, "steps": 100_000, "log_every": 1,
                "output_dir": str(out), "backend": "local"},
        "checkpoint": {"every": 0, "every_s": budget_s / points, "keep_last": 0},
        "eval": {"every": 0, "at_start": False},
    })


def shared_hparams(cfg: Any) -> dict[str, Any]:
    """The hyperparameters both trainers get (TRL's names are in :mod:`bench.trl_grpo`).
    Refuses settings TRL has no counterpart for."""
    r, g, o = cfg.rollout, cfg.grpo, cfg.optim
    if r.allowed_chars is not None:
        raise ValueError("rollout.allowed_chars is set: TRL's GRPOTrainer cannot restrict the "
                         "sampled tokens; race on a config without it")
    if g.kl_coef != 0 or g.ppo_epochs != 1 or (g.mini_batch_size not in (0, cfg.run.prompts_per_step * r.n)):
        raise ValueError("the race compares one optimizer step per rollout without KL "
                         "(grpo.kl_coef 0, ppo_epochs 1, one mini-batch)")
    if g.aggregation != "token":
        raise ValueError("the race uses the token-level loss (TRL's 'dapo'): "
                         "grpo.aggregation must be 'token'")
    if getattr(cfg.run, "rollout_prompts", 0):
        raise ValueError("run.rollout_prompts (dynamic sampling) has no TRL counterpart")
    if o.warmup_steps:
        raise ValueError("optim.warmup_steps: the race uses a constant learning rate")
    return {"prompts_per_step": cfg.run.prompts_per_step, "n": r.n,
            "max_new_tokens": r.max_new_tokens, "temperature": r.temperature, "top_p": r.top_p,
            "lr": o.lr, "beta1": o.beta1, "beta2": o.beta2, "eps": o.eps,
            "weight_decay": o.weight_decay, "grad_clip": o.grad_clip,
            "clip_eps_low": g.clip_eps_low, "clip_eps_high": g.clip_eps_high,
            "scale_rewards": g.scale_rewards, "truncated": g.truncated,
            "bf16": cfg.policy.compute_dtype == "bfloat16", "seed": cfg.run.seed,
            "max_model_len": r.engine.max_model_len}


def prompts_file(cfg: Any, tokenizer: Any, path: Path) -> int:
    """The training problems as TRL rows, prompts rendered exactly as our trainer renders
    them. Returns the number of rows."""
    from trainer_client.data import load_problems, render_prompt

    train_set, _ = load_problems(cfg.data)
    d = cfg.data
    with path.open("w") as fh:
        for p in train_set:
            fh.write(json.dumps({
                "prompt": render_prompt(p, tokenizer, template=d.template,
                                        use_chat_template=d.use_chat_template,
                                        system_prompt=d.system_prompt),
                "solution": p.ground_truth, "data_source": p.data_source,
                "scorer": p.scorer}) + "\n")
    return len(train_set)


def run_ours(config_path: Path, out: Path, url: str, timeout_s: float) -> dict[str, Any]:
    """Our trainer in a fresh process; its checkpoints (wall, step, model dir) and phases."""
    proc = subprocess.run([sys.executable, "-m", "trainer_client.cli", "--config",
                           str(config_path), "--output-dir", str(out), "--reward-url", url,
                           "--no-progress", "--log-level", "warning"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    (out / "train.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"our trainer failed ({proc.returncode}): {proc.stderr[-3000:]}")
    # only the models are scored: the optimizer states (1.1 GB a checkpoint for SmolLM2, 8
    # a run) go now, not after the last run (two runs' worth once filled this disk)
    for opt in (out / "checkpoints").glob("step_*/optimizer.pt"):
        opt.unlink()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x]
    ckpts: list[dict[str, Any]] = []
    for r in rows:
        if "timings/checkpoint_seconds" in r:
            path = out / "checkpoints" / f"step_{r['step']:06d}" / "model"
            ckpts.append({"wall_s": r["time/train_seconds"], "step": r["step"],
                          "path": str(path), "save_s": r["timings/checkpoint_seconds"]})
    return {"checkpoints": ckpts, "phases": ours_phases(rows)}


def trl_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{TRL_DIR}{os.pathsep}{ROOT}",
            "PYTHONDONTWRITEBYTECODE": "1", "TOKENIZERS_PARALLELISM": "false",
            "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"),
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}


def run_trl(spec: dict[str, Any], out: Path, timeout_s: float) -> dict[str, Any]:
    """TRL in a fresh process (:mod:`bench.trl_grpo`); its JSON report."""
    if not (TRL_DIR / "trl").is_dir():
        raise FileNotFoundError(f"TRL 1.16.0 is not installed in {TRL_DIR}: run `make frameworks`")
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps({**spec, "out": str(out)}, indent=1))
    proc = subprocess.run([sys.executable, "-m", "bench.trl_grpo", "--spec", str(spec_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                          env=trl_env())
    (out / "train.log").write_text(proc.stdout + proc.stderr)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"TRL runner failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def score(paths: Sequence[str], config: str, n_problems: int, url: str,
          timeout_s: float) -> list[dict[str, Any]]:
    """Greedy held-out accuracy of each model dir and its per-problem outcomes (``correct``:
    a string of 0/1, one per problem, in the held-out order), in a fresh process: its
    engines are freed with it."""
    proc = subprocess.run([sys.executable, "-m", "bench.trainer_vs_trl", "--config", config,
                           "--eval-problems", str(n_problems), "--score-url", url,
                           "--score", *paths], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout_s,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"scoring failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def score_here(paths: Sequence[str], cfg: Any, problems: Sequence[Any],
               url: str) -> list[dict[str, Any]]:
    """:func:`trainer_client.evaluate.evaluate_model` of each model dir: the config's
    template, token limit and rollout engine, greedy, scored by the service at ``url``."""
    from trainer_client.evaluate import EvalSettings, evaluate_model
    from trainer_client.reward_client import RewardClient, RewardClientSettings

    d = cfg.data
    settings = EvalSettings(max_new_tokens=cfg.rollout.max_new_tokens,
                            allowed_chars=cfg.rollout.allowed_chars, template=d.template,
                            use_chat_template=d.use_chat_template,
                            system_prompt=d.system_prompt, batch_size=len(problems))
    out = []
    with RewardClient(RewardClientSettings(urls=(url,))) as client:
        for p in paths:
            s = evaluate_model(p, problems, client, settings, cfg.rollout.engine)
            out.append({"accuracy": s.accuracy,
                        "correct": "".join("1" if c else "0" for c in s.correct)})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", default=str(ROOT / "configs" / "smollm2-addition-cpu.yaml"))
    p.add_argument("--budget-s", type=float, help="wall-clock budget per run "
                   "(default: the config's run.time_limit_s)")
    p.add_argument("--points", type=int, default=4, help="checkpoints per run (evenly spaced)")
    p.add_argument("--rounds", type=int, default=2, help="rounds, order alternated")
    p.add_argument("--trl-generation", choices=["auto", "vllm", "hf"], default="auto",
                   help="auto: colocated vLLM if a 2-step probe runs, else HF generate")
    p.add_argument("--eval-problems", type=int, help="held-out problems (default: the "
                   "config's eval.max_problems)")
    p.add_argument("--threads", type=int, default=2, help="torch threads of TRL's process")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "trainer_vs_trl.json"))
    p.add_argument("--keep-checkpoints", action="store_true")
    p.add_argument("--report", metavar="RESULTS_JSON",
                   help="print the markdown tables of a results file, run nothing")
    p.add_argument("--score", nargs="+", metavar="MODEL_DIR", help=argparse.SUPPRESS)
    p.add_argument("--score-url", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.report:
        print(tables(json.loads(Path(args.report).read_text())))
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from transformers import AutoTokenizer

    from trainer_client.config import load_config
    from trainer_client.data import load_problems
    from trainer_client.model.pretrained import prepare_base_model

    if args.score:  # the scoring subprocess of `score`
        cfg = load_config(args.config, overrides={"model": {"path": "unused"}})
        _, held_out = load_problems(cfg.data)
        held_out = held_out[: args.eval_problems or cfg.eval.max_problems]
        print(json.dumps(score_here(args.score, cfg, held_out, args.score_url)))
        return 0

    out_json = Path(args.out)
    work = out_json.parent / out_json.stem
    work.mkdir(parents=True, exist_ok=True)
    raw = yaml.safe_load(Path(args.config).read_text())
    base_cfg = load_config(args.config)
    budget = float(args.budget_s or base_cfg.run.time_limit_s or 0)
    if budget <= 0:
        raise SystemExit("no budget: pass --budget-s or set run.time_limit_s")
    hparams = shared_hparams(base_cfg)
    m = base_cfg.model
    model = prepare_base_model(m.path, package=m.package, gguf_file=m.gguf_file, tiny=m.tiny,
                               out_dir=work / "base_model")
    raw = {**raw, "model": {"path": model, "dtype": m.dtype}}  # the same dir as TRL's
    tok = AutoTokenizer.from_pretrained(model)
    data = work / "prompts.jsonl"
    n_rows = prompts_file(base_cfg, tok, data)
    _, eval_set = load_problems(base_cfg.data)
    eval_set = eval_set[: args.eval_problems or base_cfg.eval.max_problems]
    if not eval_set:
        raise SystemExit("the config holds out no problems (data.eval_size)")
    task = f"{base_cfg.data.format} ({Path(args.config).name})"
    run_timeout = budget * 3 + 900
    result: dict[str, Any] = {"budget_s": budget, "points_per_run": args.points,
                              "rounds": args.rounds, "eval_problems": len(eval_set),
                              "train_prompts": n_rows, "hparams": hparams, "runs": []}
    with reward_service(work / "reward-service.log") as url:
        spec = {"model": model, "data": str(data), "reward_url": url, "budget_s": budget,
                "every_s": budget / args.points, "max_steps": 100_000,
                "threads": args.threads, "hparams": hparams, "generation": "hf"}
        if args.trl_generation in ("auto", "vllm"):
            try:
                probe = run_trl({**spec, "generation": "vllm", "max_steps": 2, "budget_s": 1e9,
                                 "every_s": 1e9}, work / "trl_vllm_probe", 900)
            except subprocess.TimeoutExpired:
                probe = {"error": "no 2 steps within 900 s", "steps": []}
            result["trl_vllm_probe"] = {k: probe.get(k) for k in ("error", "traceback")}
            result["trl_vllm_probe"]["steps"] = len(probe["steps"])
            shutil.rmtree(work / "trl_vllm_probe" / "checkpoints", ignore_errors=True)
            if probe.get("error") is None and len(probe["steps"]) == 2:
                spec["generation"] = "vllm"
            elif args.trl_generation == "vllm":
                raise SystemExit(f"TRL with colocated vLLM failed: {probe.get('error')}")
        result["trl_generation"] = spec["generation"]
        runs: list[dict[str, Any]] = []
        for k in range(1, args.rounds + 1):
            for who in (("ours", "trl") if k % 2 else ("trl", "ours")):
                d = work / f"{who}_round{k}"
                if d.exists():
                    shutil.rmtree(d)
                d.mkdir(parents=True)
                logger.info("run %s round %d", who, k)
                if who == "ours":
                    cfg_raw = race_config(raw, budget_s=budget, points=args.points, out=d)
                    cfg_path = d / "config.yaml"
                    cfg_path.write_text(yaml.safe_dump(cfg_raw, sort_keys=False))
                    cfg = load_config(cfg_path)
                    rep = run_ours(cfg_path, d, url, run_timeout)
                    runs.append({"trainer": "ours", "round": k, "task": task,
                                 "config": dataclasses.asdict(cfg),
                                 "versions": _our_versions(), "ckpts": rep["checkpoints"],
                                 "phases": rep["phases"]})
                else:
                    rep = run_trl(spec, d, run_timeout)
                    if rep.get("error"):
                        raise RuntimeError(f"TRL run failed: {rep['error']}\n"
                                           f"{rep.get('traceback', '')}")
                    runs.append({"trainer": "trl", "round": k, "task": task,
                                 "config": {"GRPOConfig": rep["config"],
                                            "generation": spec["generation"],
                                            "prompt_ids_same_as_ours":
                                                rep.get("prompt_ids_same_as_ours")},
                                 "versions": rep["versions"], "ckpts": rep["checkpoints"],
                                 "phases": trl_phases(rep)})
        logger.info("scoring %d checkpoints and the base model",
                    sum(len(r["ckpts"]) for r in runs))
        base = score([model], args.config, len(eval_set), url, run_timeout)[0]
        for r in runs:
            scores = score([c["path"] for c in r["ckpts"]], args.config, len(eval_set), url,
                           run_timeout)
            r["points"] = [{"wall_s": 0.0, "step": 0, **base}] + [
                {"wall_s": round(c["wall_s"], 1), "step": c["step"], **sc}
                for c, sc in zip(r["ckpts"], scores, strict=True)]
            for c in r.pop("ckpts"):
                if not args.keep_checkpoints:
                    shutil.rmtree(Path(c["path"]).parent if Path(c["path"]).name == "model"
                                  else c["path"], ignore_errors=True)
        result["runs"] = runs
    result["summary"] = summarize(runs)
    out_json.write_text(json.dumps(result, indent=1, default=str))
    trl_version = next((r["versions"].get("trl", "") for r in runs if r["trainer"] == "trl"), "")
    png = plot(runs, out_json.with_suffix(".png"),
               f"GRPO on {task}: ours vs TRL {trl_version} "
               f"({budget / 60:.1f} min each, {len(eval_set)} held-out problems)")
    print(json.dumps({"summary": result["summary"], "json": str(out_json), "plot": str(png)},
                     indent=1))
    return 0


def _our_versions() -> dict[str, Any]:
    """The installed versions run.json records (this project, torch, transformers, vLLM...)
    and the tree's commit (the package's own version does not move between commits)."""
    from trainer_client.manifest import git_commit, package_versions

    out: dict[str, Any] = {k: v for k, v in package_versions().items() if v is not None}
    out["git"] = git_commit(ROOT)
    return out


if __name__ == "__main__":
    sys.exit(main())
