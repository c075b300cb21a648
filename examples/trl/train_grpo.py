"""GRPO on GSM8K with TRL, rewards from the reward service.

    $ reward-service serve &          # or point REWARD_SERVICE_URL at a running one
    $ pip install trl datasets
    $ REWARD_SERVICE_URL=http://127.0.0.1:8000 python examples/trl/train_grpo.py
"""

from __future__ import annotations

from datasets import load_dataset  # type: ignore[import-not-found]
from trl import GRPOConfig, GRPOTrainer  # type: ignore[import-not-found]

from trainer_client.integrations.trl import make_reward_func


def main() -> None:
    ds = load_dataset("openai/gsm8k", "main", split="train")
    ds = ds.map(lambda row: {
        "prompt": [{"role": "user", "content": row["question"]}],
        "solution": row["answer"].split("####")[-1].strip(),
    })
    # async: TRL runs it in its own event loop, alongside any other reward functions
    math_reward = make_reward_func(answer_key="solution", scorer="gsm8k", asynchronous=True)
    trainer = GRPOTrainer(
        model="Qwen/Qwen2.5-0.5B-Instruct",
        reward_funcs=[math_reward],
        train_dataset=ds,
        args=GRPOConfig(output_dir="runs/trl-grpo", num_generations=8, log_completions=True),
    )
    trainer.train()


if __name__ == "__main__":
    main()
