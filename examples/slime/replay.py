"""Post samples exactly as slime's remote reward model does, against a running service.

    $ REWARD_SERVICE_URL=http://127.0.0.1:8000 python examples/slime/replay.py

slime/rollout/rm_hub/__init__.py (remote_rm) posts ``{"prompt", "response", "label"}`` per
sample, concurrently, and uses the JSON reply as the reward. run.sh shows the slime flags.
"""

from __future__ import annotations

import asyncio
import os

import httpx

url = os.environ.get("REWARD_SERVICE_URL", "http://127.0.0.1:8000").split(",")[0]
samples = [("What is 6*7?", "6*7 = \\boxed{42}", "42"), ("What is 6*7?", "\\boxed{41}", "42"),
           ("3+4?", "3 + 4 = 7\n#### 7", 7)]


async def main() -> list[float]:
    async with httpx.AsyncClient(timeout=120) as session:
        async def remote_rm(prompt: str, response: str, label: object) -> float:
            payload = {"prompt": prompt, "response": response, "label": label}
            resp = await session.post(f"{url}/slime/reward", json=payload)
            resp.raise_for_status()
            return resp.json()  # type: ignore[no-any-return]

        return await asyncio.gather(*(remote_rm(*s) for s in samples))


rewards = asyncio.run(main())
print("rewards:", rewards)
assert rewards == [1.0, 0.0, 1.0]
