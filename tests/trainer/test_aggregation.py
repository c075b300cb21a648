"""The loss and its gradient do not depend on how a mini-batch is split.

One batch of 8 sequences with unequal completion lengths, split into 1, 2 and 4
micro-batches, and over 1 and 2 FSDP2 ranks (gloo, spawned processes): the loss and every
parameter's gradient agree to float tolerance, for ``token`` and ``sequence`` aggregation.
A control shows that averaging per-micro-batch token means (what the trainer did before)
gives a different loss on this very batch, so the comparison can fail.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from trainer_client.model.batch import make_train_batch
from trainer_client.model.grpo import aggregate, aggregation_weight
from trainer_client.model.rollout import Completion
from trainer_client.model.tiny_model import TinyModelSettings, build_tiny_model
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings

pytestmark = pytest.mark.timeout(300)

MODES = ("token", "sequence")
MICRO = (8, 4, 2)  # micro_batch_size for 1, 2 and 4 micro-batches of the 8 sequences


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _batch():
    g = torch.Generator().manual_seed(1)
    comps = []
    lengths = [1, 9, 2, 12, 3, 1, 7, 4]  # unequal: micro-batch and rank token counts differ
    for i, n in enumerate(lengths):
        prompt = torch.randint(4, 90, (3 + i % 3,), generator=g).tolist()
        comp = [*torch.randint(4, 90, (n,), generator=g).tolist(), 2]
        comps.append(Completion(prompt_ids=prompt, completion_ids=comp, text="", finished=True))
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.3, -1.0, -0.7])  # sums to 0.6: loss != 0
    return make_train_batch(comps, adv, torch.ones(8, dtype=torch.bool), pad_id=0)


def _settings(model: str, mode: str, micro: int) -> PolicySettings:
    return PolicySettings(model_path=model, micro_batch_size=micro, num_threads=1,
                          optim=OptimSettings(lr=1e-2, grad_clip=0.0),
                          grpo=GRPOSettings(kl_coef=0.1, aggregation=mode))  # type: ignore[arg-type]


def _grads(rank: int, world: int, ports: list[int], model: str, out: str) -> None:
    from trainer_client.model.policy import PolicyWorker

    ports = list(ports)  # a fresh process group (and port) per worker
    for mode in MODES:
        for micro in MICRO if world == 1 else (2,):
            w = PolicyWorker(_settings(model, mode, micro), rank=rank, world_size=world,
                             master_port=ports.pop())
            try:
                loss, grads = w.gradients(_batch())
                if rank == 0:
                    torch.save({"loss": loss, "grads": grads},
                               f"{out}/ws{world}-{mode}-{micro}.pt")
                w.barrier()
            finally:
                w.close()


def _rank(rank: int, ports: tuple[list[int], list[int]], model: str, out: str) -> None:
    _grads(rank, 2, ports[0], model, out)
    if rank == 0:  # then world size 1, each in a fresh process group
        _grads(0, 1, ports[1], model, out)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_tiny_model(TinyModelSettings(), tmp_path_factory.mktemp("m") / "base"))


def test_old_per_micro_batch_mean_differs_on_this_batch():
    # control: the batch below must tell an exact token mean from a mean of means
    b = _batch()
    mask = b.completion_mask[:, 1:]
    values = torch.arange(mask.numel(), dtype=torch.float32).view_as(mask)
    exact = aggregate(values, mask, "token")
    halves = [aggregate(values[s], mask[s], "token") for s in (slice(0, 4), slice(4, 8))]
    assert not torch.isclose(exact, sum(halves) / 2, rtol=1e-3)
    # and the explicit denominator makes the parts sum to the whole
    denom = aggregation_weight(mask, "token")
    parts = [aggregate(values[s], mask[s], "token", denominator=denom)
             for s in (slice(0, 4), slice(4, 8))]
    torch.testing.assert_close(sum(parts), exact)
    for mode in MODES:
        d = aggregation_weight(mask, mode)
        quarters = [aggregate(values[i:i + 2], mask[i:i + 2], mode, denominator=d)
                    for i in range(0, 8, 2)]
        torch.testing.assert_close(sum(quarters), aggregate(values, mask, mode))


def test_loss_and_gradient_independent_of_micro_batches_and_ranks(tiny, tmp_path):
    ports = ([_port() for _ in MODES], [_port() for _ in range(len(MODES) * len(MICRO))])
    mp.start_processes(_rank, args=(ports, tiny, str(tmp_path)), nprocs=2,
                       start_method="spawn", join=True)
    for mode in MODES:
        ref = torch.load(tmp_path / f"ws1-{mode}-8.pt")
        assert ref["loss"] != 0.0
        assert any(g.abs().sum() > 0 for g in ref["grads"].values())
        for name in [f"ws1-{mode}-4", f"ws1-{mode}-2", f"ws2-{mode}-2"]:
            got = torch.load(Path(tmp_path) / f"{name}.pt")
            assert got["loss"] == pytest.approx(ref["loss"], rel=1e-5, abs=1e-7), name
            assert set(got["grads"]) == set(ref["grads"]), name
            for k, g in ref["grads"].items():
                torch.testing.assert_close(got["grads"][k], g, rtol=1e-4, atol=1e-7,
                                           msg=f"{name} {k}")
