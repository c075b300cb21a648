"""The train/inference mismatch and truncated importance sampling of one train step, and the
sums and means over policy ranks they need (collectives: every rank calls them).

Kept apart from :mod:`trainer_client.model.policy`, which calls them with its world size and
device; the formulas themselves are :mod:`trainer_client.model.grpo`'s."""

from __future__ import annotations

import torch
import torch.distributed as dist

from trainer_client.model.batch import TrainBatch
from trainer_client.model.grpo import (
    MISMATCH_SUMS,
    mismatch_metrics,
    rollout_mismatch_sums,
    tis_weights,
)

__all__ = ["correction_local", "correction_metrics", "mean_over_ranks", "rollout_correction",
           "sum_over_ranks"]


def sum_over_ranks(values: list[float], world_size: int, device: torch.device) -> list[float]:
    """Collective: ``values`` summed element-wise over the ranks (float64)."""
    if world_size == 1:
        return values
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return [float(v) for v in t.cpu().tolist()]


def mean_over_ranks(metrics: dict[str, float], world_size: int,
                    device: torch.device | None) -> dict[str, float]:
    """Collective: each metric averaged over the ranks (``device`` None: reduce on the CPU)."""
    if world_size == 1:
        return metrics
    keys = sorted(metrics)
    t = torch.tensor([metrics[k] for k in keys], dtype=torch.float64)
    if device is not None:
        t = t.to(device)
    dist.all_reduce(t)
    return {k: float(v) / world_size for k, v in zip(keys, t.cpu().tolist(), strict=True)}


def correction_local(b: TrainBatch, old_lp: torch.Tensor, cap: float | None
                     ) -> tuple[torch.Tensor | None, list[float], float]:
    """This rank's part of the correction for rows ``b`` (``old_lp`` ``[b, L-1]`` on the
    CPU): TIS weights (with a ``cap``), the mismatch sums (:data:`MISMATCH_SUMS`, then the
    sum of weights and tokens at the cap) and the max difference. Sums add over
    micro-batches and ranks."""
    if b.rollout_logprobs is None:
        return None, [], 0.0
    mask = b.completion_mask[:, 1:]
    rollout_lp = b.rollout_logprobs[:, 1:]
    sums, max_diff = rollout_mismatch_sums(old_lp, rollout_lp, mask)
    weights: torch.Tensor | None = None
    extra = [0.0, 0.0]  # sum of weights, tokens at the cap
    if cap is not None:
        weights = tis_weights(old_lp, rollout_lp, cap)
        ok = mask.bool() & ~torch.isnan(rollout_lp)
        extra = [float(weights[ok].sum()), float((weights[ok] >= cap).sum())]
    return weights, sums + extra, max_diff


def correction_metrics(sums: list[float], max_diff: float, cap: float | None, world_size: int,
                       device: torch.device) -> dict[str, float]:
    """Collective: the mismatch (and TIS) metrics of the batch from every rank's sums."""
    total = sum_over_ranks(sums, world_size, device)
    if world_size > 1:
        t = torch.tensor([max_diff], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        max_diff = float(t.cpu())
    out = mismatch_metrics(total[: len(MISMATCH_SUMS)], max_diff)
    n = total[0]
    if cap is not None and n > 0:
        out["rollout/tis_weight_mean"] = total[-2] / n
        out["rollout/tis_capped_fraction"] = total[-1] / n
    return out


def rollout_correction(local: TrainBatch, old_lp: torch.Tensor, cap: float | None,
                       world_size: int, device: torch.device
                       ) -> tuple[torch.Tensor | None, dict[str, float]]:
    """Collective. The train/inference mismatch of this rank's rows ``local`` (the policy's
    probability of each sampled completion token before the update, ``old_lp``, against the
    rollout engine's; :func:`~trainer_client.model.grpo.mismatch_metrics` over all ranks)
    and, with a ``cap``, the truncated importance weights ``[B_local, L-1]``."""
    if local.rollout_logprobs is None:
        return None, {}
    weights, sums, max_diff = correction_local(local, old_lp, cap)
    return weights, correction_metrics(sums, max_diff, cap, world_size, device)
