"""trainer_client.integrations.slime.reward called as slime calls a custom reward function:
``await rm_function(args, samples)`` (``batched_async_rm``, ``--group-rm``) or
``await rm_function(args, sample)`` (``async_rm``)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from tests.helpers import Service
from trainer_client.integrations.slime import reward


def sample(response: str, label: object, **metadata: object) -> SimpleNamespace:
    return SimpleNamespace(prompt="<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n",
                           response=response, label=label, metadata=metadata, reward=None)


def test_group_single_and_reward_key(svc: Service) -> None:
    args = SimpleNamespace(rm_url=svc.url + "/slime/reward", reward_key=None)
    group = [sample("\\boxed{7}<|im_end|>", "7"), sample("\\boxed{8}", 7),
             sample("3+4 = 7", "7", data_source="openai/gsm8k"), sample("hmm", "7")]
    assert asyncio.run(reward(args, group)) == [1.0, 0.0, 1.0, 0.0]
    assert asyncio.run(reward(args, sample("#### 7<|im_end|>", "7", scorer="gsm8k"))) == 1.0
    keyed = SimpleNamespace(rm_url=svc.url, reward_key="score")
    out = asyncio.run(reward(keyed, group[:2]))
    assert out == [{"score": 1.0, "acc": 1.0, "pred": "7", "status": "correct"},
                   {"score": 0.0, "acc": 0.0, "pred": "8", "status": "incorrect"}]
    assert asyncio.run(reward(args, [])) == []


def test_missing_label_is_a_clear_error(svc: Service) -> None:
    args = SimpleNamespace(rm_url=svc.url, reward_key=None)
    with pytest.raises(ValueError, match="label \\(--label-key\\)"):
        asyncio.run(reward(args, [sample("\\boxed{1}", "1"), sample("\\boxed{1}", None)]))
