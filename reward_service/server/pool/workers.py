"""The supervisor's record of one worker process (``Worker``) and its states; the crew
(``crew.py``) owns them, the scheduler reads their queues of chunks."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from reward_service.server.pool.channel import WorkerChannel
from reward_service.server.pool.records import Chunk, Pending

__all__ = ["Worker", "WorkerState"]

WorkerState = Literal["starting", "spare", "active", "retiring", "stopping", "dead"]


@dataclass(slots=True, eq=False)
class Worker:
    """One worker process as the supervisor sees it."""

    spawn_id: int
    started_at: float
    ch: WorkerChannel | None = None
    state: WorkerState = "starting"
    inflight: deque[Chunk] = field(default_factory=deque)
    by_seq: dict[int, Pending] = field(default_factory=dict)
    since: float = 0.0  # when its current item started
    gold_seq: int = -1  # the item whose ground truth it is parsing (a ``phase`` frame), if any
    stop_deadline: float = 0.0
    items_done: int = 0
    rss_checked_at: float = 0.0
    fatal: str | None = None

    @property
    def pid(self) -> int | None:
        return self.ch.pid if self.ch is not None else None

    def current(self) -> Pending | None:
        if not self.inflight:
            return None
        chunk = self.inflight[0]
        return chunk.items[chunk.done]

