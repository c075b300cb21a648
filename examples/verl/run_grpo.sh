#!/usr/bin/env bash
# verl GRPO with rewards from the reward service. Start the service first:
#   REWARD_HOST=0.0.0.0 reward-service serve
# One command line for every verl: the reward.* keys are what verl >= 0.7 (the reward loop;
# tested: 0.9.1) reads; the legacy keys are what verl's legacy reward managers read (tested:
# 0.9.1's workers/reward_manager/batch.py). `++` adds a key or overrides it, so the line
# composes on either config. tests/integrations/test_verl_released.py composes these lines with
# verl 0.9.1's own Hydra config and runs its reward loop against the service.
set -euo pipefail
VERL_REWARD=$(python -c 'import trainer_client.integrations.verl as m; print(m.__file__)')
REWARD_URL=${REWARD_URL:-http://127.0.0.1:8000}

python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files="$HOME/data/gsm8k/train.parquet" \
    data.val_files="$HOME/data/gsm8k/test.parquet" \
    actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \
    actor_rollout_ref.rollout.n=8 \
    ++reward.custom_reward_function.path="$VERL_REWARD" \
    ++reward.custom_reward_function.name=compute_score_async \
    ++reward.custom_reward_function.reward_kwargs.url="$REWARD_URL" \
    reward_model.reward_manager=batch \
    custom_reward_function.path="$VERL_REWARD" \
    custom_reward_function.name=compute_score_batch \
    ++custom_reward_function.reward_kwargs.url="$REWARD_URL" \
    "$@"

# verl >= 0.7 alone needs only the three reward.* lines. Do not use the legacy lines with
# verl's experimental fully_async_policy: it migrates them over the reward.* ones, and its
# reward loop has no "batch" manager ("Unknown reward manager: batch").
