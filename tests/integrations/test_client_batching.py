"""How the client cuts and packs requests, against the real service: coalescing of
concurrent async calls, cutting by bytes, splitting on 413, and a real-size step."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import Service
from trainer_client.errors import RewardPayloadTooLarge
from trainer_client.integrations import _common, trl, verl
from trainer_client.reward_client import (
    AsyncRewardClient,
    RewardClient,
    RewardClientSettings,
    Timeout,
)


def score_requests(url: str) -> int:
    """``POST /v1/score`` requests the service has answered (its /metrics)."""
    text = httpx.get(f"{url}/metrics").text
    return int(sum(float(m) for m in re.findall(
        r'^reward_http_requests_total\{code="\d+",route="score"\} (\S+)$', text, re.M)))


def item(i: int, pad: int = 0) -> dict:
    return {"response": "x" * pad + f" so \\boxed{{{i % 10}}}", "ground_truth": str(i % 7),
            "scorer": "math"}


def expected(i: int) -> str:
    return "correct" if i % 10 == i % 7 else "incorrect"


def test_concurrent_async_calls_share_requests(svc: Service) -> None:
    """verl's reward loop awaits one call per sample: 300 calls, a handful of requests."""
    async def main() -> list[list[str]]:
        settings = RewardClientSettings(urls=(svc.url,), coalesce_window_s=0.02)
        async with AsyncRewardClient(settings) as client:
            replies = await asyncio.gather(*(client.score([item(i)]) for i in range(300)))
        return [[r.status for r in rep] for rep in replies]

    before = score_requests(svc.url)
    statuses = asyncio.run(main())
    assert statuses == [[expected(i)] for i in range(300)]
    assert score_requests(svc.url) - before <= 10


def test_without_the_window_every_call_is_a_request(svc: Service) -> None:
    """The control for the test above: the same calls with coalescing off."""
    async def main() -> None:
        settings = RewardClientSettings(urls=(svc.url,), coalesce_window_s=0)
        async with AsyncRewardClient(settings) as client:
            await asyncio.gather(*(client.score([item(i)]) for i in range(40)))

    before = score_requests(svc.url)
    asyncio.run(main())
    assert score_requests(svc.url) - before == 40


def test_requests_are_cut_by_bytes_as_well_as_items(svc: Service) -> None:
    settings = RewardClientSettings(urls=(svc.url,), max_request_bytes=64 * 1024)
    before = score_requests(svc.url)
    with RewardClient(settings) as client:
        results = client.score([item(i, pad=10_000) for i in range(40)])
    assert [r.status for r in results] == [expected(i) for i in range(40)]
    assert score_requests(svc.url) - before >= 7  # 400 KB in requests under 64 KB


@pytest.fixture(scope="module")
def small_body_svc() -> Iterator[Service]:
    """A service whose body limit (16 KiB) is below the client's (32 MiB by default)."""
    with Service(REWARD_MAX_BODY_BYTES=16 * 1024) as s:
        yield s


def test_a_413_is_answered_by_splitting(small_body_svc: Service) -> None:
    items = [item(i, pad=1_000) for i in range(60)]  # ~60 KB: over the service's 16 KiB
    with RewardClient(RewardClientSettings(urls=(small_body_svc.url,))) as client:
        assert [r.status for r in client.score(items)] == [expected(i) for i in range(60)]
        with pytest.raises(RewardPayloadTooLarge):  # one item alone over the limit
            client.score([item(0, pad=20_000)])

    async def main() -> list[str]:
        async with AsyncRewardClient(RewardClientSettings(urls=(small_body_svc.url,))) as c:
            return [r.status for r in await c.score(items)]

    assert asyncio.run(main()) == [expected(i) for i in range(60)]


@pytest.mark.slow
def test_a_real_size_step_of_512_mb_goes_through_every_client_path(
        svc: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """16,384 responses of 32 KB (long chains of thought; 512 MB) through RewardClient,
    verl's compute_score_batch and TRL's reward function: no 413 (the service's body limit
    is 64 MiB), requests cut under it. Ten distinct responses: the verdict cache and dedup
    keep the scoring cheap, so this measures the transport."""
    n, pad = 16_384, 32 * 1024
    base = ["y" * pad + f" so \\boxed{{{k}}}" for k in range(10)]
    responses = [base[i % 10] for i in range(n)]
    golds = [str(i % 7) for i in range(n)]
    want = [expected(i) for i in range(n)]
    monkeypatch.setenv(_common.ENV_URL, svc.url)

    settings = RewardClientSettings(urls=(svc.url,), chunk_size=16_384,
                                    timeout=Timeout(read=600))
    before = score_requests(svc.url)
    with RewardClient(settings) as client:
        got = client.score([{"response": r, "ground_truth": g, "scorer": "math"}
                            for r, g in zip(responses, golds, strict=True)])
    assert [r.status for r in got] == want
    assert score_requests(svc.url) - before >= 16  # 512 MB in requests under 32 MiB

    rewards = verl.compute_score_batch(["lighteval/MATH"] * n, responses, golds,
                                       scorer="math")
    assert [r["status"] for r in rewards] == want

    reward_func = trl.make_reward_func(answer_key="answer", scorer="math")
    trl_rewards = reward_func(prompts=["p"] * n, completions=responses, completion_ids=None,
                              answer=golds)
    assert trl_rewards == [1.0 if s == "correct" else 0.0 for s in want]
    _common.close_clients()
