"""GRPO core against hand-computed values."""

import math

import pytest
import torch

from trainer_client.model.grpo import (
    aggregate,
    entropy_from_logits,
    group_advantages,
    grpo_loss,
    kl_k3,
    policy_loss,
    rewards_to_tensor,
)
from trainer_client.model.rollout import Completion
from trainer_client.step import keep_signal_groups

S3 = math.sqrt(1 / 3)  # unbiased std of {1, 0, 1, 0} and of {1, 0, 0}


def test_advantages_hand_computed():
    r = rewards_to_tensor([1, 0, 1, 0,  1, None, 0, 0,  1, None, None, None,  1, 1, 1, 1])
    (adv, valid), m = group_advantages(r, 4, eps=0.0)
    expected = [
        0.5 / S3, -0.5 / S3, 0.5 / S3, -0.5 / S3,
        (2 / 3) / S3, 0.0, (-1 / 3) / S3, (-1 / 3) / S3,
        0.0, 0.0, 0.0, 0.0,       # one available reward: no spread, no signal
        0.0, 0.0, 0.0, 0.0,       # all equal: std 0 -> 0 (eps=0 gives 0/0, must not be NaN)
    ]
    assert torch.allclose(adv, torch.tensor(expected), atol=1e-6), adv
    assert valid.tolist() == [True] * 5 + [False] + [True] * 3 + [False] * 3 + [True] * 4
    assert not torch.isnan(adv).any()
    assert m["rewards/unavailable_fraction"] == pytest.approx(4 / 16)
    assert m["rewards/frac_groups_with_signal"] == pytest.approx(2 / 4)


def test_equal_non_dyadic_rewards_carry_no_signal():
    """Eight rewards of 0.1 (a format score): their float32 mean is not exactly 0.1, so the
    std is ~1e-8, not 0. The group must still count as no spread (advantages exactly 0, no
    signal), not as signal with noise advantages ~7e-5; the control beside it, one correct
    answer among seven 0.1s, is signal."""
    r = rewards_to_tensor([0.1] * 8 + [0.1] * 7 + [1.0])
    v = r.view(2, 8)[0]
    std = ((v - v.mean()) ** 2).sum().div(7).sqrt()
    assert float(std) > 0  # control: the old rule (std > 0) took this group as signal
    (adv, valid), m = group_advantages(r, 8)
    assert adv[:8].tolist() == [0.0] * 8 and bool(valid.all())
    assert m["rewards/frac_groups_with_signal"] == pytest.approx(1 / 2)
    assert float(adv[15]) > 2 and float(adv[8]) < 0  # the real spread is untouched
    (adv_u, _), _ = group_advantages(r, 8, scale=False)  # centred only: also exactly 0
    assert adv_u[:8].tolist() == [0.0] * 8
    # and DAPO's dynamic sampling then picks the group with the real spread
    comps = [Completion([1], [k], str(k), True) for k in range(16)]
    row: dict = {}
    kept, a, _ = keep_signal_groups(comps, adv, valid, group_size=8, groups_wanted=1,
                                    world_size=1, row=row)
    assert [c.text for c in kept] == [str(k) for k in range(8, 16)] and bool(a.abs().sum() > 0)
    assert row["train/groups_with_signal"] == 1


def test_unavailable_is_not_counted_as_zero():
    # If None were 0 the group {1, None} would have mean 0.5 and give the 1 a positive
    # advantage; left out, the group has a single reward and no signal.
    (adv, _), _ = group_advantages(rewards_to_tensor([1.0, None]), 2)
    assert adv.tolist() == [0.0, 0.0]


def test_advantages_unscaled_and_eps():
    r = torch.tensor([3.0, 1.0])
    (adv, _), _ = group_advantages(r, 2, scale=False)
    assert adv.tolist() == [1.0, -1.0]
    (adv, _), _ = group_advantages(r, 2, eps=1.0)  # std = sqrt(2)
    assert adv[0].item() == pytest.approx(1 / (math.sqrt(2) + 1))


