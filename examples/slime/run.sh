#!/usr/bin/env bash
# slime with rewards from the reward service (one request per sample, sent concurrently).
# Start the service first:  REWARD_HOST=0.0.0.0 reward-service serve   (no REWARD_API_TOKEN:
# slime sends no Authorization header; keep the service on a private network)
set -euo pipefail
REWARD_URL=${REWARD_URL:-http://127.0.0.1:8000}

python3 train.py \
    --prompt-data /data/gsm8k/train.jsonl --input-key prompt --label-key label \
    --apply-chat-template \
    --rm-type remote_rm --rm-url "$REWARD_URL/slime/reward" \
    "$@"

# The reply is a bare number (the reward). For a dict that also carries acc/pred/status:
#   --rm-url "$REWARD_URL/slime/reward?details=true" --reward-key score --eval-reward-key acc
# Options ride in the URL: --rm-url "$REWARD_URL/slime/reward?scorer=gsm8k&timeout_s=10"
