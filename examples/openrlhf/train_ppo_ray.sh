#!/usr/bin/env bash
# OpenRLHF GRPO/REINFORCE++ with rewards from the reward service.
# Start the service first:  REWARD_HOST=0.0.0.0 reward-service serve   (no REWARD_API_TOKEN:
# OpenRLHF sends no Authorization header; keep the service on a private network)
set -euo pipefail
REWARD_URL=${REWARD_URL:-http://127.0.0.1:8000}

ray job submit --address="http://127.0.0.1:8265" -- python3 -m openrlhf.cli.train_ppo_ray \
    --pretrain Qwen/Qwen2.5-0.5B-Instruct \
    --prompt_data openai/gsm8k --input_key question --label_key answer \
    --apply_chat_template \
    --advantage_estimator group_norm --n_samples_per_prompt 8 \
    --remote_rm_url "$REWARD_URL/get_reward" \
    "$@"

# Options ride in the URL (OpenRLHF posts only the body), e.g. GSM8K answers ("#### 18"):
#   --remote_rm_url "$REWARD_URL/get_reward?scorer=gsm8k&timeout_s=10"
# Several services: --remote_rm_url "http://a:8000/get_reward,http://b:8000/get_reward"