def test_advantages_bad_shape():
    with pytest.raises(ValueError):
        group_advantages(torch.zeros(5), 2)


def test_aggregation_token_vs_sequence():
    v = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0], [9.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1, 1], [1, 0, 0], [0, 0, 0]])
    assert aggregate(v, mask, "token").item() == pytest.approx((6 + 4) / 4)
    assert aggregate(v, mask, "sequence").item() == pytest.approx((2 + 4) / 2)  # empty row ignored
    with pytest.raises(ValueError):
        aggregate(v, mask, "bogus")  # type: ignore[arg-type]


def test_kl_k3_hand_computed():
    lp = torch.log(torch.tensor([[0.5, 0.3]]))
    ref = torch.log(torch.tensor([[0.25, 0.3]]))
    k3 = kl_k3(lp, ref)
    assert k3[0, 0].item() == pytest.approx(0.5 - math.log(0.5) - 1)  # 0.19315
    assert k3[0, 1].item() == pytest.approx(0.0)
    assert (kl_k3(torch.randn(4, 5), torch.randn(4, 5)) >= 0).all()


def test_policy_loss_ratio_one_is_minus_advantage():
    lp = torch.zeros(2, 3)
    adv = torch.tensor([1.0, -2.0])
    mask = torch.ones(2, 3)
    loss, m = policy_loss(lp, lp, adv, mask, aggregation="token")
    assert loss.item() == pytest.approx(-(1 - 2) / 2)
    assert m["losses/clip_fraction"] == 0.0
    assert m["losses/ratio_mean"] == pytest.approx(1.0)


def test_policy_loss_clipping_hand_computed():
    old = torch.log(torch.tensor([[0.5], [0.5]]))
    new = torch.log(torch.tensor([[0.8], [0.8]])).requires_grad_()  # ratio 1.6
    adv = torch.tensor([1.0, -1.0])
    loss, m = policy_loss(new, old, adv, torch.ones(2, 1), clip_eps_low=0.2, clip_eps_high=0.2)
    # A=+1: min(1.6, 1.2) = 1.2 (clipped) -> -1.2 ; A=-1: min(-1.6, -1.2) = -1.6 -> +1.6
    assert loss.item() == pytest.approx((-1.2 + 1.6) / 2)
    assert m["losses/clip_fraction"] == pytest.approx(0.5)
    loss.backward()
    # the clipped token has zero gradient; the other has d(1.6 * exp(lp-old))/dlp / 2 = 0.8
    assert new.grad[0, 0].item() == pytest.approx(0.0)
    assert new.grad[1, 0].item() == pytest.approx(0.8)


def test_policy_loss_clip_higher():
    old = torch.log(torch.tensor([[0.5]]))
    new = torch.log(torch.tensor([[0.7]]))  # ratio 1.4
    loss, _ = policy_loss(new, old, torch.tensor([1.0]), torch.ones(1, 1),
                          clip_eps_low=0.2, clip_eps_high=0.28)
    assert loss.item() == pytest.approx(-1.28)


def test_grpo_loss_combines_kl():
    lp = torch.log(torch.tensor([[0.5, 0.5]]))
    ref = torch.log(torch.tensor([[0.25, 0.5]]))
    mask = torch.tensor([[1.0, 1.0]])
    adv = torch.tensor([2.0])
    loss, m = grpo_loss(lp, lp, ref, adv, mask, kl_coef=0.1, aggregation="sequence")
    k3 = (0.5 - math.log(0.5) - 1) / 2
    assert m["losses/kl"] == pytest.approx(k3)
    assert loss.item() == pytest.approx(-2.0 + 0.1 * k3)
    with pytest.raises(ValueError):
        grpo_loss(lp, lp, None, adv, mask, kl_coef=0.1)
    _, m0 = grpo_loss(lp, lp, None, adv, mask, kl_coef=0.0)
    assert m0["losses/kl"] == 0.0


