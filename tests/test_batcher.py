"""The batcher (``reward_service/server/batcher.py``) in front of a real pool: a request's repeats are
scored once and answered in order, with the verdict cache off and on."""

from __future__ import annotations

import asyncio

import pytest

from reward_service.server.batcher import Batcher, Job
from reward_service.server.metrics import Metrics
from reward_service.server.pool import WorkerPool
from reward_service.settings import Settings

A = Job("math_verify", "\\boxed{1}", "1", {})
B = Job("math_verify", "\\boxed{3}", "2", {})
C = Job("numeric", "\\boxed{0.5}", "1/2", {"rel_tol": 1e-6})


@pytest.mark.parametrize("cache_items", [0, 1000], ids=["cache-off", "cache-on"])
def test_repeats_are_scored_once_and_answered_in_order(cache_items: int) -> None:
    metrics = Metrics()

    async def main() -> tuple[list[list[str]], list[list[bool]]]:
        pool = WorkerPool(Settings(workers=2, spares=0), metrics=metrics)
        await pool.start()
        try:
            batcher = Batcher(pool, cache_items=cache_items, metrics=metrics)
            statuses, cached = [], []
            for jobs in ([A, B, A, C, B], [B, A, C, A]):
                got = await batcher.score(jobs, 30.0)
                assert [s.job for s in got] == jobs
                statuses.append([s.verdict.status for s in got])
                cached.append([s.cached for s in got])
            return statuses, cached
        finally:
            await pool.stop()

    statuses, cached = asyncio.run(main())
    assert statuses == [["correct", "incorrect", "correct", "correct", "incorrect"],
                        ["incorrect", "correct", "correct", "correct"]]
    # within a request each repeat is the first one's answer; across requests only the cache
    assert metrics.dedup_items._default.value == 2 + (1 if cache_items == 0 else 0)
    if cache_items:
        assert cached == [[False] * 5, [True] * 4]
        assert metrics.cache_hits._default.value == 4
    else:
        assert cached == [[False] * 5, [False] * 4]
        assert metrics.cache_hits._default.value == 0
