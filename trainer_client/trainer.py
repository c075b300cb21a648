"""GRPO training loop: rollout → reward (over HTTP) → advantage → loss → step → sync → log.

    $ python -m reward_service serve --port 8000 &
    $ grpo-train --config configs/tiny-cpu.yaml --output-dir runs/tiny

or from Python: ``train(load_config("configs/tiny-cpu.yaml"), output_dir="runs/tiny")``.

One step, as the loop below reads:

1. **rollout**: the step's prompts, split in ``rollout.chunks`` chunks, are queued on the
   rollout engine (a Ray actor); ``n`` samples per prompt.
2. **reward**: as soon as a chunk's completions arrive they are sent to the reward service
   on a background thread, while the engine generates the next chunk. If the service is
   unreachable the step waits and retries (``reward.step_retry_backoff_s``) up to
   ``reward.step_max_wait_s``; then it goes on with those rewards unavailable (``None``).
3. **advantage**: group-normalised; unavailable rewards are left out and masked.
4. **loss + step**: every FSDP2 policy rank trains on its slice of the batch.
5. **sync**: the full weights are gathered on rank 0 and loaded into the rollout engine.
6. **log / eval / checkpoint**: a metrics line, greedy eval every ``eval.every`` steps,
   a checkpoint every ``checkpoint.every`` steps (newest ``keep_last`` kept).

The run is strictly on-policy: the rollout of step t+1 starts after step t's weights are
in the engine. What overlaps is scoring with generation inside a step.

Shutdown: ``stop`` (a ``threading.Event``, set by the CLI's signal handler) ends the run at
the next step boundary with a checkpoint; background threads end on it; actors, the HTTP
client and Ray are always closed, also when start-up fails halfway.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from trainer_client.batch import make_train_batch
from trainer_client.checkpoint import latest_checkpoint, list_checkpoints, read_trainer_state
from trainer_client.config import TrainConfig
from trainer_client.data import Problem, load_problems, render_prompt, sample_batch
from trainer_client.errors import RewardProtocolError, RewardServiceUnavailable
from trainer_client.grpo import apply_truncation, group_advantages, rewards_to_tensor
from trainer_client.metrics import (
    MetricsWriter,
    completion_metrics,
    plot_reward_curve,
    reward_metrics,
)
from trainer_client.pretrained import prepare_base_model
from trainer_client.reward_client import (
    RetryPolicy,
    RewardClient,
    RewardClientSettings,
    ScoreItem,
    ScoreResult,
    Timeout,
)
from trainer_client.rollout import Completion
from trainer_client.settings import PolicySettings, SamplingSettings
from trainer_client.workers import Workers, start_local_workers, start_ray_workers

__all__ = ["RunResult", "allowed_token_ids", "client_settings", "score_with_wait", "train"]

logger = logging.getLogger(__name__)

ProgressFn = Callable[[int, dict[str, Any]], None]


@dataclass(frozen=True)
class RunResult:
    output_dir: Path
    last_step: int
    metrics_path: Path
    plot_path: Path | None
    stopped: bool  # True when ended early by ``stop``


def client_settings(cfg: TrainConfig, api_token: str | None) -> RewardClientSettings:
    r = cfg.reward
    return RewardClientSettings(
        urls=tuple(r.urls),
        timeout=Timeout(connect=r.connect_timeout_s, read=r.read_timeout_s,
                        write=r.read_timeout_s, pool=r.connect_timeout_s),
        retry=RetryPolicy(max_attempts=r.max_attempts, deadline_s=r.request_deadline_s),
        api_token=api_token, chunk_size=r.chunk_size, max_concurrency=r.max_concurrency,
        item_timeout_s=r.item_timeout_s,
    )


def allowed_token_ids(tokenizer: Any, chars: str | None) -> tuple[int, ...] | None:
    """Token ids of single characters ``chars`` plus EOS (None: no restriction)."""
    if chars is None:
        return None
    ids = []
    for ch in chars:
        tid = tokenizer.convert_tokens_to_ids(ch)
        if tid is None or tid == tokenizer.unk_token_id:
            raise ValueError(f"allowed char {ch!r} is not a single token of this tokenizer")
        ids.append(int(tid))
    return (*sorted(set(ids)), int(tokenizer.eos_token_id))


def score_with_wait(client: RewardClient, items: Sequence[ScoreItem], *, max_wait_s: float,
                    backoff_s: float, stop: threading.Event) -> tuple[list[ScoreResult | None], int]:
    """Score ``items``, waiting for the service up to ``max_wait_s`` (retrying every
    ``backoff_s``). Returns ``(results, failed_attempts)``; results are all ``None`` when
    the service stayed unreachable. 4xx errors propagate: they are bugs, not outages."""
    deadline = time.monotonic() + max_wait_s
    failures = 0
    while True:
        try:
            return list(client.score(items)), failures
        except (RewardServiceUnavailable, RewardProtocolError) as e:
            failures += 1
            left = deadline - time.monotonic()
            logger.warning("rewards unavailable", extra={"error": str(e)[:200],
                                                         "failures": failures,
                                                         "wait_left_s": round(left, 1)})
            if left <= 0 or stop.is_set() or stop.wait(min(backoff_s, left)):
                return [None] * len(items), failures


def _items(problems: Sequence[Problem], groups: Sequence[Sequence[Completion]]) -> list[ScoreItem]:
    return [ScoreItem(response=c.text, ground_truth=p.ground_truth, scorer=p.scorer,
                      data_source=p.data_source, id=f"{p.id}#{k}")
            for p, g in zip(problems, groups, strict=True) for k, c in enumerate(g)]


def _prepare_model(cfg: TrainConfig, out: Path) -> str:
    m = cfg.model
    return prepare_base_model(m.path, package=m.package, gguf_file=m.gguf_file, tiny=m.tiny,
                              out_dir=out / "base_model")


def train(cfg: TrainConfig, *, output_dir: str | Path | None = None, resume: bool = False,
          max_steps: int | None = None, api_token: str | None = None,
          stop: threading.Event | None = None, progress: ProgressFn | None = None) -> RunResult:
    """Run GRPO as ``cfg`` says; see the module docstring. ``max_steps`` overrides
    ``cfg.run.steps`` (the total, counting steps done before a resume)."""
    stop = stop or threading.Event()
    out = Path(output_dir or cfg.run.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt_root = out / "checkpoints"
    total_steps = max_steps if max_steps is not None else cfg.run.steps

    base_path = _prepare_model(cfg, out)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    train_set, eval_set = load_problems(cfg.data)
    eval_set = eval_set[: cfg.eval.max_problems]
    allowed = allowed_token_ids(tokenizer, cfg.rollout.allowed_chars)

    def prompt(p: Problem) -> str:
        return render_prompt(p, tokenizer, template=cfg.data.template,
                             use_chat_template=cfg.data.use_chat_template,
                             system_prompt=cfg.data.system_prompt)

    start_step, model_path, optimizer_state = 0, base_path, None
    if resume and (ck := latest_checkpoint(ckpt_root)) is not None:
        start_step = int(read_trainer_state(ck)["step"])
        model_path, optimizer_state = str(ck / "model"), str(ck / "optimizer.pt")
        logger.info("resuming", extra={"checkpoint": str(ck), "step": start_step})
    elif resume:
        logger.info("resume asked but no checkpoint found: starting fresh")

    sampling = SamplingSettings(n=cfg.rollout.n, max_new_tokens=cfg.rollout.max_new_tokens,
                                temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                allowed_token_ids=allowed)
    greedy = SamplingSettings(n=1, max_new_tokens=cfg.rollout.max_new_tokens,
                              allowed_token_ids=allowed, greedy=True)
    policy_settings = PolicySettings(
        model_path=model_path, ref_model_path=base_path, dtype=cfg.model.dtype,
        device=cfg.policy.device, fsdp=cfg.policy.fsdp,
        micro_batch_size=cfg.policy.micro_batch_size, temperature=cfg.rollout.temperature,
        allowed_token_ids=allowed, gradient_checkpointing=cfg.policy.gradient_checkpointing,
        num_threads=cfg.policy.num_threads,
        optim=cfg.optim, grpo=cfg.grpo)

    client: RewardClient | None = None
    workers: Workers | None = None
    writer: MetricsWriter | None = None
    scorer_pool: ThreadPoolExecutor | None = None
    ray_started = False
    step = start_step
    plot: Path | None = None
    metrics_path = out / "metrics.jsonl"
    try:
        # -- start-up: every resource is closed in `finally`, also if a later one fails --
        client = RewardClient(client_settings(cfg, api_token), stop_event=stop)
        client.wait_ready(timeout_s=cfg.reward.ready_timeout_s)
        scorer_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grpo-reward")
        if cfg.run.backend == "ray":
            import ray

            ray.init(address=cfg.ray.address, num_cpus=cfg.ray.num_cpus,
                     include_dashboard=cfg.ray.include_dashboard, log_to_driver=True,
                     configure_logging=False,
                     runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "false",
                                                  "HF_HUB_DISABLE_PROGRESS_BARS": "1"}})
            ray_started = True
            workers = start_ray_workers(model_path, cfg.rollout.engine, policy_settings,
                                        world_size=cfg.policy.world_size,
                                        rollout_gpus=cfg.rollout.num_gpus,
                                        optimizer_state=optimizer_state,
                                        ready_timeout_s=cfg.policy.timeout_s)
        else:
            if cfg.policy.world_size != 1:
                raise ValueError("backend 'local' runs world size 1; use 'ray'")
            workers = start_local_workers(model_path, cfg.rollout.engine, policy_settings,
                                          optimizer_state=optimizer_state)
        writer = MetricsWriter(metrics_path, resume_step=start_step if resume else None)

        def evaluate() -> dict[str, float]:
            assert workers is not None and client is not None
            if not eval_set:
                return {}
            groups = workers.rollout.call("generate", [prompt(p) for p in eval_set],
                                          greedy).result(cfg.rollout.timeout_s)
            results, _ = score_with_wait(client, _items(eval_set, groups),
                                         max_wait_s=cfg.reward.step_max_wait_s,
                                         backoff_s=cfg.reward.step_retry_backoff_s, stop=stop)
            _, m = reward_metrics(results, prefix="eval")
            m["eval/accuracy"] = m.pop("eval/status/correct")
            m.pop("eval/mean", None)
            m.pop("eval/std", None)
            cm = completion_metrics([g[0] for g in groups], rollout_seconds=1.0)
            for k in ("mean_length", "truncated_fraction", "multi_answer_fraction"):
                m[f"eval/{k}"] = cm[f"completions/{k}"]
            return m

        if cfg.eval.at_start and cfg.eval.every and step == 0:
            t4 = time.monotonic()
            row0 = {"step": 0, **evaluate()}
            row0["timings/eval_seconds"] = time.monotonic() - t4
            writer.write(row0)

        # -- the loop --------------------------------------------------------------------
        t_loop = time.monotonic()
        limit = cfg.run.time_limit_s
        out_of_time = False
        while step < total_steps and not stop.is_set() and not out_of_time:
            step += 1
            t_step = time.monotonic()
            row: dict[str, Any] = {"step": step}
            problems = sample_batch(train_set, cfg.run.prompts_per_step, seed=cfg.run.seed,
                                    step=step)

            # 1. rollout (queued in chunks) and 2. reward (each chunk scored on arrival)
            t0 = time.monotonic()
            k = max(1, min(cfg.rollout.chunks, len(problems)))
            bounds = [(i * len(problems)) // k for i in range(k + 1)]
            chunk_problems = [problems[a:b] for a, b in itertools.pairwise(bounds)]
            gen_calls = [workers.rollout.call("generate", [prompt(p) for p in ps], sampling)
                         for ps in chunk_problems]
            groups: list[list[Completion]] = []
            reward_futs: list[Future[tuple[list[ScoreResult | None], int, float]]] = []

            def timed_score(items: list[ScoreItem]) -> tuple[list[ScoreResult | None], int,
                                                              float]:
                assert client is not None
                ts = time.monotonic()
                res, fails = score_with_wait(client, items,
                                             max_wait_s=cfg.reward.step_max_wait_s,
                                             backoff_s=cfg.reward.step_retry_backoff_s,
                                             stop=stop)
                return res, fails, time.monotonic() - ts

            for ps, call in zip(chunk_problems, gen_calls, strict=True):
                g = call.result(cfg.rollout.timeout_s)
                groups.extend(g)
                reward_futs.append(scorer_pool.submit(timed_score, _items(ps, g)))
            row["timings/rollout_seconds"] = time.monotonic() - t0
            t1 = time.monotonic()
            results: list[ScoreResult | None] = []
            failures, reward_s = 0, 0.0
            for f in reward_futs:
                res, fails, secs = f.result()
                results.extend(res)
                failures += fails
                reward_s += secs
            row["timings/reward_wait_seconds"] = time.monotonic() - t1
            row["timings/reward_seconds"] = reward_s
            rewards, rm = reward_metrics(results)
            row.update(rm)
            row["rewards/service_failures_total"] = failures
            completions = [c for g in groups for c in g]
            row.update(completion_metrics(completions, row["timings/rollout_seconds"]))

            # 3. advantage (truncated completions kept, masked or zeroed first)
            finished = torch.tensor([c.finished for c in completions], dtype=torch.bool)
            shaped, tm = apply_truncation(rewards_to_tensor(rewards), finished,
                                          cfg.grpo.truncated)
            row.update(tm)
            (adv, valid), am = group_advantages(shaped, cfg.rollout.n,
                                                scale=cfg.grpo.scale_rewards)
            row.update(am)

            # 4. loss + optimizer step, 5. weight sync
            no_signal = (cfg.grpo.skip_no_signal and cfg.grpo.kl_coef == 0
                         and not bool(adv.abs().sum() > 0))
            if bool(valid.any()) and not no_signal:
                t2 = time.monotonic()
                batch = make_train_batch(completions, adv, valid,
                                         pad_id=int(tokenizer.pad_token_id))
                row.update(workers.policy_call("train_step", batch).result(cfg.policy.timeout_s))
                row["timings/train_seconds"] = time.monotonic() - t2
                row["throughput/train_tokens_per_second"] = (
                    float(batch.attention_mask.sum()) * cfg.grpo.ppo_epochs
                    / max(row["timings/train_seconds"], 1e-9))
                t3 = time.monotonic()
                sd = workers.policy_call("full_state_dict")
                workers.rollout.call("load_weights", sd).result(cfg.policy.timeout_s)
                row["timings/sync_seconds"] = time.monotonic() - t3
                row["train/skipped"] = 0
            elif no_signal:
                logger.info("no group with reward spread: update skipped", extra={"step": step})
                row["train/skipped"] = 1
            else:
                logger.warning("no usable reward (unavailable, or truncated and masked): "
                               "step skipped", extra={"step": step})
                row["train/skipped"] = 1

            # 6. eval, checkpoint, log
            out_of_time = limit is not None and time.monotonic() - t_loop >= limit
            last = step == total_steps or stop.is_set() or out_of_time
            if cfg.eval.every and (step % cfg.eval.every == 0 or last):
                t4 = time.monotonic()
                row.update(evaluate())
                row["timings/eval_seconds"] = time.monotonic() - t4
            if (cfg.checkpoint.every and step % cfg.checkpoint.every == 0) or last:
                t5 = time.monotonic()
                workers.policy_call("save_checkpoint", str(ckpt_root), step,
                                    {"total_steps": total_steps},
                                    cfg.checkpoint.keep_last).result(cfg.policy.timeout_s)
                row["timings/checkpoint_seconds"] = time.monotonic() - t5
            row["timings/step_seconds"] = time.monotonic() - t_step
            if step % max(1, cfg.run.log_every) == 0 or last or "eval/accuracy" in row:
                writer.write(row)
            if progress is not None:
                progress(step, row)
        writer.close()
        writer = None
        plot = plot_reward_curve(metrics_path, out / "reward_curve.png",
                                 title=f"GRPO {out.name}")
    finally:
        stop.set()  # background scoring threads return at their next wait
        if writer is not None:
            writer.close()
        if scorer_pool is not None:
            scorer_pool.shutdown(wait=True, cancel_futures=True)
        if workers is not None:
            workers.close()
        if client is not None:
            client.close()
        if ray_started:
            import ray

            ray.shutdown()
    logger.info("run finished", extra={"step": step, "checkpoints": len(list_checkpoints(
        ckpt_root))})
    return RunResult(output_dir=out, last_step=step, metrics_path=metrics_path,
                     plot_path=plot, stopped=step < total_steps)  # also: run.time_limit_s

