"""GRPO training loop: rollout → reward (over HTTP) → advantage → loss → step → sync → log.

    $ python -m reward_service serve --port 8000 &
    $ grpo-train --config configs/tiny-cpu.yaml --output-dir runs/tiny

or from Python: ``train(load_config("configs/tiny-cpu.yaml"), output_dir="runs/tiny")``.

One step, as the loop below reads (each phase a function of :mod:`trainer_client.step`):

1. **rollout**: the step's prompts, split in ``rollout.chunks`` chunks, are queued on the
   rollout engine (a Ray actor); ``n`` samples per prompt.
2. **reward**: as soon as a chunk's completions arrive they are sent to the reward service
   on a background thread, while the engine generates the next chunk. If the service is
   unreachable the step waits and retries (``reward.step_retry_backoff_s``) up to
   ``reward.step_max_wait_s``; then it goes on with those rewards unavailable (``None``).
3. **advantage**: group-normalised; unavailable rewards are left out and masked.
4. **loss + step**: every FSDP2 policy rank trains on its slice of the batch.
5. **sync**: the full weights are gathered on rank 0 and loaded into the rollout engine.
6. **log / eval / checkpoint**: the step's samples to ``rollouts/step_<N>.jsonl`` (right
   after its advantages), a metrics line (also to TensorBoard, W&B, MLflow as ``log``
   says), greedy eval every ``eval.every`` steps, a checkpoint every ``checkpoint.every``
   steps (newest ``keep_last`` kept). A full disk stops the run with
   :class:`~trainer_client.tracking.DiskFullError`; no file is left with half a line.

The run is strictly on-policy: the rollout of step t+1 starts after step t's weights are
in the engine. What overlaps is scoring with generation inside a step.

Shutdown: ``stop`` (a ``threading.Event``, set by the CLI's signal handler) ends the run at
the next step boundary with a checkpoint; background threads end on it; actors, the HTTP
client and Ray are always closed, also when start-up fails halfway.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer

import trainer_client.step as phase
from trainer_client.config import TrainConfig
from trainer_client.data import Problem, load_problems, sample_batch
from trainer_client.manifest import fetch_service_info, write_manifest
from trainer_client.metrics import MetricsWriter, completion_metrics, plot_reward_curve, rss_gb
from trainer_client.model.checkpoint import latest_checkpoint, list_checkpoints, read_trainer_state
from trainer_client.model.pretrained import prepare_base_model
from trainer_client.reward_client import RetryPolicy, RewardClient, RewardClientSettings, Timeout
from trainer_client.settings import PolicySettings, SamplingSettings
from trainer_client.step import StepContext, score_with_wait
from trainer_client.tracking import RunTracker, generation_records, preflight
from trainer_client.tracking.files import disk_full_as_error
from trainer_client.tracking.records import advantages_in_loss
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


def _prepare_model(cfg: TrainConfig, out: Path) -> str:
    m = cfg.model
    return prepare_base_model(m.path, package=m.package, gguf_file=m.gguf_file, tiny=m.tiny,
                              out_dir=out / "base_model")


@dataclass(frozen=True)
class _StartPoint:
    """Where the run starts: the base model, or the newest checkpoint on resume."""

    step: int
    model_path: str
    optimizer_state: str | None


def _start_point(ckpt_root: Path, base_path: str, resume: bool) -> _StartPoint:
    if resume and (ck := latest_checkpoint(ckpt_root)) is not None:
        start = _StartPoint(int(read_trainer_state(ck)["step"]), str(ck / "model"),
                            str(ck / "optimizer.pt"))
        logger.info("resuming", extra={"checkpoint": str(ck), "step": start.step})
        return start
    if resume:
        logger.info("resume asked but no checkpoint found: starting fresh")
    return _StartPoint(0, base_path, None)


def _policy_settings(cfg: TrainConfig, start: _StartPoint, base_path: str,
                     allowed: tuple[int, ...] | None) -> PolicySettings:
    return PolicySettings(
        model_path=start.model_path, ref_model_path=base_path, dtype=cfg.model.dtype,
        compute_dtype=cfg.policy.compute_dtype, device=cfg.policy.device, fsdp=cfg.policy.fsdp,
        micro_batch_size=cfg.policy.micro_batch_size, temperature=cfg.rollout.temperature,
        allowed_token_ids=allowed, gradient_checkpointing=cfg.policy.gradient_checkpointing,
        attn_implementation=cfg.policy.attn_implementation,
        share_prompt=cfg.policy.share_prompt, num_threads=cfg.policy.num_threads,
        optim=cfg.optim, grpo=cfg.grpo)


@dataclass
class _Resources:
    """What a run opens, in start-up order; :meth:`close` closes what was opened, also when
    start-up failed halfway."""

    client: RewardClient | None = None
    scorer_pool: ThreadPoolExecutor | None = None
    ray_started: bool = False
    workers: Workers | None = None
    writer: MetricsWriter | None = None
    tracker: RunTracker | None = None

    def close(self, stop: threading.Event, *, ok: bool = True) -> None:
        stop.set()  # background scoring threads return at their next wait
        if self.writer is not None:
            self.writer.close()
        if self.scorer_pool is not None:
            self.scorer_pool.shutdown(wait=True, cancel_futures=True)
        if self.workers is not None:
            self.workers.close()
        if self.client is not None:
            self.client.close()
        if self.ray_started:
            import ray

            ray.shutdown()
        if self.tracker is not None:  # last: after a failure it may raise (a full disk)
            self.tracker.close(ok)


def _start_workers(cfg: TrainConfig, res: _Resources, start: _StartPoint,
                   policy_settings: PolicySettings) -> Workers:
    """The rollout engine and the policy ranks: Ray actors, or in this process."""
    if cfg.run.backend == "ray":
        import ray

        ray.init(address=cfg.ray.address, num_cpus=cfg.ray.num_cpus,
                 include_dashboard=cfg.ray.include_dashboard, log_to_driver=True,
                 configure_logging=False,
                 runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "false",
                                              "HF_HUB_DISABLE_PROGRESS_BARS": "1"}})
        res.ray_started = True
        return start_ray_workers(start.model_path, cfg.rollout.engine, policy_settings,
                                 world_size=cfg.policy.world_size,
                                 rollout_gpus=cfg.rollout.num_gpus,
                                 optimizer_state=start.optimizer_state,
                                 ready_timeout_s=cfg.policy.timeout_s)
    if cfg.policy.world_size != 1:
        raise ValueError("backend 'local' runs world size 1; use 'ray'")
    return start_local_workers(start.model_path, cfg.rollout.engine, policy_settings,
                               optimizer_state=start.optimizer_state)


def _loop(ctx: StepContext, writer: MetricsWriter, tracker: RunTracker,
          train_set: list[Problem], *, step: int, total_steps: int,
          progress: ProgressFn | None) -> int:
    """Steps ``step + 1 .. total_steps`` (fewer on ``stop`` or ``run.time_limit_s``);
    returns the last step done."""
    cfg, stop = ctx.cfg, ctx.stop
    t_loop = time.monotonic()
    limit = cfg.run.time_limit_s
    every_s = cfg.checkpoint.every_s
    next_save_s = every_s if every_s > 0 else float("inf")
    # `last` is decided once a step, and the loop ends on that decision alone: a `stop` that
    # comes after it (while the step logs) ends the next step, which then evaluates and saves
    last = stop.is_set()
    while step < total_steps and not last:
        step += 1
        t_step = time.monotonic()
        row: dict[str, Any] = {"step": step}
        problems = sample_batch(train_set, cfg.run.rollout_prompts or cfg.run.prompts_per_step,
                                seed=cfg.run.seed, step=step)

        # 1. rollout (queued in chunks), each chunk sent for scoring on arrival
        completions, reward_futs = phase.rollout(ctx, problems, row)  # [B = prompts * n]
        # 2. reward
        rewards, results = phase.collect_rewards(reward_futs, row)  # [B], None: unavailable
        row.update(completion_metrics(completions, row["timings/rollout_seconds"]))
        # 3. advantage
        adv, valid = phase.advantages(ctx, completions, rewards, row)  # [B], [B]
        rolled = completions  # [B]: every sampled completion, for the rollout log
        if cfg.run.rollout_prompts:  # dynamic sampling: only groups with a reward spread
            completions, adv, valid = phase.keep_signal_groups(
                completions, adv, valid, group_size=cfg.rollout.n,
                groups_wanted=cfg.run.prompts_per_step, world_size=cfg.policy.world_size,
                row=row)
        if tracker.wants_records(step):  # the rollout log: every sample, scored, with the
            t_log = time.monotonic()  # advantage it got in the loss (None: not in it)
            tracker.log_rollouts(step, generation_records(
                step, problems, rolled, results, prompts=[ctx.prompt(p) for p in problems],
                advantages=advantages_in_loss(rolled, completions, adv.tolist(),
                                              valid.tolist())))
            row["timings/rollout_log_seconds"] = time.monotonic() - t_log
        # 4. loss + optimizer step, 5. weight sync (both skipped when nothing to learn)
        if phase.train_step(ctx, step, completions, adv, valid, row):
            phase.sync_weights(ctx, row)

        # 6. eval, checkpoint, log
        elapsed = time.monotonic() - t_loop
        row["time/train_seconds"] = elapsed  # since the first step began
        out_of_time = limit is not None and elapsed >= limit
        timed_save = elapsed >= next_save_s
        while next_save_s <= elapsed:
            next_save_s += every_s
        last = step == total_steps or stop.is_set() or out_of_time
        if cfg.eval.every and (step % cfg.eval.every == 0 or last):
            phase.evaluate(ctx, row)
        if (cfg.checkpoint.every and step % cfg.checkpoint.every == 0) or last or timed_save:
            phase.save_checkpoint(ctx, step, total_steps, row)
        row["timings/step_seconds"] = time.monotonic() - t_step
        rss = rss_gb()
        if rss is not None:
            row["system/rss_gb"] = rss
        if (step % max(1, cfg.run.log_every) == 0 or last or "eval/accuracy" in row
                or "timings/checkpoint_seconds" in row):
            writer.write(row)
            tracker.log_metrics(row)
        if progress is not None:
            progress(step, row)
    return step


def train(cfg: TrainConfig, *, output_dir: str | Path | None = None, resume: bool = False,
          max_steps: int | None = None, api_token: str | None = None,
          stop: threading.Event | None = None, progress: ProgressFn | None = None) -> RunResult:
    """Run GRPO as ``cfg`` says; see the module docstring. ``max_steps`` overrides
    ``cfg.run.steps`` (the total, counting steps done before a resume). On return (or raise)
    the run's memory is handed back: the caller's process may go on (a notebook, a test
    session, a bench beside Ray actors)."""
    try:
        return _train(cfg, output_dir=output_dir, resume=resume, max_steps=max_steps,
                      api_token=api_token, stop=stop, progress=progress)
    finally:
        _return_freed_memory()


def _return_freed_memory() -> None:
    """Collect the run's reference cycles (vLLM's in-process engine has them) and give the
    freed heap back to the OS: glibc keeps it otherwise (a local run of the demo config left
    4.0 GB resident, 1.2 GB after the trim; measured)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def _train(cfg: TrainConfig, *, output_dir: str | Path | None, resume: bool,
           max_steps: int | None, api_token: str | None, stop: threading.Event | None,
           progress: ProgressFn | None) -> RunResult:
    stop = stop or threading.Event()
    out = Path(output_dir or cfg.run.output_dir)
    preflight(cfg.log, out)  # writable output dir, logger packages: before the model loads
    ckpt_root = out / "checkpoints"
    total_steps = max_steps if max_steps is not None else cfg.run.steps

    base_path = _prepare_model(cfg, out)
    tokenizer = AutoTokenizer.from_pretrained(base_path)
    if tokenizer.pad_token_id is None:  # e.g. a GGUF converted by transformers 5.17: rows
        tokenizer.pad_token = tokenizer.eos_token  # are padded only where masked out
    train_set, eval_set = load_problems(cfg.data)
    allowed = allowed_token_ids(tokenizer, cfg.rollout.allowed_chars)
    start = _start_point(ckpt_root, base_path, resume)
    sampling = SamplingSettings(n=cfg.rollout.n, max_new_tokens=cfg.rollout.max_new_tokens,
                                temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                allowed_token_ids=allowed)
    greedy = SamplingSettings(n=1, max_new_tokens=cfg.rollout.max_new_tokens,
                              allowed_token_ids=allowed, greedy=True)

    res = _Resources()
    step = start.step
    plot: Path | None = None
    metrics_path = out / "metrics.jsonl"
    ok = False
    try:
        # -- start-up: every resource is closed by `res.close`, also if a later one fails --
        res.client = client = RewardClient(client_settings(cfg, api_token), stop_event=stop)
        ready_url = client.wait_ready(timeout_s=cfg.reward.ready_timeout_s)
        res.scorer_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="grpo-reward")
        res.workers = _start_workers(cfg, res, start,
                                     _policy_settings(cfg, start, base_path, allowed))
        res.writer = writer = MetricsWriter(metrics_path,
                                            resume_step=start.step if resume else None)
        res.tracker = tracker = RunTracker(cfg.log, out, start_step=start.step,
                                           resumed=resume, config=dataclasses.asdict(cfg))
        ctx = StepContext(cfg=cfg, workers=res.workers, client=client,
                          scorer_pool=res.scorer_pool, tokenizer=tokenizer, sampling=sampling,
                          greedy=greedy, eval_set=eval_set[: cfg.eval.max_problems],
                          ckpt_root=ckpt_root, stop=stop, eval_dir=out / "eval")
        write_manifest(out / "run.json", cfg, engine=res.workers.rollout.call(
            "describe").result(cfg.rollout.timeout_s),
            reward_info=fetch_service_info(ready_url, api_token),
            resumed_from=start.step if resume else None)

        if cfg.eval.at_start and cfg.eval.every and step == 0:
            row0: dict[str, Any] = {"step": 0}
            phase.evaluate(ctx, row0)
            writer.write(row0)
            tracker.log_metrics(row0)
        # -- the loop --------------------------------------------------------------------
        step = _loop(ctx, writer, tracker, train_set, step=step, total_steps=total_steps,
                     progress=progress)
        writer.close()
        res.writer = None
        with disk_full_as_error(out / "reward_curve.png"):
            plot = plot_reward_curve(metrics_path, out / "reward_curve.png",
                                     title=f"GRPO {out.name}")
        ok = True
    finally:
        res.close(stop, ok=ok)
    logger.info("run finished", extra={"step": step, "checkpoints": len(list_checkpoints(
        ckpt_root))})
    return RunResult(output_dir=out, last_step=step, metrics_path=metrics_path,
                     plot_path=plot, stopped=step < total_steps)  # also: run.time_limit_s
