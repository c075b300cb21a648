#!/usr/bin/env bash
# The trainer's CUDA paths on a lent GPU machine (the `device` tool), as one prepared run:
#   .whl/       the service's wheels for that machine's Python 3.12 (see docs/trainer.md)
#   .whl/data/  gsm8k_{train,test}.jsonl (shared/ does not travel)
# 1. the reward service (best-effort sandbox) on loopback; 2. bench/gpu/tiny-cuda.yaml
# (250 steps: does the tiny task learn on cuda?); 3. bench/gpu/gsm8k-shape.yaml (4 steps at
# the GPU config's sizes). Logs and metrics to $OUT.
set -uo pipefail
# into the interpreter itself: the service's zygote starts with a clean environment (no
# PYTHONPATH), so a --target folder is not seen by the workers
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    .whl/*.whl || exit 1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi -L
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers',
transformers.__version__, 'cuda', torch.cuda.is_available())"
python3 -m reward_service serve --host 127.0.0.1 --port 8000 --workers 8 \
    --sandbox best-effort > "$OUT/service.log" 2>&1 &
svc=$!
trap 'kill -TERM $svc 2>/dev/null; wait $svc' EXIT
for cfg in tiny-cuda gsm8k-shape; do
    start=$(date +%s)
    timeout 240 python3 -m trainer_client.cli --config bench/gpu/$cfg.yaml \
        --reward-url http://127.0.0.1:8000 --no-progress --log-level info \
        > "$OUT/$cfg.log" 2>&1
    echo "$cfg: exit $? in $(( $(date +%s) - start )) s"
    cp /tmp/$cfg/metrics.jsonl "$OUT/$cfg.metrics.jsonl" 2>/dev/null
    tail -5 "$OUT/$cfg.log"
done
curl -s localhost:8000/v1/info | head -c 1500; echo
