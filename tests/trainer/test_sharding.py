"""World size 1 holds the gathered bf16 parameters across an update's micro-batches
(``trainer_client/model/sharding.py``, ``PolicySettings.hold_params``): the update must be
the one FSDP2's default schedule gives, micro-batch by micro-batch, step after step (a
stale bf16 copy after an optimizer step would change the second step), and the hold must
really happen (control: FSDP2 swaps a layer's registered parameter for its gathered bf16
tensor while unsharded; without the hold it is the fp32 shard again after each forward)."""

from __future__ import annotations

import pytest
import torch
from torch.distributed.tensor import DTensor

from tests.trainer.test_mixed_precision import _batch
from trainer_client.model.policy import PolicyWorker
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings
from trainer_client.workers import free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tiny(tiny64) -> str:
    return tiny64(7)


def _worker(tiny: str, hold: bool, old_logprobs: str = "auto") -> PolicyWorker:
    s = PolicySettings(model_path=tiny, compute_dtype="bfloat16", micro_batch_size=3,
                       hold_params=hold, temperature=0.7,
                       optim=OptimSettings(lr=1e-3, grad_clip=0.0),
                       grpo=GRPOSettings(aggregation="token", old_logprobs=old_logprobs))
    return PolicyWorker(s, rank=0, world_size=1, master_port=free_port())


def _weight(w: PolicyWorker) -> torch.Tensor:
    return w.model.model.layers[0].self_attn.q_proj.weight


@pytest.mark.parametrize("old_logprobs", ["auto", "forward"])
def test_held_parameters_give_the_default_schedules_updates(tiny, old_logprobs):
    held, default = _worker(tiny, True, old_logprobs), _worker(tiny, False, old_logprobs)
    try:
        b = _batch(8)  # 3 micro-batches of 3, 3, 2 rows
        loss_h, g_h = held.gradients(b)
        loss_d, g_d = default.gradients(b)
        assert g_h is not None and g_d is not None and set(g_h) == set(g_d)
        assert loss_h == pytest.approx(loss_d, rel=1e-6)
        for k in g_d:
            assert g_h[k].dtype == torch.float32
            torch.testing.assert_close(g_h[k], g_d[k], rtol=1e-5, atol=1e-7, msg=k)
        for step in range(3):  # each step starts from the weights the last one updated
            m_h, m_d = held.train_step(b), default.train_step(b)
            assert m_h["losses/total"] == pytest.approx(m_d["losses/total"], rel=1e-5,
                                                        abs=1e-7), step
        sd_h, sd_d = held.full_state_dict(), default.full_state_dict()
        assert sd_h is not None and sd_d is not None
        for k in sd_d:
            torch.testing.assert_close(sd_h[k], sd_d[k], rtol=1e-5, atol=1e-6, msg=k)
    finally:
        held.close()
        default.close()


def test_the_hold_keeps_the_gathered_bf16_parameters_until_the_last_backward(tiny):
    held, default = _worker(tiny, True), _worker(tiny, False)
    try:
        b = _batch(8)
        for w in (held, default):  # before any forward: the fp32 shard
            assert isinstance(_weight(w), DTensor) and _weight(w).dtype == torch.float32
        held._score(held.model, b)  # a no-grad forward, as pi_old's scoring
        default._score(default.model, b)
        p = _weight(held)
        assert not isinstance(p, DTensor) and p.dtype == torch.bfloat16  # held, gathered
        assert isinstance(_weight(default), DTensor)  # control: resharded after forward
        before = held.full_state_dict()  # while held: still the fp32 master weights
        assert before is not None and all(v.dtype == torch.float32 for v in before.values())
        sd0 = {k: v.clone() for k, v in before.items()}  # (at world size 1 they alias them)
        held.train_step(b)  # the last micro-batch's backward frees the held copy
        assert isinstance(_weight(held), DTensor) and _weight(held).dtype == torch.float32
        after = held.full_state_dict()
        assert after is not None
        assert any(not torch.equal(after[k], sd0[k]) for k in sd0)  # it trained
    finally:
        held.close()
        default.close()
