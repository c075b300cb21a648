"""Call the TRL reward function exactly as GRPOTrainer does, against a running service.

    $ REWARD_SERVICE_URL=http://127.0.0.1:8000 python examples/trl/replay.py

trl/trainer/grpo_trainer.py (_calculate_rewards) calls ``reward_func(prompts=, completions=,
completion_ids=, **columns)``. train_grpo.py is the real training script.
"""

from __future__ import annotations

from trainer_client.integrations.trl import make_reward_func

math_reward = make_reward_func(answer_key="solution")  # URL from $REWARD_SERVICE_URL
prompts = [[{"role": "user", "content": "What is 1/2 + 1/4?"}]] * 3
completions = [[{"role": "assistant", "content": "So \\boxed{\\frac{3}{4}}"}],
               [{"role": "assistant", "content": "\\boxed{0.7}"}],
               [{"role": "assistant", "content": "Let me think..."}]]
rewards = math_reward(prompts=prompts, completions=completions, completion_ids=[[0]] * 3,
                      solution=["3/4"] * 3, level=["Level 2"] * 3, trainer_state=None)
print("rewards:", rewards)
assert rewards == [1.0, 0.0, 0.0]
