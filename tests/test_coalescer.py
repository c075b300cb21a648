"""reward_service.coalescer: small concurrent submissions share pool submissions.

The pool here is a recording coroutine (the real pool is exercised through it by every API
test, since the batcher always submits through the coalescer)."""

from __future__ import annotations

import asyncio

import pytest

from reward_service.coalescer import Coalescer


class Recorder:
    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def submit(self, tasks: list[int]) -> list[int]:
        self.calls.append(tasks)
        await self.release.wait()
        if self.fail:
            raise self.fail
        return [t * 10 for t in tasks]


def test_one_item_submissions_share_a_submission_while_the_pool_is_busy() -> None:
    async def main() -> None:
        rec = Recorder()
        co: Coalescer[int, int] = Coalescer(rec.submit, max_items=64, max_inflight=1)
        first = asyncio.ensure_future(co.submit([0]))
        await asyncio.sleep(0.01)  # the first is in the pool
        rest = [asyncio.ensure_future(co.submit([i, -i])) for i in range(1, 100)]
        await asyncio.sleep(0.01)
        rec.release.set()
        assert await first == [0]
        assert [await r for r in rest] == [[i * 10, -i * 10] for i in range(1, 100)]
        # 1 alone, then 99 x 2 items in groups of at most 64 items
        assert [len(c) for c in rec.calls] == [1, 64, 64, 64, 6]

    asyncio.run(main())


def test_large_submissions_go_straight_to_the_pool() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.release.set()
        co: Coalescer[int, int] = Coalescer(rec.submit, max_items=4, max_inflight=1)
        assert await co.submit([1, 2, 3, 4, 5]) == [10, 20, 30, 40, 50]
        assert rec.calls == [[1, 2, 3, 4, 5]]

    asyncio.run(main())


def test_a_cancelled_caller_is_withdrawn_and_a_group_nobody_waits_for_is_cancelled() -> None:
    async def main() -> None:
        rec = Recorder()
        co: Coalescer[int, int] = Coalescer(rec.submit, max_items=64, max_inflight=1)
        busy = asyncio.ensure_future(co.submit([1]))
        await asyncio.sleep(0.01)
        gone = asyncio.ensure_future(co.submit([2]))
        kept = asyncio.ensure_future(co.submit([3]))
        await asyncio.sleep(0.01)
        gone.cancel()  # still pending: withdrawn before its group is submitted
        busy.cancel()  # its group is in the pool and nobody else waits for it: cancelled
        await asyncio.gather(gone, busy, return_exceptions=True)
        rec.release.set()
        assert await kept == [30]
        assert rec.calls == [[1], [3]]

    asyncio.run(main())


def test_the_pools_error_reaches_every_caller_of_the_group() -> None:
    async def main() -> None:
        rec = Recorder()
        rec.fail = RuntimeError("overloaded")
        co: Coalescer[int, int] = Coalescer(rec.submit, max_items=64, max_inflight=1)
        calls = [asyncio.ensure_future(co.submit([i])) for i in range(3)]
        await asyncio.sleep(0.01)
        rec.release.set()
        for c in calls:
            with pytest.raises(RuntimeError, match="overloaded"):
                await c

    asyncio.run(main())
