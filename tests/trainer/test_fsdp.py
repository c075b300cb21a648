"""FSDP2 (``fully_shard``) on CPU with gloo: world size 2, spawned processes.

Both ranks train one GRPO step on a fixed batch (each its half) and save a checkpoint with a
full (unsharded) state dict. The same step at world size 1 must give the same weights:
data-parallel sharding may not change the update. Also with ``share_prompt`` at world size 2
(FSDP2's default schedule, each layer run twice per micro-batch: the prompts, then the
completions) against the plain path at world size 1.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file

from trainer_client.model.batch import make_train_batch
from trainer_client.model.policy import GRPOSettings, OptimSettings, PolicySettings, PolicyWorker
from trainer_client.model.rollout import Completion
from trainer_client.model.tiny_model import TinyModelSettings, build_tiny_model

pytestmark = pytest.mark.timeout(240)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _batch():
    g = torch.Generator().manual_seed(0)
    comps = []
    prompts = [torch.randint(4, 90, (n,), generator=g).tolist() for n in (3, 5)]
    for i in range(8):  # 2 groups of 4 (a prompt each, of different lengths)
        prompt = prompts[i // 4]
        comp = [*torch.randint(4, 90, (1 + i % 2,), generator=g).tolist(), 2]
        comps.append(Completion(prompt_ids=prompt, completion_ids=comp, text="", finished=True))
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, 0.0, -1.0, -1.0])
    return make_train_batch(comps, adv, torch.ones(8, dtype=torch.bool), pad_id=0)


def _settings(model: str, share: bool = False) -> PolicySettings:
    # eps=1: Adam's first step is ~lr * g instead of ~lr * sign(g), so the comparison
    # below measures gradient agreement, not the sign of rounding noise
    return PolicySettings(model_path=model, micro_batch_size=2, num_threads=1, share_prompt=share,
                          optim=OptimSettings(lr=1e-2, grad_clip=0.0, eps=1.0),
                          grpo=GRPOSettings(kl_coef=0.1, aggregation="sequence"))


def _step(rank: int, world: int, port: int, model: str, out: str, share: bool = False) -> None:
    w = PolicyWorker(_settings(model, share), rank=rank, world_size=world, master_port=port)
    try:
        metrics = w.train_step(_batch())
        assert metrics["losses/kl"] >= 0.0
        w.save_checkpoint(out, 1, {"world_size": world}, keep_last=1)
        w.barrier()
    finally:
        w.close()


def _rank(rank: int, ports: tuple[int, int], model: str, out: str, share: bool) -> None:
    _step(rank, 2, ports[0], model, f"{out}/ws2", share)
    if rank == 0:  # then the same step at world size 1, in a fresh process group
        _step(0, 1, ports[1], model, f"{out}/ws1")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    return str(build_tiny_model(TinyModelSettings(), tmp_path_factory.mktemp("m") / "base"))


@pytest.mark.parametrize("share", [False, True], ids=["plain", "share_prompt"])
def test_fsdp2_world_size_2_matches_world_size_1(tiny, tmp_path, share):
    mp.start_processes(_rank, args=((_port(), _port()), tiny, str(tmp_path), share), nprocs=2,
                       start_method="spawn", join=True)
    base = load_file(str(Path(tiny) / "model.safetensors"))
    sd2 = load_file(str(tmp_path / "ws2" / "step_000001" / "model" / "model.safetensors"))
    sd1 = load_file(str(tmp_path / "ws1" / "step_000001" / "model" / "model.safetensors"))
    assert set(sd2) == set(sd1) == set(base)
    for k, v in base.items():
        assert sd2[k].shape == v.shape, k  # full, unsharded tensors
    assert any(not torch.equal(sd2[k], base[k]) for k in base)  # it trained
    for k in base:
        torch.testing.assert_close(sd2[k], sd1[k], rtol=1e-4, atol=1e-5, msg=k)
    assert (tmp_path / "ws2" / "step_000001" / "optimizer.pt").stat().st_size > 0
