"""Pack many small concurrent submissions into shared pool submissions (group commit).

OpenRLHF ≥ 0.9.1 sends one ``/get_reward`` per sample, 256+ at once, each on a new
connection; verl's and TRL's per-sample paths look the same without a coalescing client. The
pool sends each submission to the workers as its own chunk, so one-item requests cost one
pipe round trip each. :class:`Coalescer` sits in front of ``WorkerPool.submit``: a small
submission joins the pending group; a group is submitted at the next event-loop turn while
fewer than ``max_inflight`` groups are in the pool, else as soon as one of them comes back
(the workers are busy meanwhile, so waiting costs nothing). An idle service adds no delay.

A caller cancelled before its group is submitted (its client disconnected) is taken out of
the group; once submitted, its items are scored for the others, and a group whose callers
are all gone is cancelled (its queued chunks are withdrawn by the pool). Submissions of
``max_items`` or more go to the pool directly, as before.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

__all__ = ["Coalescer"]

T = TypeVar("T")
R = TypeVar("R")


class _Waiter(Generic[T, R]):
    __slots__ = ("future", "tasks")

    def __init__(self, tasks: Sequence[T], future: asyncio.Future[list[R]]) -> None:
        self.tasks = tasks
        self.future = future


class Coalescer(Generic[T, R]):
    """``await coalescer.submit(tasks)`` behaves like ``await submit(tasks)``."""

    def __init__(self, submit: Callable[[list[T]], Awaitable[list[R]]], *, max_items: int,
                 max_inflight: int) -> None:
        self._submit = submit
        self._max_items = max_items
        self._max_inflight = max_inflight
        self._pending: list[_Waiter[T, R]] = []
        self._pending_items = 0
        self._inflight: set[asyncio.Task[None]] = set()
        self._scheduled = False

    async def submit(self, tasks: Sequence[T]) -> list[R]:
        if len(tasks) >= self._max_items:
            return await self._submit(list(tasks))
        waiter: _Waiter[T, R] = _Waiter(tasks, asyncio.get_running_loop().create_future())
        self._pending.append(waiter)
        self._pending_items += len(tasks)
        self._kick()
        try:
            return await asyncio.shield(waiter.future)
        except asyncio.CancelledError:
            if waiter in self._pending:  # not submitted yet: withdraw it
                self._pending.remove(waiter)
                self._pending_items -= len(tasks)
            waiter.future.cancel()
            raise

    def _kick(self) -> None:
        if not self._scheduled and self._pending:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._scheduled = False
        while self._pending and len(self._inflight) < self._max_inflight:
            group: list[_Waiter[T, R]] = []
            n = 0
            while self._pending and (not group or n + len(self._pending[0].tasks)
                                     <= self._max_items):
                waiter = self._pending.pop(0)
                group.append(waiter)
                n += len(waiter.tasks)
            self._pending_items -= n
            task = asyncio.ensure_future(self._run(group))
            self._inflight.add(task)
            leave = functools.partial(self._left, group, task)
            for waiter in group:  # the last caller to leave cancels the group
                waiter.future.add_done_callback(leave)

    @staticmethod
    def _left(group: list[_Waiter[T, R]], task: asyncio.Task[None],
              _done: asyncio.Future[list[R]]) -> None:
        if all(w.future.cancelled() for w in group) and not task.done():
            task.cancel()

    async def _run(self, group: list[_Waiter[T, R]]) -> None:
        try:
            outcomes = await self._submit([t for w in group for t in w.tasks])
        except asyncio.CancelledError:
            for w in group:
                w.future.cancel()
        except Exception as exc:  # each caller gets the pool's error (overloaded, draining)
            for w in group:
                if not w.future.done():
                    w.future.set_exception(exc)
        else:
            i = 0
            for w in group:
                if not w.future.done():
                    w.future.set_result(outcomes[i:i + len(w.tasks)])
                i += len(w.tasks)
        finally:
            self._inflight.discard(asyncio.current_task())  # type: ignore[arg-type]
            self._kick()
