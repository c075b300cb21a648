"""The phases of one GRPO step, each a function that the loop in
:mod:`trainer_client.trainer` calls in order:

1. :func:`rollout`: queue the prompts on the rollout engine in chunks; score each chunk in the
   background as it arrives.
2. :func:`collect_rewards`: wait for the chunks' rewards (``None`` where unavailable).
3. :func:`advantages`: truncation treatment, then group-normalised advantages ``[B]``.
4. :func:`train_step`: loss + optimizer step on every policy rank.
5. :func:`sync_weights`: the full weights from rank 0 into the rollout engine.

plus :func:`evaluate` (greedy, scored by the service) and :func:`save_checkpoint`.

Every phase writes its metrics and timings into the step's ``row`` (namespaced keys:
``timings/rollout_seconds``, ``rewards/mean``, ...), in the order the metrics file has
always had them.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer_client.config import TrainConfig
from trainer_client.data import Problem, render_prompt
from trainer_client.errors import RewardProtocolError, RewardServiceUnavailable
from trainer_client.metrics import completion_metrics, reward_metrics, write_text_atomic
from trainer_client.model.batch import make_train_batch
from trainer_client.model.grpo import apply_truncation, group_advantages, rewards_to_tensor
from trainer_client.model.rollout import Completion
from trainer_client.reward_client import RewardClient, ScoreItem, ScoreResult
from trainer_client.settings import SamplingSettings
from trainer_client.tracking.records import generation_records
from trainer_client.workers import Workers

__all__ = ["StepContext", "advantages", "collect_rewards", "eval_records", "evaluate",
           "keep_signal_groups", "rollout", "save_checkpoint", "score_items", "score_with_wait", "sync_weights",
           "train_step", "write_eval_file"]

logger = logging.getLogger(__name__)

# one chunk's rewards: (results, failed attempts, seconds spent scoring)
ChunkRewards = tuple[list[ScoreResult | None], int, float]


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


def score_items(problems: Sequence[Problem], groups: Sequence[Sequence[Completion]],
                extra: dict[str, Any] | None = None) -> list[ScoreItem]:
    """One item per completion, id ``"<problem id>#<sample index>"``, each with ``extra``
    (``reward.extra``: scorer options such as gsm8k's ``format_score``)."""
    return [ScoreItem(response=c.text, ground_truth=p.ground_truth, scorer=p.scorer,
                      data_source=p.data_source, id=f"{p.id}#{k}", extra=extra)
            for p, g in zip(problems, groups, strict=True) for k, c in enumerate(g)]


@dataclass(frozen=True, kw_only=True)
class StepContext:
    """What every step uses, built once by :func:`trainer_client.trainer.train`."""

    cfg: TrainConfig
    workers: Workers
    client: RewardClient
    scorer_pool: ThreadPoolExecutor  # scores chunks while the engine generates the next
    tokenizer: Any
    sampling: SamplingSettings  # training rollouts: n samples per prompt
    greedy: SamplingSettings  # eval: one greedy sample
    eval_set: Sequence[Problem]
    ckpt_root: Path
    stop: threading.Event
    eval_dir: Path  # eval/step_<N>.jsonl

    def prompt(self, p: Problem) -> str:
        d = self.cfg.data
        return render_prompt(p, self.tokenizer, template=d.template,
                             use_chat_template=d.use_chat_template, system_prompt=d.system_prompt)

    def score(self, items: Sequence[ScoreItem]) -> tuple[list[ScoreResult | None], int]:
        r = self.cfg.reward
        return score_with_wait(self.client, items, max_wait_s=r.step_max_wait_s,
                               backoff_s=r.step_retry_backoff_s, stop=self.stop)

    def timed_score(self, items: Sequence[ScoreItem]) -> ChunkRewards:
        ts = time.monotonic()
        res, fails = self.score(items)
        return res, fails, time.monotonic() - ts


def rollout(ctx: StepContext, problems: Sequence[Problem],
            row: dict[str, Any]) -> tuple[list[Completion], list[Future[ChunkRewards]]]:
    """Generate ``n`` completions per problem (``rollout.chunks`` calls queued at once) and
    submit each chunk for scoring as soon as it arrives. Returns the completions, flattened
    group after group ``[B = len(problems) * n]``, and the chunks' reward futures."""
    cfg = ctx.cfg
    t0 = time.monotonic()
    k = max(1, min(cfg.rollout.chunks, len(problems)))
    bounds = [(i * len(problems)) // k for i in range(k + 1)]
    chunk_problems = [problems[a:b] for a, b in itertools.pairwise(bounds)]
    gen_calls = [ctx.workers.rollout.call("generate", [ctx.prompt(p) for p in ps], ctx.sampling)
                 for ps in chunk_problems]
    groups: list[list[Completion]] = []
    reward_futs: list[Future[ChunkRewards]] = []
    for ps, call in zip(chunk_problems, gen_calls, strict=True):
        g = call.result(cfg.rollout.timeout_s)
        groups.extend(g)
        reward_futs.append(ctx.scorer_pool.submit(ctx.timed_score,
                                                  score_items(ps, g, cfg.reward.extra)))
    row["timings/rollout_seconds"] = time.monotonic() - t0
    return [c for g in groups for c in g], reward_futs


def collect_rewards(reward_futs: Sequence[Future[ChunkRewards]], row: dict[str, Any]
                    ) -> tuple[list[float | None], list[ScoreResult | None]]:
    """Wait for every chunk's rewards: TRL-style rewards ``[B]`` (``None``: unavailable)
    and the service's results ``[B]`` (``None``: not reached)."""
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
    return rewards, results


def advantages(ctx: StepContext, completions: Sequence[Completion],
               rewards: list[float | None],
               row: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Group-normalised advantages ``[B]`` and their validity mask ``[B]`` (truncated
    completions kept, masked or zeroed first as ``grpo.truncated`` says)."""
    cfg = ctx.cfg
    finished = torch.tensor([c.finished for c in completions], dtype=torch.bool)  # [B]
    shaped, tm = apply_truncation(rewards_to_tensor(rewards), finished, cfg.grpo.truncated)
    row.update(tm)
    (adv, valid), am = group_advantages(shaped, cfg.rollout.n, scale=cfg.grpo.scale_rewards)
    row.update(am)
    return adv, valid


def keep_signal_groups(completions: Sequence[Completion], adv: torch.Tensor, valid: torch.Tensor,
                       *, group_size: int, groups_wanted: int, world_size: int,
                       row: dict[str, Any]) -> tuple[list[Completion], torch.Tensor, torch.Tensor]:
    """DAPO's dynamic sampling: of the rolled-out groups (``adv``, ``valid``: ``[B]``, groups
    of ``group_size`` consecutive items), the first ``groups_wanted`` that have a reward spread
    (a group whose advantages are all 0 adds no gradient, only cost), trimmed so the batch
    divides by ``world_size``. When none has a spread, the first ``groups_wanted`` groups (all
    zero: :func:`train_step` skips them). Records ``train/groups_with_signal`` and
    ``train/groups_trained``."""
    n = group_size
    groups = len(completions) // n
    signal = [g for g in range(groups) if bool(adv[g * n:(g + 1) * n].abs().sum() > 0)]
    keep = signal[:groups_wanted]
    while keep and len(keep) * n % world_size:
        keep.pop()
    row["train/groups_with_signal"] = len(signal)
    row["train/groups_trained"] = len(keep)
    if not keep:
        keep = list(range(min(groups_wanted, groups)))
    idx = [g * n + k for g in keep for k in range(n)]  # [len(keep) * n]
    at = torch.tensor(idx, dtype=torch.long)
    return [completions[i] for i in idx], adv[at], valid[at]


def train_step(ctx: StepContext, step: int, completions: Sequence[Completion],
               adv: torch.Tensor, valid: torch.Tensor, row: dict[str, Any]) -> bool:
    """Loss + optimizer step on every rank. Returns False (and records ``train/skipped``)
    when there is nothing to learn from: no usable reward, or (with ``grpo.skip_no_signal``
    and no KL term) no group with a reward spread."""
    cfg = ctx.cfg
    no_signal = (cfg.grpo.skip_no_signal and cfg.grpo.kl_coef == 0
                 and not bool(adv.abs().sum() > 0))
    if not bool(valid.any()) or no_signal:
        if no_signal:
            logger.info("no group with reward spread: update skipped", extra={"step": step})
        else:
            logger.warning("no usable reward (unavailable, or truncated and masked): "
                           "step skipped", extra={"step": step})
        row["train/skipped"] = 1
        return False
    t2 = time.monotonic()
    batch = make_train_batch(completions, adv, valid, pad_id=int(ctx.tokenizer.pad_token_id))
    row.update(ctx.workers.policy_call("train_step", batch).result(cfg.policy.timeout_s))
    row["timings/train_seconds"] = time.monotonic() - t2
    row["throughput/train_tokens_per_second"] = (
        float(batch.attention_mask.sum()) * cfg.grpo.ppo_epochs
        / max(row["timings/train_seconds"], 1e-9))
    return True


def sync_weights(ctx: StepContext, row: dict[str, Any]) -> None:
    """Gather the full weights on rank 0 and load them into the rollout engine."""
    t3 = time.monotonic()
    sd = ctx.workers.policy_call("full_state_dict")
    ctx.workers.rollout.call("load_weights", sd).result(ctx.cfg.policy.timeout_s)
    row["timings/sync_seconds"] = time.monotonic() - t3
    row["train/skipped"] = 0


def eval_records(problems: Sequence[Problem], completions: Sequence[Completion],
                 results: Sequence[ScoreResult | None], *, step: int = 0,
                 prompts: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One record per held-out problem (the lines of ``eval/step_<N>.jsonl``), in the
    rollout log's format (:mod:`trainer_client.tracking.records`). ``complete``: the
    response ended (EOS, not cut at ``max_new_tokens``) and the scorer found an answer."""
    return generation_records(step, problems, completions, results, prompts=prompts)


def write_eval_file(path: Path, records: Sequence[dict[str, Any]]) -> None:
    """Write ``records`` as JSONL, atomically (a reader never sees half a file)."""
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def evaluate(ctx: StepContext, row: dict[str, Any]) -> None:
    """Greedy accuracy on the eval set (``eval/*`` keys), scored by the service; the
    per-problem records go to ``<output_dir>/eval/step_<N>.jsonl``."""
    t4 = time.monotonic()
    if ctx.eval_set:
        prompts = [ctx.prompt(p) for p in ctx.eval_set]
        groups = ctx.workers.rollout.call("generate", prompts,
                                          ctx.greedy).result(ctx.cfg.rollout.timeout_s)
        results, _ = ctx.score(score_items(ctx.eval_set, groups, ctx.cfg.reward.extra))
        _, m = reward_metrics(results, prefix="eval")
        m["eval/accuracy"] = m.pop("eval/status/correct")
        m.pop("eval/mean", None)
        m.pop("eval/std", None)
        cm = completion_metrics([g[0] for g in groups], rollout_seconds=1.0)
        for k in ("mean_length", "truncated_fraction", "multi_answer_fraction"):
            m[f"eval/{k}"] = cm[f"completions/{k}"]
        records = eval_records(ctx.eval_set, [g[0] for g in groups], results,
                               step=row["step"], prompts=prompts)
        complete = [r for r in records if r["complete"]]
        m["eval/complete_fraction"] = len(complete) / len(records)
        m["eval/complete_accuracy"] = (sum(r["correct"] for r in complete) / len(complete)
                                       if complete else float("nan"))
        m["eval/problems"] = len(records)
        row.update(m)
        write_eval_file(ctx.eval_dir / f"step_{row['step']}.jsonl", records)
    row["timings/eval_seconds"] = time.monotonic() - t4


def save_checkpoint(ctx: StepContext, step: int, total_steps: int, row: dict[str, Any]) -> None:
    """Every rank saves its shard under ``checkpoints/step_NNNNNN``; newest ``keep_last`` kept."""
    t5 = time.monotonic()
    ctx.workers.policy_call("save_checkpoint", str(ctx.ckpt_root), step,
                            {"total_steps": total_steps},
                            ctx.cfg.checkpoint.keep_last).result(ctx.cfg.policy.timeout_s)
    row["timings/checkpoint_seconds"] = time.monotonic() - t5
