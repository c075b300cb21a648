"""``policy.share_prompt``: each distinct prompt of a micro-batch goes through the model once
and its group's rows attend to its cached keys and values (``shared_prompt_logprobs``).

- The log-probabilities and entropies on completion positions, and the gradient of their
  masked sum, equal :func:`token_logprobs`' (fp32, both attention kernels), for groups of
  different prompt lengths, completions of 1 to 9 tokens, a temperature and blocked tokens.
- The model really sees each distinct prompt once (its embedding counts the tokens; the
  control: the plain path sees every row's prompt).
- A policy update with ``share_prompt`` equals the one without (loss and full gradient, and
  the weights after a step, bf16 mixed precision on FSDP2 as the CPU configs run it).
- ``gradient_checkpointing`` really recomputes (each layer runs twice per micro-batch, with
  the same gradient; transformers checkpoints only in training mode and the policy runs in
  eval mode, so before the fix it silently did nothing), and is refused with
  ``share_prompt`` (a checkpointed layer drops the prompt's cache).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from trainer_client.config import PolicySection
from trainer_client.model.batch import TrainBatch, make_train_batch
from trainer_client.model.logprobs import (
    prompt_groups,
    shared_prompt_logprobs,
    token_logprobs,
)
from trainer_client.model.policy import PolicyWorker
from trainer_client.model.rollout import Completion
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings
from trainer_client.workers import free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tiny(tiny64) -> str:
    return tiny64(11)


def _groups(prompt_lengths=(7, 4, 11), n: int = 4) -> TrainBatch:
    """Groups of ``n`` rows sharing a prompt, group after group, as a rollout packs them."""
    g = torch.Generator().manual_seed(3)
    comps = []
    for p_len in prompt_lengths:
        prompt = torch.randint(4, 90, (p_len,), generator=g).tolist()
        for i in range(n):
            comp = torch.randint(4, 90, (1 + (2 * i + p_len) % 9,), generator=g).tolist()
            comps.append(Completion(prompt_ids=prompt, completion_ids=comp, text="",
                                    finished=True))
    adv = torch.linspace(-1.5, 1.5, len(comps))
    return make_train_batch(comps, adv, torch.ones(len(comps), dtype=torch.bool), pad_id=0)


def test_prompt_groups_finds_each_distinct_prompt_once() -> None:
    b = _groups()
    firsts, index = prompt_groups(b.input_ids, b.prompt_lengths)
    assert firsts == [0, 4, 8] and index.tolist() == [0] * 4 + [1] * 4 + [2] * 4
    # the same tokens with a different prompt length are a different prompt
    lengths = b.prompt_lengths.clone()
    lengths[1] -= 1
    assert prompt_groups(b.input_ids, lengths)[0] == [0, 1, 4, 8]


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_shared_prompt_logprobs_equal_the_plain_forward(tiny, attn) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny, attn_implementation=attn)
    model.eval()
    b = _groups()
    blocked = torch.zeros(model.config.vocab_size, dtype=torch.bool)
    blocked[60:70] = True
    m = b.completion_mask[:, 1:]
    assert b.prompt_lengths is not None and bool((m.sum(1) >= 1).all())
    ref, ref_ent = token_logprobs(model, b.input_ids, b.attention_mask, temperature=0.7,
                                  blocked=blocked, with_entropy=True)
    (ref * m).sum().backward()
    ref_grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    got, ent = shared_prompt_logprobs(model, b.input_ids, b.attention_mask, b.prompt_lengths,
                                      temperature=0.7, blocked=blocked, with_entropy=True)
    assert got.shape == ref.shape and ent is not None and ref_ent is not None
    assert torch.allclose(got * m, ref * m, atol=1e-5)
    assert bool((got[m == 0] == 0).all())  # nothing but completion positions is formed
    assert torch.allclose(ent * m, ref_ent * m, atol=1e-5)
    (got * m).sum().backward()
    for k, p in model.named_parameters():
        assert torch.allclose(p.grad, ref_grads[k], atol=1e-5, rtol=1e-4), k


def test_each_distinct_prompt_goes_through_the_model_once(tiny) -> None:
    model = AutoModelForCausalLM.from_pretrained(tiny)
    seen: list[int] = []
    model.get_input_embeddings().register_forward_hook(
        lambda mod, args, out: seen.append(int(args[0].numel())))
    b = _groups()
    assert b.prompt_lengths is not None
    with torch.no_grad():
        shared_prompt_logprobs(model, b.input_ids, b.attention_mask, b.prompt_lengths)
        shared = sum(seen)
        seen.clear()
        token_logprobs(model, b.input_ids, b.attention_mask)  # the control
    widest_prompt, longest = 11, int((b.lengths() - b.prompt_lengths).max())
    # 3 prompts left-padded to the widest, then the 12 completions right-padded to the
    # longest, against 12 whole rows
    assert shared == 3 * widest_prompt + 12 * longest
    assert seen == [b.input_ids.numel()] and shared < 0.6 * seen[0]


def _worker(tiny: str, share: bool, checkpointing: bool = False) -> PolicyWorker:
    s = PolicySettings(model_path=tiny, compute_dtype="bfloat16", micro_batch_size=4,
                       temperature=0.7, share_prompt=share, gradient_checkpointing=checkpointing,
                       optim=OptimSettings(lr=1e-3, grad_clip=1.0),
                       grpo=GRPOSettings(aggregation="token"))
    return PolicyWorker(s, rank=0, world_size=1, master_port=free_port())


def test_a_shared_prompt_update_equals_the_plain_one(tiny) -> None:
    plain, shared = _worker(tiny, False), _worker(tiny, True)
    try:
        b = _groups()
        loss_a, g_a = plain.gradients(b)
        loss_b, g_b = shared.gradients(b)
        assert g_a is not None and g_b is not None
        flat_a = torch.cat([g_a[k].flatten() for k in sorted(g_a)])
        flat_b = torch.cat([g_b[k].flatten() for k in sorted(g_b)])
        # bf16 compute: the two paths round differently, so within bf16's tolerance
        assert abs(loss_a - loss_b) <= 0.01 * abs(loss_a) + 1e-4, (loss_a, loss_b)
        cos = torch.nn.functional.cosine_similarity(flat_a, flat_b, dim=0)
        assert cos > 0.999, float(cos)
        assert abs(flat_b.norm() / flat_a.norm() - 1) < 0.01
        sd = plain.full_state_dict()
        before = None if sd is None else {k: v.clone() for k, v in sd.items()}
        ma, mb = plain.train_step(b), shared.train_step(b)
        assert ma["policy/tokens"] == mb["policy/tokens"] > 0
        assert abs(ma["losses/total"] - mb["losses/total"]) <= 0.01 * abs(ma["losses/total"])
        sa, sb = plain.full_state_dict(), shared.full_state_dict()
        assert before is not None and sa is not None and sb is not None
        # Adam's first step is ~lr x sign(gradient): an element whose gradient is ~0 may
        # step either way, so the updates are compared as vectors
        da = torch.cat([(sa[k] - before[k]).flatten() for k in sorted(sa)])
        db = torch.cat([(sb[k] - before[k]).flatten() for k in sorted(sa)])
        assert float(da.norm()) > 0
        assert torch.nn.functional.cosine_similarity(da, db, dim=0) > 0.99
    finally:
        shared.close()
        plain.close()


def test_gradient_checkpointing_recomputes_each_layer_with_the_same_gradient(tiny) -> None:
    plain, ckpt = _worker(tiny, False), _worker(tiny, False, checkpointing=True)
    try:
        calls = {"plain": 0, "ckpt": 0}
        for name, w in (("plain", plain), ("ckpt", ckpt)):
            layer = w.model.model.layers[0]
            # a pre-hook: the recompute stops once it has what the backward needs (torch's
            # early stop), so a layer's forward (post-)hook does not fire for it
            layer.register_forward_pre_hook(
                lambda *a, n=name: calls.__setitem__(n, calls[n] + 1))
        b = _groups()  # 12 rows: 3 micro-batches of 4
        _, g_plain = plain.gradients(b)
        _, g_ckpt = ckpt.gradients(b)
        assert calls == {"plain": 3, "ckpt": 6}  # forward, then again in the backward
        assert g_plain is not None and g_ckpt is not None
        for k in g_plain:
            assert torch.allclose(g_plain[k], g_ckpt[k], atol=1e-6), k
        assert not any(m.training for m in ckpt.model.model.layers[0].modules()
                       if m is not ckpt.model.model.layers[0])  # no dropout switched on
    finally:
        ckpt.close()
        plain.close()


def test_share_prompt_with_gradient_checkpointing_is_refused() -> None:
    with pytest.raises(ValueError, match="cannot be combined"):
        PolicySection(share_prompt=True, gradient_checkpointing=True)
    with pytest.raises(ValueError, match="cannot be combined"):
        PolicySettings(model_path="m", share_prompt=True, gradient_checkpointing=True)
