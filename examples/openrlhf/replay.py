"""Post a batch exactly as OpenRLHF's remote reward model does, against a running service.

    $ REWARD_SERVICE_URL=http://127.0.0.1:8000 python examples/openrlhf/replay.py

openrlhf/utils/remote_rm_utils.py posts ``{"query", "prompts", "labels"}``; ``query`` is
prompt + response decoded with special tokens kept (here: Qwen's ChatML template).
train_ppo_ray.sh shows the OpenRLHF command line.
"""

from __future__ import annotations

import os

import httpx

url = os.environ.get("REWARD_SERVICE_URL", "http://127.0.0.1:8000").split(",")[0]
prompt = ("<|im_start|>system\nPut the final answer in \\boxed{}.<|im_end|>\n"
          "<|im_start|>user\nWhat is 6 * 7?<|im_end|>\n<|im_start|>assistant\n")
responses = ["6 * 7 = \\boxed{42}<|im_end|>", "\\boxed{41}<|im_end|>",
             "I don't know.<|im_end|><|endoftext|>"]
data = {"query": [prompt + r for r in responses], "prompts": [prompt] * 3, "labels": ["42"] * 3}
reply = httpx.post(f"{url}/get_reward", json=data, timeout=180,
                   headers={"Content-Type": "application/json"})
reply.raise_for_status()
body = reply.json()
print("rewards:", body["rewards"])
print("extra_logs:", body["extra_logs"])
assert body["rewards"] == [1.0, 0.0, 0.0]
