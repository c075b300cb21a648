"""GRPO core: advantages and losses as pure tensor functions.

Every function here is pure (no I/O, no module state) and returns ``(value, metrics)``
where ``metrics`` is a flat ``dict[str, float]`` with namespaced keys (``losses/kl``).

Notation (shapes in comments):

- ``B``: number of sequences in a batch (``num_prompts * group_size``)
- ``T``: number of completion tokens (padded); ``mask`` is 1.0 on real completion tokens
- ``G``: group size, the number of samples per prompt

Where we depart from the GRPO paper (Shao et al., 2024), and why:

- Rewards that could not be computed (``None`` in TRL's ``list[float | None]`` contract,
  ``NaN`` in tensors here) are *left out* of the group mean and std and get advantage 0;
  their sequences are masked out of the loss. Counting them as 0 would teach the policy that
  whatever it wrote while the reward service was down was wrong.
- A group with fewer than two available rewards has no defined spread: all its advantages
  are 0 (no learning signal, no crash).
- Two loss aggregations are offered: ``"sequence"`` (the paper: mean over each sequence's
  tokens, then over sequences) and ``"token"`` (DAPO: mean over all tokens of the batch,
  which does not down-weight long responses). Both take an explicit ``denominator`` so that
  a mini-batch split into micro-batches and ranks sums to exactly the unsplit loss
  (:func:`aggregation_weight` of the whole mini-batch, summed over ranks).
- Completions cut at ``max_new_tokens`` are kept, masked (DAPO's overlong filtering) or
  given reward 0, as :func:`apply_truncation` is told.
"""

from __future__ import annotations

import torch

from trainer_client.settings import Aggregation, Truncated

__all__ = [
    "Aggregation",
    "Truncated",
    "aggregate",
    "aggregation_weight",
    "apply_truncation",
    "entropy_from_logits",
    "group_advantages",
    "grpo_loss",
    "kl_k3",
    "mismatch_metrics",
    "policy_loss",
    "rewards_to_tensor",
    "rollout_mismatch_sums",
    "tis_weights",
    "token_entropy",
]


def rewards_to_tensor(rewards: list[float | None]) -> torch.Tensor:
    """TRL-style rewards to a float tensor ``[B]`` with ``NaN`` where a reward is ``None``."""
    return torch.tensor([float("nan") if r is None else float(r) for r in rewards],
                        dtype=torch.float32)


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    *,
    scale: bool = True,
    eps: float = 1e-4,
) -> tuple[tuple[torch.Tensor, torch.Tensor], dict[str, float]]:
    """Group-normalised advantages ``(r - mean_group) / (std_group + eps)``.

    Args:
        rewards: ``[B]`` float, ``B = num_groups * group_size``, consecutive items form a
            group; ``NaN`` marks an unavailable reward.
        group_size: ``G``.
        scale: divide by the group std (GRPO); ``False`` only centres (Dr. GRPO).
        eps: added to the std.

    Returns:
        ``((advantages [B], valid [B] bool), metrics)``. The std is the unbiased sample std
        over the available rewards of the group (as ``torch.std`` in TRL). Unavailable
        items, and every item of a group with < 2 available rewards or with zero spread,
        get advantage 0;
        ``valid`` is False only for unavailable items.
    """
    if rewards.ndim != 1 or rewards.numel() % group_size != 0:
        raise ValueError(f"rewards must be [num_groups*{group_size}], got {tuple(rewards.shape)}")
    r = rewards.view(-1, group_size)  # [num_groups, G]
    valid = ~torch.isnan(r)  # [num_groups, G]
    n = valid.sum(dim=1, keepdim=True)  # [num_groups, 1]
    r0 = torch.where(valid, r, torch.zeros_like(r))
    mean = r0.sum(dim=1, keepdim=True) / n.clamp(min=1)  # [num_groups, 1]
    sq = torch.where(valid, (r - mean) ** 2, torch.zeros_like(r))
    std = (sq.sum(dim=1, keepdim=True) / (n - 1).clamp(min=1)).sqrt()  # [num_groups, 1]
    adv = r - mean
    if scale:
        adv = adv / (std + eps)
    # A group whose available rewards are all equal carries no signal: 0, never 0/0 = NaN.
    # "All equal" is exact (max == min), not ``std > 0``: eight rewards of 0.1 have a float32
    # mean that is not exactly 0.1, so their std is ~1e-8, not 0, and would pass as signal.
    inf = torch.full_like(r, float("inf"))
    spread = (torch.where(valid, r, -inf).amax(dim=1, keepdim=True)
              > torch.where(valid, r, inf).amin(dim=1, keepdim=True))  # [num_groups, 1]
    usable = valid & (n >= 2) & spread
    adv = torch.where(usable, adv, torch.zeros_like(adv))  # [num_groups, G]

    num_groups = r.shape[0]
    has_signal = (n >= 2).squeeze(1) & spread.squeeze(1)
    metrics = {
        "advantages/abs_mean": float(adv[usable].abs().mean()) if usable.any() else 0.0,
        "rewards/group_std_mean": float(std.squeeze(1)[n.squeeze(1) >= 2].mean())
        if bool((n >= 2).any()) else 0.0,
        "rewards/frac_groups_with_signal": float(has_signal.float().mean()) if num_groups else 0.0,
        "rewards/unavailable_fraction": float((~valid).float().mean()),
    }
    return (adv.reshape(-1), valid.reshape(-1)), metrics


