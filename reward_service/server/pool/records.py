"""The pool's records: what ``submit`` takes and returns, and how it tracks a request.

Pure data and two pure functions (``chunk_sizes``, ``deal``); no I/O, no imports from the
rest of the pool.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from reward_service.scorers.base import Verdict

__all__ = ["Chunk", "Outcome", "Pending", "PoolStatus", "Request", "Task", "chunk_sizes", "deal"]


@dataclass(frozen=True, slots=True)
class Task:
    """One item to score."""

    scorer: str
    response: str
    ground_truth: str
    timeout_s: float
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What came back for a task: the verdict and the time it took on a worker."""

    verdict: Verdict
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class PoolStatus:
    active: int
    spare: int
    starting: int
    retiring: int
    outstanding_items: int
    queued_chunks: int
    ready: bool
    draining: bool
    restarts: dict[str, int]
    start_failures: int = 0  # consecutive failed starts of a worker or the zygote
    watchdog_errors: int = 0  # watchdog phases that raised (each logged; the next tick retries)


@dataclass(slots=True, eq=False)
class Request:
    """One ``submit`` call: its outcomes fill in as they come; ``done`` is set by the last."""

    outcomes: list[Outcome | None]
    left: int
    done: asyncio.Future[None]
    cancelled: bool = False
    on_workers: int = 0  # items sent to workers and not answered yet (for fair dispatch)


@dataclass(slots=True, eq=False)
class Pending:
    """One item of a request, from ``submit`` until it is answered."""

    task: Task
    req: Request
    index: int  # position in the request's outcomes
    seq: int
    resolved: bool = False

    @property
    def wanted(self) -> bool:
        """Still worth scoring: not answered, and its request still waits for it."""
        return not self.resolved and not self.req.cancelled

    def resolve(self, verdict: Verdict, elapsed: float) -> bool:
        """Record the outcome; True when it counted (the item was still wanted)."""
        if not self.wanted:
            return False
        self.resolved = True
        req = self.req
        req.outcomes[self.index] = Outcome(verdict, elapsed)
        req.left -= 1
        if req.left == 0 and not req.done.done():
            req.done.set_result(None)
        return True


@dataclass(slots=True, eq=False)
class Chunk:
    """Items sent to a worker in one message; ``done`` of them are answered."""

    items: list[Pending]
    done: int = 0

    @property
    def req(self) -> Request:
        return self.items[0].req


def chunk_sizes(n: int, cap: int, workers: int) -> list[int]:
    """Chunk sizes for a request of ``n`` items: at most ``cap``, shrinking towards the end
    (each chunk at most a quarter of the rest per worker pair), so the request's last items
    are spread over every worker instead of one worker finishing a full chunk, with another
    queued behind it, while the others idle. Sums to ``n``."""
    sizes: list[int] = []
    left = n
    while left > 0:
        size = max(1, min(cap, math.ceil(left / (2 * workers))))
        sizes.append(size)
        left -= size
    return sizes


T = TypeVar("T")


def deal(items: list[T], sizes: list[int]) -> list[list[T]]:
    """``items`` dealt round-robin into chunks of ``sizes`` (non-increasing, summing to
    ``len(items)``): chunk ``c`` takes items ``c``, ``c + k``, ... while it has room. Items
    next to each other in a request tend to cost alike (a GRPO group: one prompt's samples; a
    dataset's hard stretch), so dealing spreads such a run over every chunk, hence every
    worker, instead of leaving one worker with all of it while the others idle at the
    request's end."""
    out: list[list[T]] = [[] for _ in sizes]
    it = iter(items)
    open_ = list(range(len(sizes)))
    while open_:
        still = []
        for c in open_:
            out[c].append(next(it))
            if len(out[c]) < sizes[c]:
                still.append(c)
        open_ = still
    return out
