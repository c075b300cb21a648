"""pi_old from the training forward (``grpo.old_logprobs: auto``) against a separate
no-grad scoring forward (``forward``): with one optimizer step per rollout the update is
the same (loss, gradient, weights after the step, the TIS weights and mismatch metrics),
and the separate forward is really skipped. With more than one step per rollout ``auto``
keeps the separate forward (the policy moves between the steps)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainer_client.model.batch import TrainBatch, make_train_batch
from trainer_client.model.policy import PolicyWorker
from trainer_client.model.rollout import Completion
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings
from trainer_client.workers import free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tiny(tiny64) -> str:
    return tiny64(7)


def _batch(n: int = 8) -> TrainBatch:
    """Rows of different lengths (padding to cut), an invalid row, and engine log-probs
    that differ from the policy's (TIS weights != 1, some at the cap)."""
    g = torch.Generator().manual_seed(3)
    comps = []
    for i in range(n):
        prompt = torch.randint(4, 90, (5 + i % 3,), generator=g).tolist()
        comp = [*torch.randint(4, 90, (2 + 5 * (i % 4),), generator=g).tolist(), 2]
        lps = (-torch.rand(len(comp), generator=g) * 6).tolist()
        comps.append(Completion(prompt_ids=prompt, completion_ids=comp, text="", finished=True,
                                logprobs=lps))
    valid = torch.ones(n, dtype=torch.bool)
    valid[1] = False
    return make_train_batch(comps, torch.linspace(-1.5, 1.5, n), valid, pad_id=0)


def _worker(tiny: str, old: str, *, compute: str = "float32", epochs: int = 1) -> PolicyWorker:
    s = PolicySettings(model_path=tiny, compute_dtype=compute, micro_batch_size=3,
                       temperature=0.7, optim=OptimSettings(lr=1e-2, grad_clip=1.0),
                       grpo=GRPOSettings(aggregation="token", tis_cap=2.0, ppo_epochs=epochs,
                                         clip_eps_low=0.2, clip_eps_high=0.28,
                                         old_logprobs=old))  # type: ignore[arg-type]
    return PolicyWorker(s, rank=0, world_size=1, master_port=free_port())


def _count_scoring(w: PolicyWorker) -> list[int]:
    calls = [0]
    score = w._score

    def counted(model, b):
        calls[0] += 1
        return score(model, b)

    w._score = counted  # type: ignore[method-assign]
    return calls


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


# fp32: the two paths are the same arithmetic (rounding only). bf16: the separate no-grad
# forward itself differs from the training forward by bf16 rounding (ratio != 1 by ~1e-3
# per token), which the shortcut removes; the tolerance is that noise (measured here: grad
# 2e-3 relative). The update is compared looser: AdamW's first step is ~lr * sign(grad), so
# a rounding-size difference in a near-zero gradient element moves that element by 2 lr
# (measured: fp32 8e-6, bf16 3.5e-2 relative).
@pytest.mark.parametrize("compute,tol,update_tol", [("float32", 1e-5, 1e-4),
                                                    ("bfloat16", 5e-3, 0.1)])
def test_one_update_per_rollout_is_the_same_without_the_scoring_forward(tiny, compute, tol,
                                                                         update_tol):
    auto, fwd = _worker(tiny, "auto", compute=compute), _worker(tiny, "forward", compute=compute)
    try:
        b = _batch()
        n_auto, n_fwd = _count_scoring(auto), _count_scoring(fwd)
        loss_a, grad_a = auto.gradients(b)
        loss_f, grad_f = fwd.gradients(b)
        assert (n_auto[0], n_fwd[0]) == (0, 1)  # the shortcut really ran, the control did not
        assert grad_a is not None and grad_f is not None
        assert loss_a == pytest.approx(loss_f, rel=tol, abs=1e-6)
        flat_a = torch.cat([grad_a[k].flatten() for k in sorted(grad_f)])
        flat_f = torch.cat([grad_f[k].flatten() for k in sorted(grad_f)])
        assert flat_f.norm() > 0
        assert _rel(flat_a, flat_f) < tol
        m_a, m_f = auto.train_step(b), fwd.train_step(b)
        assert (n_auto[0], n_fwd[0]) == (0, 2)
        for k in ("losses/total", "losses/policy", "policy/grad_norm", "losses/ratio_mean",
                  "losses/clip_fraction", "rollout/probs_diff_mean", "rollout/probs_diff_max",
                  "rollout/probs_pearson", "rollout/tokens_compared",
                  "rollout/tis_weight_mean", "rollout/tis_capped_fraction", "policy/tokens"):
            assert m_a[k] == pytest.approx(m_f[k], rel=tol, abs=tol), k
        assert 0 < m_a["rollout/tis_capped_fraction"] < 1  # the weights mattered
        assert m_a["losses/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
        # the weights after the step: the two updates (from the same start) as vectors
        fresh = _worker(tiny, "forward", compute=compute)
        try:
            sd0, sd_a, sd_f = fresh.full_state_dict(), auto.full_state_dict(), \
                fwd.full_state_dict()
        finally:
            fresh.close()
        assert sd0 is not None and sd_a is not None and sd_f is not None
        upd_a = torch.cat([(sd_a[k] - sd0[k]).flatten() for k in sorted(sd0)])
        upd_f = torch.cat([(sd_f[k] - sd0[k]).flatten() for k in sorted(sd0)])
        assert upd_f.norm() > 0  # control: the step moved the weights
        assert _rel(upd_a, upd_f) < update_tol
    finally:
        auto.close()
        fwd.close()


def test_two_updates_per_rollout_keep_the_scoring_forward(tiny):
    w = _worker(tiny, "auto", epochs=2)
    try:
        calls = _count_scoring(w)
        m = w.train_step(_batch())
        assert calls[0] == 1
        # second epoch: the policy moved, the ratio is no longer 1 everywhere
        assert m["losses/ratio_mean"] != pytest.approx(1.0, abs=1e-9)
    finally:
        w.close()


def test_a_bad_old_logprobs_setting_is_refused(tiny):
    w = _worker(tiny, "auto")
    try:
        w.settings = dataclasses.replace(
            w.settings, grpo=dataclasses.replace(w.settings.grpo, old_logprobs="nope"))
        with pytest.raises(ValueError, match="old_logprobs"):
            w.train_step(_batch())
    finally:
        w.close()
