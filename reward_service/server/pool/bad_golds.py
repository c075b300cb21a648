"""Ground truths that could not be parsed within an item's deadline, remembered a while.

A GRPO group of 64 samples shares one ground truth. When that gold cannot be parsed in time
(``2^{2^{2^{2^{20}}}}``), every item of the group used to pay its own deadline, one after the
other, and came back ``timeout``, blaming each response. Now the worker says when it starts
and ends parsing a ground truth it has not parsed before (``phase`` frames, see
``sandboxed/worker.py``); when the watchdog kills a worker for a deadline passed *inside*
that phase, the scheduler answers that item ``bad_ground_truth`` and remembers the gold here
(its scorer and a digest of its text) for ``REWARD_BAD_GOLD_MEMORY_S``. Every other item
with that gold, queued, handed back by the dead worker, or submitted later, is answered
``bad_ground_truth`` at once, with the reason, without reaching a worker. Items already on
another worker's pipe may still cost that worker one deadline: at most one per worker.

Bounded: at most ``max_entries`` golds (the oldest forgotten first), 16-byte keys. An entry
expires, so a gold that missed its deadline on an overloaded machine is tried again later.
A worker can only name the item it holds (the crew kills one that names another), so a
compromised worker can mark only the golds of the items it was given.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable

from reward_service.scorers.base import Verdict
from reward_service.server.pool.records import Pending, Task

__all__ = ["BadGolds"]


def _key(task: Task) -> tuple[str, bytes]:
    digest = hashlib.blake2b(task.ground_truth.encode("utf-8", "surrogatepass"), digest_size=16)
    return task.scorer, digest.digest()


class BadGolds:
    """``(scorer, ground truth)`` → (when it expires, the verdict its items get)."""

    def __init__(self, ttl_s: float, max_entries: int = 4096) -> None:
        self._ttl = ttl_s
        self._max = max_entries
        self._golds: OrderedDict[tuple[str, bytes], tuple[float, Verdict]] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self._golds)

    def add(self, task: Task, took_s: float) -> Verdict:
        """The verdict of the item whose gold parse ran past its deadline; remembers the gold
        (unless the memory is off: ``ttl_s`` 0)."""
        verdict = Verdict("bad_ground_truth", reason=(
            f"the ground truth could not be parsed and evaluated within the item's deadline "
            f"({task.timeout_s:g}s; parsing took {took_s:.1f}s before the worker was stopped)"))
        if self._ttl > 0:
            self._golds[_key(task)] = (time.monotonic() + self._ttl, Verdict(
                "bad_ground_truth", reason=(
                    f"the ground truth could not be parsed and evaluated within "
                    f"{task.timeout_s:g}s for an earlier item that shares it; not tried again "
                    f"for {self._ttl:g}s")))
            while len(self._golds) > self._max:
                self._golds.popitem(last=False)
        return verdict

    def settle(self, p: Pending, resolve: Callable[[Pending, Verdict, float], None]) -> bool:
        """Answer ``p`` (through ``resolve``) at once if its gold is remembered."""
        verdict = self.verdict(p.task)
        if verdict is not None:
            resolve(p, verdict, 0.0)
        return verdict is not None

    def verdict(self, task: Task) -> Verdict | None:
        """The answer for an item whose gold is remembered, else None."""
        key = _key(task)
        hit = self._golds.get(key)
        if hit is None:
            return None
        if hit[0] < time.monotonic():
            del self._golds[key]
            return None
        return hit[1]