def test_entropy_uniform():
    logits = torch.zeros(2, 3, 4)
    mask = torch.tensor([[1.0, 1, 0], [1, 0, 0]])
    value, m = entropy_from_logits(logits, mask)
    assert value.item() == pytest.approx(math.log(4))
    assert m["policy/entropy"] == pytest.approx(math.log(4))


def test_tis_weights_truncate_and_ignore_missing_rollout_logprobs():
    from trainer_client.model.grpo import tis_weights

    old = torch.log(torch.tensor([[0.5, 0.5, 0.9, 0.2]]))
    roll = torch.log(torch.tensor([[0.5, 0.1, 0.3, 0.4]]))
    roll[0, 3] = float("nan")  # the engine gave none: weight 1
    w = tis_weights(old.requires_grad_(), roll, cap=2.0)
    assert not w.requires_grad
    assert torch.allclose(w, torch.tensor([[1.0, 2.0, 2.0, 1.0]]))  # 5 and 3 capped at 2
    assert torch.allclose(tis_weights(old, torch.log(torch.tensor([[1.0, 1.0, 1.0, 0.4]])),
                                      cap=2.0), torch.tensor([[0.5, 0.5, 0.9, 0.5]]))


def test_tis_corrects_the_bias_of_samples_from_a_mismatched_engine():
    """Tokens sampled from the engine's q, a reward f: the plain mean estimates E_q[f], not
    the policy's E_p[f] (control: off by > 0.1); weighted by min(p/q, C) it is within 0.01."""
    from trainer_client.model.grpo import tis_weights

    p = torch.tensor([0.4, 0.3, 0.2, 0.1])  # the policy (trainer)
    q = torch.tensor([0.1, 0.2, 0.3, 0.4])  # the rollout engine
    f = torch.tensor([1.0, 0.5, 0.0, -1.0])
    g = torch.Generator().manual_seed(0)
    tok = torch.multinomial(q, 200_000, replacement=True, generator=g)
    truth = float((p * f).sum())
    plain = float(f[tok].mean())
    w = tis_weights(torch.log(p)[tok], torch.log(q)[tok], cap=10.0)
    corrected = float((w * f[tok]).mean())
    assert abs(plain - truth) > 0.1
    assert abs(corrected - truth) < 0.01, (corrected, truth)


def test_mismatch_metrics_from_sums():
    from trainer_client.model.grpo import mismatch_metrics, rollout_mismatch_sums

    pol = torch.log(torch.tensor([[0.5, 0.2, 0.9], [0.3, 0.3, 0.3]]))
    roll = torch.log(torch.tensor([[0.4, 0.2, 0.9], [0.3, 0.6, 0.3]]))
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    sums, mx = rollout_mismatch_sums(pol, roll, mask)
    m = mismatch_metrics(sums, mx)
    assert m["rollout/tokens_compared"] == 5
    assert m["rollout/probs_diff_mean"] == pytest.approx((0.1 + 0 + 0 + 0 + 0.3) / 5)
    assert m["rollout/probs_diff_max"] == pytest.approx(0.3)
    x, y = torch.tensor([0.5, 0.2, 0.9, 0.3, 0.3]), torch.tensor([0.4, 0.2, 0.9, 0.3, 0.6])
    assert m["rollout/probs_pearson"] == pytest.approx(float(torch.corrcoef(
        torch.stack([x, y]))[0, 1]), abs=1e-6)
    # two halves summed equal the whole (micro-batches, ranks)
    s1, m1 = rollout_mismatch_sums(pol[:1], roll[:1], mask[:1])
    s2, m2 = rollout_mismatch_sums(pol[1:], roll[1:], mask[1:])
    assert mismatch_metrics([a + b for a, b in zip(s1, s2, strict=True)], max(m1, m2)) \
        == pytest.approx(m)
    assert mismatch_metrics(*rollout_mismatch_sums(pol, roll, torch.zeros_like(mask))) == {}
