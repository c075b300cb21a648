#!/usr/bin/env bash
# verl GRPO with rewards from the reward service (one HTTP request per batch).
# Start the service first:  REWARD_HOST=0.0.0.0 reward-service serve
set -euo pipefail
VERL_REWARD=$(python -c 'import trainer_client.integrations.verl as m; print(m.__file__)')
REWARD_URL=${REWARD_URL:-http://127.0.0.1:8000}

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files="$HOME/data/gsm8k/train.parquet" \
    data.val_files="$HOME/data/gsm8k/test.parquet" \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \
    actor_rollout_ref.rollout.n=8 \
    reward_model.reward_manager=batch \
    custom_reward_function.path="$VERL_REWARD" \
    custom_reward_function.name=compute_score_batch \
    +custom_reward_function.reward_kwargs.url="$REWARD_URL" \
    "$@"

# Newer verl (reward loop) spells the same lines:
#   reward.reward_manager.name=batch
#   reward.custom_reward_function.path="$VERL_REWARD"
#   reward.custom_reward_function.name=compute_score_batch_async
#   +reward.custom_reward_function.reward_kwargs.url="$REWARD_URL"
# The naive (per-item) manager: custom_reward_function.name=compute_score
