"""trainer_client.integrations.trl called exactly as TRL's GRPOTrainer calls a reward function.

``trl/trainer/grpo_trainer.py: _calculate_rewards``: ``reward_func(prompts=, completions=,
completion_ids=, **reward_kwargs)``, where ``reward_kwargs`` is every other dataset column as a
list plus ``trainer_state`` (and ``log_extra``/``log_metric`` in TRL 1.x); ``None`` rewards
become NaN; ``asyncio.iscoroutinefunction(reward_func)`` selects the async path.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from trainer_client.errors import RewardServiceUnavailable
from trainer_client.integrations.trl import make_reward_func


def trl_call(reward_func: Any, inputs: list[dict], completions: list, **extra: Any) -> list:
    """Replays _calculate_rewards: columns of ``inputs`` become keyword lists."""
    prompts = [x["prompt"] for x in inputs]
    keys = [k for k in inputs[0] if k not in ("prompt", "completion", "completion_ids")]
    reward_kwargs = {k: [x[k] for x in inputs] for k in keys}
    reward_kwargs["trainer_state"] = object()
    reward_kwargs.update(extra)
    completion_ids = [[1, 2, 3] for _ in completions]
    if asyncio.iscoroutinefunction(reward_func):
        out = asyncio.run(reward_func(prompts=prompts, completions=completions,
                                      completion_ids=completion_ids, **reward_kwargs))
    else:
        out = reward_func(prompts=prompts, completions=completions,
                          completion_ids=completion_ids, **reward_kwargs)
    # TRL: [reward if reward is not None else torch.nan for reward in output_reward_func]
    return [r if r is not None else math.nan for r in out]


CONV_INPUTS = [
    {"prompt": [{"role": "user", "content": "What is 1/2 + 1/4?"}], "solution": "3/4",
     "data_source": "lighteval/MATH", "level": "Level 2"},
    {"prompt": [{"role": "user", "content": "Janet has 3 apples..."}], "solution": 18,
     "data_source": "openai/gsm8k", "level": "n/a"},
]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_conversational_completions_and_extra_columns(service_env: str,
                                                      asynchronous: bool) -> None:
    fn = make_reward_func(answer_key="solution", asynchronous=asynchronous)
    assert asyncio.iscoroutinefunction(fn) is asynchronous
    assert fn.__name__ == "math_reward"
    inputs = [CONV_INPUTS[0]] * 3 + [CONV_INPUTS[1]] * 3  # G=3 generations per prompt
    completions = [
        [{"role": "assistant", "content": "1/2 + 1/4 = \\boxed{\\frac{3}{4}}"}],
        [{"role": "assistant", "content": "It is \\boxed{0.75}."}],
        [{"role": "assistant", "content": [{"type": "text", "text": "I think \\boxed{1}"}]}],
        [{"role": "assistant", "content": "3*6 = 18\n#### 18"}],
        # a tool-using turn: the last assistant message holds the answer
        [{"role": "assistant", "content": "let me compute"},
         {"role": "tool", "content": "18"},
         {"role": "assistant", "content": "The total is 18"}],
        [{"role": "assistant", "content": "no idea"}],
    ]
    logged: dict[str, list] = {}
    metrics: list[tuple[str, float]] = []
    rewards = trl_call(fn, inputs, completions,
                       log_extra=lambda k, v: logged.__setitem__(k, list(v)),
                       log_metric=lambda k, v: metrics.append((k, v)))
    assert rewards == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert logged["math_reward_status"] == ["correct", "correct", "incorrect", "correct",
                                            "correct", "no_answer"]
    assert metrics == [("math_reward/unscored", 0.0)]


def test_standard_format_completions_and_scorer(service_env: str) -> None:
    fn = make_reward_func(answer_key="answer", scorer="gsm8k", name="gsm8k_reward")
    inputs = [{"prompt": "Q: 2+2?", "answer": "4"}, {"prompt": "Q: 3+3?", "answer": "6"}]
    assert trl_call(fn, inputs, ["so 4", "#### 7"]) == [1.0, 0.0]


def test_unscorable_items_are_none_not_zero(service_env: str) -> None:
    fn = make_reward_func(answer_key="solution")
    inputs = [{"prompt": "p", "solution": "1"}, {"prompt": "p", "solution": ""},
              {"prompt": "p", "solution": None}]
    rewards = trl_call(fn, inputs, ["\\boxed{1}", "\\boxed{1}", "\\boxed{1}"])
    assert rewards[0] == 1.0 and math.isnan(rewards[1]) and math.isnan(rewards[2])


def test_item_timeout_is_none(service_env: str) -> None:
    fn = make_reward_func(answer_key="solution", timeout_s=1.0)
    hang = "\\boxed{\\frac{10^{1300000}}{7^{1300000}}}"
    rewards = trl_call(fn, [{"prompt": "p", "solution": "1"}] * 2, [hang, "\\boxed{1}"])
    assert math.isnan(rewards[0]) and rewards[1] == 1.0


@pytest.mark.parametrize(
    ("inputs", "completions", "kwargs", "exc", "match"),
    [
        ([{"prompt": "p", "answer": "1"}], ["x"], {}, KeyError, "no 'solution' column.*answer"),
        ([{"prompt": "p", "solution": None}], ["x"], {}, ValueError, "every value"),
        ([{"prompt": "p", "solution": "1"}], ["x", "y"], {}, ValueError, "1 prompts but 2"),
        ([{"prompt": "p", "solution": "1"}], [42], {}, ValueError, "string or a list"),
    ],
)
def test_misuse_is_a_clear_error(service_env: str, inputs: list, completions: list,
                                 kwargs: dict, exc: type, match: str) -> None:
    fn = make_reward_func(**kwargs)
    with pytest.raises(exc, match=match):
        trl_call(fn, inputs, completions)


def test_column_length_mismatch(service_env: str) -> None:
    fn = make_reward_func()
    with pytest.raises(ValueError, match="'solution' has 1 entries but there are 2"):
        fn(prompts=["a", "b"], completions=["x", "y"], completion_ids=None, solution=["1"])


@pytest.mark.parametrize("asynchronous", [False, True])
def test_unreachable_service(dead_url: str, asynchronous: bool) -> None:
    loud = make_reward_func(dead_url, retry_deadline_s=1.0, asynchronous=asynchronous)
    with pytest.raises(RewardServiceUnavailable):
        trl_call(loud, [{"prompt": "p", "solution": "1"}], ["\\boxed{1}"])
    quiet = make_reward_func(dead_url, retry_deadline_s=1.0, on_unavailable="none",
                             asynchronous=asynchronous)
    rewards = trl_call(quiet, [{"prompt": "p", "solution": "1"}] * 2, ["\\boxed{1}"] * 2)
    assert all(math.isnan(r) for r in rewards)