def apply_truncation(rewards: torch.Tensor, finished: torch.Tensor,
                     mode: Truncated) -> tuple[torch.Tensor, dict[str, float]]:
    """Rewards ``[B]`` (``NaN``: unavailable) after the treatment of truncated completions.

    ``finished`` ``[B]`` bool is False for a completion cut at ``max_new_tokens``.
    ``"keep"``: unchanged (a cut response is paid for whatever number it last wrote).
    ``"mask"``: ``NaN``, so it is left out of its group's statistics and out of the loss,
    like an unavailable reward (DAPO's overlong filtering). ``"zero"``: reward 0 (an
    unavailable one stays ``NaN``).
    """
    cut = ~finished.bool()
    if mode == "keep":
        out = rewards.clone()
    elif mode == "mask":
        out = torch.where(cut, torch.full_like(rewards, float("nan")), rewards)
    elif mode == "zero":
        # an unavailable reward stays unavailable: an outage is not a wrong answer
        out = torch.where(cut & ~torch.isnan(rewards), torch.zeros_like(rewards), rewards)
    else:
        raise ValueError(f"unknown truncated treatment {mode!r}")
    paid = cut & ~torch.isnan(rewards) & (rewards > 0)
    return out, {"rewards/truncated_paid_fraction": float(paid.float().mean())}


def aggregation_weight(mask: torch.Tensor, mode: Aggregation) -> torch.Tensor:
    """What :func:`aggregate` divides by: the token count (``"token"``) or the number of
    sequences with at least one token (``"sequence"``) of ``mask [B, T]``."""
    if mode == "token":
        return mask.sum()
    if mode == "sequence":
        return (mask.sum(dim=1) > 0).sum()
    raise ValueError(f"unknown aggregation {mode!r}")


def aggregate(values: torch.Tensor, mask: torch.Tensor, mode: Aggregation, *,
              denominator: float | torch.Tensor | None = None) -> torch.Tensor:
    """Reduce per-token ``values [B, T]`` under ``mask [B, T]`` to a scalar.

    ``"token"``: ``sum(values * mask) / sum(mask)`` over the whole batch.
    ``"sequence"``: per sequence ``sum_t(values * mask) / sum_t(mask)``, then the mean over
    sequences that have at least one token.
    ``denominator``: divide by this instead of this batch's own :func:`aggregation_weight`
    (that of the whole mini-batch, when this is one micro-batch of it); the parts then sum
    to the loss of the whole.
    """
    mask = mask.to(values.dtype)
    if mode == "token":
        num = (values * mask).sum()
    elif mode == "sequence":
        lengths = mask.sum(dim=1)  # [B]
        num = ((values * mask).sum(dim=1) / lengths.clamp(min=1.0)).sum()  # empty rows: 0
    else:
        raise ValueError(f"unknown aggregation {mode!r}")
    if denominator is None:
        denominator = aggregation_weight(mask, mode)
    return num / torch.as_tensor(denominator, dtype=values.dtype).clamp(min=1.0)


def kl_k3(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi || pi_ref) (Schulman, "Approximating KL divergence").

    ``k3 = exp(ref - lp) - (ref - lp) - 1``: unbiased, always >= 0. Shapes ``[B, T]``.
    The log-ratio is clamped to [-20, 20] so a wild token cannot overflow ``exp``.
    """
    log_ratio = (ref_logprobs - logprobs).clamp(-20.0, 20.0)  # [B, T]
    return torch.exp(log_ratio) - log_ratio - 1.0


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    aggregation: Aggregation = "sequence",
    denominator: float | torch.Tensor | None = None,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO-style clipped surrogate, to be minimised.

    Args:
        logprobs: ``[B, T]`` log pi_theta of the sampled tokens (with grad).
        old_logprobs: ``[B, T]`` log pi_old (the policy that sampled), no grad.
        advantages: ``[B]``, one per sequence, broadcast over its tokens.
        mask: ``[B, T]``, 1.0 on completion tokens that count.
        clip_eps_low, clip_eps_high: ratio clipped to ``[1 - low, 1 + high]``
            (equal values: PPO; a larger ``high``: DAPO's clip-higher).
        aggregation, denominator: see :func:`aggregate`.
        is_weights: ``[B, T]`` per-token importance weights, no grad (truncated importance
            sampling, :func:`tis_weights`); None: 1.

    Per token: ``-w * min(ratio * A, clip(ratio) * A)``.
    """
    ratio = torch.exp(logprobs - old_logprobs)  # [B, T]
    adv = advantages.unsqueeze(1)  # [B, 1]
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_eps_low, 1.0 + clip_eps_high) * adv
    per_token = -torch.minimum(unclipped, clipped)  # [B, T]
    if is_weights is not None:
        per_token = per_token * is_weights.detach()
    loss = aggregate(per_token, mask, aggregation, denominator=denominator)
    with torch.no_grad():
        m = mask.to(ratio.dtype)
        denom = m.sum().clamp(min=1.0)
        is_clipped = (clipped < unclipped).to(ratio.dtype)  # where the min picked the clip
        metrics = {
            "losses/policy": float(loss.detach()),
            "losses/clip_fraction": float((is_clipped * m).sum() / denom),
            "losses/ratio_mean": float((ratio * m).sum() / denom),
        }
    return loss, metrics


def grpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    kl_coef: float = 0.0,
    clip_eps_low: float = 0.2,
    clip_eps_high: float = 0.2,
    aggregation: Aggregation = "sequence",
    denominator: float | torch.Tensor | None = None,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped policy loss plus ``kl_coef * k3`` KL to the reference, same aggregation.

    ``ref_logprobs`` may be None only when ``kl_coef == 0`` (then ``losses/kl`` is
    reported as 0 and nothing is computed). Shapes as in :func:`policy_loss`.
    """
    pg, metrics = policy_loss(
        logprobs, old_logprobs, advantages, mask,
        clip_eps_low=clip_eps_low, clip_eps_high=clip_eps_high, aggregation=aggregation,
        denominator=denominator, is_weights=is_weights,
    )
    if ref_logprobs is None:
        if kl_coef != 0.0:
            raise ValueError("kl_coef > 0 needs ref_logprobs")
        kl = torch.zeros((), dtype=pg.dtype)
    else:
        kl = aggregate(kl_k3(logprobs, ref_logprobs), mask, aggregation,
                       denominator=denominator)
    loss = pg + kl_coef * kl
    metrics["losses/kl"] = float(kl.detach())
    metrics["losses/total"] = float(loss.detach())
    return loss, metrics


def tis_weights(old_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor,
                cap: float) -> torch.Tensor:
    """Token-level truncated importance weights ``min(pi_old / pi_rollout, cap)`` ``[B, T]``.

    ``old_logprobs`` are the trainer's log-probabilities of the sampled tokens before the
    update, ``rollout_logprobs`` the rollout engine's (NaN where it gave none: weight 1).
    The policy gradient is an expectation under the trainer's policy while the samples came
    from the engine's; the weight corrects that, truncated at ``cap`` so one token the engine
    found unlikely cannot dominate (Yao et al., "Your efficient RL framework secretly brings
    you off-policy RL training", 2025; verl ``algorithm.rollout_correction``).
    """
    log_w = (old_logprobs - rollout_logprobs).clamp(max=20.0)
    w = torch.exp(log_w).clamp(max=cap)
    return torch.where(torch.isnan(w), torch.ones_like(w), w).detach()


#: the order of :func:`rollout_mismatch_sums`' values
MISMATCH_SUMS = ("n", "diff", "p", "q", "pq", "pp", "qq")


def rollout_mismatch_sums(policy_logprobs: torch.Tensor, rollout_logprobs: torch.Tensor,
                          mask: torch.Tensor) -> tuple[list[float], float]:
    """Sums over the masked tokens that have both log-probabilities, of ``p`` (policy
    probability), ``q`` (rollout probability), ``|p - q|`` and the products a Pearson
    correlation needs (order: :data:`MISMATCH_SUMS`), and the max ``|p - q|``. Sums add
    over micro-batches and ranks; :func:`mismatch_metrics` turns them into metrics."""
    ok = mask.bool() & ~torch.isnan(rollout_logprobs) & ~torch.isnan(policy_logprobs)
    p = policy_logprobs.double().exp()[ok]
    q = rollout_logprobs.double().exp()[ok]
    d = (p - q).abs()
    sums = [float(ok.sum()), float(d.sum()), float(p.sum()), float(q.sum()),
            float((p * q).sum()), float((p * p).sum()), float((q * q).sum())]
    return sums, float(d.max()) if d.numel() else 0.0


def mismatch_metrics(sums: list[float], max_diff: float) -> dict[str, float]:
    """verl's ``rollout_probs_diff_{mean,max}`` and the Pearson correlation of the two
    probabilities, from :func:`rollout_mismatch_sums` (summed)."""
    n, d, p, q, pq, pp, qq = sums
    if n == 0:
        return {}
    cov = pq / n - (p / n) * (q / n)
    var_p, var_q = pp / n - (p / n) ** 2, qq / n - (q / n) ** 2
    corr = cov / (var_p * var_q) ** 0.5 if var_p > 0 and var_q > 0 else 1.0
    return {"rollout/probs_diff_mean": d / n, "rollout/probs_diff_max": max_diff,
            "rollout/probs_pearson": corr, "rollout/tokens_compared": n}


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Per-token entropy ``[B, T]`` of ``logits [B, T, V]``, in fp32."""
    logp = torch.log_softmax(logits.float(), dim=-1)  # [B, T, V]
    return -(logp.exp() * logp).sum(dim=-1)


def entropy_from_logits(
    logits: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """Mean per-token entropy of ``logits [B, T, V]`` over ``mask [B, T]`` (token mean)."""
    value = aggregate(token_entropy(logits), mask, "token")
    return value, {"policy/entropy": float(value.detach())}
