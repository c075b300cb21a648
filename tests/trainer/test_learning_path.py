"""What the policy learns from: explicit generation settings, no dropout when scoring,
the treatment of truncated completions, the hedge-proof default scorers.

Each test has its control: the model's own ``generation_config.json`` does make plain
``generate`` sample; dropout does make two scoring passes differ in train mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.helpers import DATA
from trainer_client.data import DataSettings, load_problems
from trainer_client.metrics import completion_metrics, final_answers, reward_metrics
from trainer_client.model.grpo import apply_truncation, group_advantages
from trainer_client.model.rollout import Completion, HFEngine, explicit_generation_config
from trainer_client.model.tiny_model import TinyModelSettings, build_tiny_model
from trainer_client.reward_client import ScoreResult
from trainer_client.settings import EngineSettings, PolicySettings, SamplingSettings

SAMPLING_GENERATION_CONFIG = {  # what an instruct model may ship: sample, hot, top-k 3
    "do_sample": True, "temperature": 3.0, "top_k": 3, "repetition_penalty": 1.5,
    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
}


@pytest.fixture(scope="module")
def sampling_model(tmp_path_factory) -> Path:
    """A tiny model whose generation_config.json says to sample."""
    path = build_tiny_model(TinyModelSettings(), tmp_path_factory.mktemp("gen") / "m")
    (path / "generation_config.json").write_text(json.dumps(SAMPLING_GENERATION_CONFIG))
    return path


PROMPTS = ["3+4=", "12+1=", "9+9=", "0+"]


def test_model_generation_config_samples_without_explicit_settings(sampling_model):
    # control: plain generate follows the file and samples (two seeds, two outputs)
    model = AutoModelForCausalLM.from_pretrained(sampling_model)
    assert model.generation_config.do_sample is True
    ids = torch.tensor([[5, 6, 7, 8]])
    outs = set()
    for seed in range(4):
        torch.manual_seed(seed)
        outs.add(tuple(model.generate(ids, max_new_tokens=12).tolist()[0]))
    assert len(outs) > 1


def test_greedy_eval_is_deterministic_argmax_despite_generation_config(sampling_model):
    model = AutoModelForCausalLM.from_pretrained(sampling_model)
    # the explicit config leaves nothing for the model's file to fill in
    merged, _ = model._prepare_generation_config(explicit_generation_config(
        SamplingSettings(greedy=True, max_new_tokens=8), pad_token_id=0, eos_token_id=2))
    assert merged.do_sample is False and merged.num_beams == 1
    assert merged.repetition_penalty == 1.0
    sampled, _ = model._prepare_generation_config(explicit_generation_config(
        SamplingSettings(n=2, temperature=0.7, max_new_tokens=8), pad_token_id=0,
        eos_token_id=2))
    assert (sampled.temperature, sampled.top_k, sampled.top_p) == (0.7, 0, 1.0)
    assert sampled.repetition_penalty == 1.0

    greedy = SamplingSettings(greedy=True, max_new_tokens=12)
    runs = []
    for seed in (0, 1, 2):
        eng = HFEngine(str(sampling_model), EngineSettings(seed=seed, num_threads=1))
        runs.append([g[0].completion_ids for g in eng.generate(PROMPTS, greedy)])
        runs.append([g[0].completion_ids for g in eng.generate(PROMPTS, greedy)])
    assert all(r == runs[0] for r in runs)
    # and it is argmax decoding of the model, token by token
    tok = eng.tokenizer
    for prompt, got in zip(PROMPTS, runs[0], strict=True):
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
        want = []
        with torch.no_grad():
            for _ in range(len(got)):
                nxt = int(model(input_ids=ids).logits[0, -1].argmax())
                want.append(nxt)
                if nxt == tok.eos_token_id:
                    break
                ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
        assert got == want


def test_policy_scores_without_dropout(tmp_path):
    from trainer_client.model.batch import make_train_batch
    from trainer_client.model.policy import PolicyWorker
    from trainer_client.workers import free_port

    path = build_tiny_model(TinyModelSettings(), tmp_path / "m")
    cfg = json.loads((path / "config.json").read_text())
    cfg["attention_dropout"] = 0.5  # a model with dropout in its config
    (path / "config.json").write_text(json.dumps(cfg))
    comps = [Completion([5, 6, 7], [8, 9, 10, 2], "", True) for _ in range(4)]
    batch = make_train_batch(comps, torch.tensor([1.0, -1.0, 0.5, -0.5]),
                             torch.ones(4, dtype=torch.bool), pad_id=0)
    w = PolicyWorker(PolicySettings(model_path=str(path), num_threads=1), rank=0,
                     world_size=1, master_port=free_port())
    try:
        assert w.model.training is False
        a, b = w._score(w.model, batch), w._score(w.model, batch)
        assert torch.equal(a, b)
        # the update's first pass sees exactly the scored log-probs: ratio 1, nothing clipped
        m = w.train_step(batch)
        assert m["losses/ratio_mean"] == pytest.approx(1.0, abs=1e-6)
        assert m["losses/clip_fraction"] == 0.0
        # control: in train mode the same scoring differs (dropout is live in this model)
        w.model.train()
        c, d = w._score(w.model, batch), w._score(w.model, batch)
        assert not torch.equal(c, d)
    finally:
        w.close()


def test_truncated_keep_mask_zero():
    rewards = torch.tensor([1.0, 0.0, 1.0, float("nan"), 1.0, 0.0, 0.0, 1.0])
    finished = torch.tensor([True, True, False, False, True, False, True, True])
    keep, m = apply_truncation(rewards, finished, "keep")
    assert torch.equal(keep.nan_to_num(-1), rewards.nan_to_num(-1))
    assert m["rewards/truncated_paid_fraction"] == pytest.approx(1 / 8)  # index 2
    mask, _ = apply_truncation(rewards, finished, "mask")
    assert torch.isnan(mask[[2, 3, 5]]).all() and torch.equal(mask[[0, 1, 4, 6, 7]],
                                                              rewards[[0, 1, 4, 6, 7]])
    zero, _ = apply_truncation(rewards, finished, "zero")
    assert zero.tolist()[:3] == [1.0, 0.0, 0.0] and zero[5] == 0.0 and torch.isnan(zero[3])
    with pytest.raises(ValueError):
        apply_truncation(rewards, finished, "drop")  # type: ignore[arg-type]

    # effect on advantages (groups of 4): masked items are left out of the group and get
    # advantage 0 and valid False (no loss); zeroed ones count as wrong answers
    (a_keep, v_keep), _ = group_advantages(keep, 4)
    (a_mask, v_mask), _ = group_advantages(mask, 4)
    (a_zero, v_zero), _ = group_advantages(zero, 4)
    assert v_mask.tolist() == [True, True, False, False, True, False, True, True]
    assert a_mask[2] == 0 and a_keep[2] > 0 and a_zero[2] < 0
    # group 1 under mask: rewards (1, 0) -> +-0.707 (n-1 std); keep: (1, 0, 1) + NaN
    torch.testing.assert_close(a_mask[:2], torch.tensor([0.7071, -0.7071]), atol=1e-3,
                               rtol=0)
    assert v_keep[3].item() is False and v_zero[3].item() is False  # unavailable stays out


def test_default_scorers_are_hedge_proof(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps({"problem": "1+1?", "solution": "\\boxed{2}"}) + "\n"
                 + json.dumps({"problem": "2+2?", "solution": "\\boxed{4}"}) + "\n")
    train, _ = load_problems(DataSettings(format="math", train_path=str(p), eval_size=0))
    assert {t.scorer for t in train} == {"math"}
    g = DATA / "gsm8k_test.jsonl"
    if g.exists():
        train, held = load_problems(DataSettings(format="gsm8k", train_path=str(g),
                                                 eval_size=5, max_gold_steps=2))
        assert {t.scorer for t in train + held} == {"gsm8k"}
        assert len(train) + len(held) == 440  # reference solutions with <= 2 calculations
    kept = load_problems(DataSettings(format="math", train_path=str(p), eval_size=0,
                                      scorer="math_verify"))[0]
    assert {t.scorer for t in kept} == {"math_verify"}  # still selectable


def test_hedge_and_multi_answer_metrics():
    rs = [ScoreResult(score=0.0, status="incorrect", reason="hedged: '... or ...' at the answer"),
          ScoreResult(score=1.0, status="correct"), ScoreResult(score=0.0, status="incorrect"),
          None]
    _, m = reward_metrics(rs)
    assert m["rewards/hedged_fraction"] == 0.25
    assert final_answers("so\n#### 20\n#### 24\n#### 1,000.") == {"20", "24", "1000"}
    assert final_answers("\\boxed{5} ... \\boxed{ 5 }") == {"5"}
    comps = [Completion([1], [5, 6, 2], "#### 20\n#### 24", True),
             Completion([1], [5, 6, 7, 8], "#### 7", False)]
    cm = completion_metrics(comps, rollout_seconds=2.0)
    assert cm["completions/multi_answer_fraction"] == 0.5
    assert cm["completions/truncated_fraction"] == 0.5
    assert cm["throughput/rollout_tokens_per_second"] == pytest.approx(3.5)
