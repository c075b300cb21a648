"""bf16 mixed precision and the sampled-token log-probabilities, against fp32 references.

- :func:`token_logprobs` (logits only from the first completion position, fp32 log-softmax
  in chunks with its own backward) equals a plain full-vocabulary fp32 ``log_softmax`` in
  value, entropy and gradient (blocked tokens get none).
- The policy with ``compute_dtype: bfloat16`` (FSDP2 ``MixedPrecisionPolicy``: bf16 compute,
  fp32 master weights, fp32 gradient reduction) gives the fp32 loss and gradient within a
  stated tolerance, keeps its weights and optimizer in fp32, and really computes in bf16
  (control: its gradient is not bit-identical to fp32's).
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

import trainer_client.model.logprobs as logprobs_mod
from trainer_client.model.batch import TrainBatch, make_train_batch
from trainer_client.model.logprobs import token_logprobs
from trainer_client.model.policy import PolicyWorker
from trainer_client.model.rollout import Completion
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings
from trainer_client.workers import free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def tiny(tiny64) -> str:
    return tiny64(5)


def _batch(n: int = 8):
    g = torch.Generator().manual_seed(1)
    comps = []
    for i in range(n):
        prompt = torch.randint(4, 90, (6 + i % 4,), generator=g).tolist()
        comp = [*torch.randint(4, 90, (5 + 3 * (i % 3),), generator=g).tolist(), 2]
        comps.append(Completion(prompt_ids=prompt, completion_ids=comp, text="", finished=True))
    adv = torch.linspace(-1.5, 1.5, n)
    return make_train_batch(comps, adv, torch.ones(n, dtype=torch.bool), pad_id=0)


def _reference_logprobs(model, ids, attn, temperature, blocked):
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1].float() / temperature
    logits = logits.masked_fill(blocked, -1e9)
    return torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def test_chunked_sampled_token_logprobs_equal_the_full_fp32_log_softmax(tiny, monkeypatch):
    monkeypatch.setattr(logprobs_mod, "LOGPROB_CHUNK", 7)  # many chunks, a ragged last one
    model = AutoModelForCausalLM.from_pretrained(tiny)
    model.eval()
    b = _batch()
    blocked = torch.zeros(model.config.vocab_size, dtype=torch.bool)
    blocked[60:70] = True
    first = logprobs_mod.first_completion_position(b.completion_mask)
    assert first == 5  # the shortest prompt has 6 tokens: position 5 predicts its first answer
    m = b.completion_mask[:, 1:]
    ref = _reference_logprobs(model, b.input_ids, b.attention_mask, 0.7, blocked)
    (ref * m).sum().backward()
    ref_grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    got, ent = token_logprobs(model, b.input_ids, b.attention_mask, temperature=0.7,
                              blocked=blocked, first=first, with_entropy=True)
    assert got.shape == ref.shape and ent is not None
    assert torch.allclose(got * m, ref * m, atol=1e-5)
    assert bool((got[:, :first] == 0).all())  # positions before `first` are not computed
    (got * m).sum().backward()
    for k, p in model.named_parameters():
        assert torch.allclose(p.grad, ref_grads[k], atol=1e-5, rtol=1e-4), k
    assert bool((ent[m.bool()] > 0).all())
    with torch.no_grad():  # the entropy of the same restricted distribution, in full
        x = model(input_ids=b.input_ids, attention_mask=b.attention_mask).logits[:, :-1]
        logp = torch.log_softmax(x.float().div(0.7).masked_fill(blocked, -1e9), -1)
        ref_ent = -(logp.exp() * logp).sum(-1)
    assert torch.allclose(ent[:, first:], ref_ent[:, first:], atol=1e-4)


def test_scoring_forwards_build_no_kv_cache(tiny):
    """A model whose config asks for a cache (as SmolLM2's does) builds none in the scoring
    and training forwards; the control: the same call without the function's argument does."""
    model = AutoModelForCausalLM.from_pretrained(tiny)
    model.config.use_cache = True
    caches = []
    model.register_forward_hook(lambda m, a, kw, out: caches.append(out.past_key_values),
                                with_kwargs=True)
    b = _batch()
    model(input_ids=b.input_ids, attention_mask=b.attention_mask)  # the control
    token_logprobs(model, b.input_ids, b.attention_mask, first=3)
    with torch.no_grad():
        token_logprobs(model, b.input_ids, b.attention_mask)
    assert caches[0] is not None and caches[0].get_seq_length() == b.input_ids.shape[1]
    assert caches[1:] == [None, None]


def _worker(tiny: str, compute: str) -> PolicyWorker:
    s = PolicySettings(model_path=tiny, compute_dtype=compute, micro_batch_size=3,
                       temperature=0.7, optim=OptimSettings(lr=1e-3, grad_clip=0.0),
                       grpo=GRPOSettings(aggregation="token"))
    return PolicyWorker(s, rank=0, world_size=1, master_port=free_port())


def test_bf16_mixed_precision_matches_fp32_loss_and_gradients(tiny):
    fp32, bf16 = _worker(tiny, "float32"), _worker(tiny, "bfloat16")
    try:
        b = _batch()
        loss32, g32 = fp32.gradients(b)
        loss16, g16 = bf16.gradients(b)
        assert g32 is not None and g16 is not None and set(g32) == set(g16)
        flat32 = torch.cat([g32[k].flatten() for k in sorted(g32)])
        flat16 = torch.cat([g16[k].flatten() for k in sorted(g16)])
        assert flat16.dtype == torch.float32  # gradients reduced into fp32
        # tolerance: loss within 2% (+1e-3), gradient cosine > 0.99, norm within 5%
        assert abs(loss16 - loss32) <= 0.02 * abs(loss32) + 1e-3, (loss16, loss32)
        cos = torch.nn.functional.cosine_similarity(flat32, flat16, dim=0)
        assert cos > 0.99, float(cos)
        assert abs(flat16.norm() / flat32.norm() - 1) < 0.05
        assert not torch.equal(flat32, flat16)  # control: bf16 really ran
        # master weights and optimizer state stay fp32 through a step
        m = bf16.train_step(b)
        assert m["policy/tokens"] > 0
        for p in bf16.model.parameters():
            assert p.dtype == torch.float32
        for st in bf16.optimizer.state.values():
            assert st["exp_avg"].dtype == torch.float32
        sd = bf16.full_state_dict()
        assert sd is not None and all(v.dtype == torch.float32 for v in sd.values())
    finally:
        bf16.close()
        fp32.close()


def test_tis_is_a_no_op_when_the_engine_matches_the_policy(tiny):
    """With the rollout log-probabilities equal to the policy's own, every TIS weight is 1
    and the gradient is the one without TIS."""
    w = _worker(tiny, "float32")
    try:
        b = _batch()
        _, plain = w.gradients(b)
        own = w._score(w.model, b)  # [B, L-1]: the policy's own log-probs as the engine's
        lp = torch.nn.functional.pad(own, (1, 0))
        lp[b.completion_mask == 0] = float("nan")
        with_lp = TrainBatch(
            b.input_ids, b.attention_mask, b.completion_mask, b.advantages, lp)
        w.settings = PolicySettings(**{**w.settings.__dict__,
                                       "grpo": GRPOSettings(aggregation="token", tis_cap=2.0)})
        weights, metrics = w._rollout_correction(with_lp, w._score(w.model, with_lp))
        assert weights is not None
        assert torch.allclose(weights, torch.ones_like(weights))
        assert metrics["rollout/probs_diff_max"] < 1e-6
        _, tis = w.gradients(with_lp)
        for k in plain:
            assert torch.allclose(plain[k], tis[k], atol=1e-7), k
    finally:
        w.close()
