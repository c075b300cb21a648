"""A pass of asyncio calls, one per item, all started at once, each timed from its start to
its answer, the whole pass cut at a wall-clock cap: an item still waiting then is
``unanswered`` (a hang is a figure, not a stuck bench)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from bench.peers.items import Answer, Pass


async def capped_pass(n: int, one: Callable[[int], Awaitable[Answer]], cap_s: float) -> Pass:
    """``one(i)`` for every ``i < n`` at once; its :class:`Answer` gets its seconds."""
    answers: list[Answer | None] = [None] * n

    async def timed(i: int) -> None:
        t0 = time.perf_counter()
        a = await one(i)
        a.seconds = time.perf_counter() - t0
        answers[i] = a

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(timed(i)) for i in range(n)]
    _, pending = await asyncio.wait(tasks, timeout=cap_s)
    wall = time.perf_counter() - t0
    for t in pending:
        t.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    return Pass([a if a is not None else Answer("unanswered", detail=f"no answer within {cap_s:.0f} s")
                 for a in answers], wall, notes={"cut_at_cap": bool(pending)})
