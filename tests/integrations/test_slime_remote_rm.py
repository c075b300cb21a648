"""slime's ``--rm-type remote_rm`` against the real service: a **replay**.

slime is not on PyPI (the ``slime`` there is another project), so its code cannot be loaded
from a released package. :func:`remote_rm` below repeats ``slime/rollout/rm_hub/__init__.py:
remote_rm`` (THUDM/slime, main, read 2026-12): one shared aiohttp session (64 connections,
120 s total timeout), ``{"prompt", "response", "label"}`` posted to ``args.rm_url``,
``raise_for_status``, the JSON reply returned *as the reward*; any exception retried up to
10 times with ``min(2**attempt, 30) + random()`` seconds of backoff. ``batched_async_rm``
gathers one such call per sample of a group.
"""

from __future__ import annotations

import asyncio
import random
from types import SimpleNamespace

import aiohttp

from tests.helpers import Service


async def remote_rm(session: aiohttp.ClientSession, args: SimpleNamespace, sample: SimpleNamespace,
                    max_retries: int = 10):  # type: ignore[no-untyped-def]
    payload = {"prompt": sample.prompt, "response": sample.response, "label": sample.label}
    for attempt in range(max_retries):
        try:
            async with session.post(args.rm_url, json=payload) as resp:
                resp.raise_for_status()
                return await resp.json()
        except Exception:
            if attempt + 1 >= max_retries:
                raise
            await asyncio.sleep(min(2**attempt, 30) + random.random())
    return None


def run_group(url: str, samples: list[SimpleNamespace]) -> list:
    async def main() -> list:
        connector = aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True)
        async with aiohttp.ClientSession(connector=connector,
                                         timeout=aiohttp.ClientTimeout(total=120)) as session:
            args = SimpleNamespace(rm_url=url)
            return await asyncio.gather(*(remote_rm(session, args, s) for s in samples))

    return asyncio.run(main())


def test_remote_rm_gets_bare_rewards_and_details_on_request(svc: Service) -> None:
    samples = [SimpleNamespace(prompt="What is 6*7?", response=r, label=lab) for r, lab in [
        ("6*7 = \\boxed{42}<|im_end|>", "42"), ("\\boxed{41}", "42"), ("no idea", 3)]] * 32
    rewards = run_group(f"{svc.url}/slime/reward", samples)
    assert rewards == [1.0, 0.0, 0.0] * 32  # slime uses the body itself as the reward
    detailed = run_group(f"{svc.url}/slime/reward?details=true", samples[:3])
    assert [d["status"] for d in detailed] == ["correct", "incorrect", "no_answer"]
    assert [d["score"] for d in detailed] == [1.0, 0.0, 0.0]  # --reward-key score
