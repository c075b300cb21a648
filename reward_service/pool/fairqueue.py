"""The queue of chunks waiting for a worker, fair between requests.

Each request keeps its own FIFO of chunks. The next free worker slot goes to the request with
the fewest items on workers right now (ties: the request that came first). So a new small
request is served at the next free slot, whatever another client has queued; two big
requests share the workers evenly; and one request alone is served in order, exactly as a
plain FIFO would (no loss of throughput).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from reward_service.pool.records import Chunk, Pending, Request

__all__ = ["FairQueue"]


class FairQueue:
    """Chunks by request; ``pop`` picks the least-served request."""

    def __init__(self) -> None:
        self._by_req: dict[Request, deque[Chunk]] = {}  # insertion order = arrival order
        self._chunks = 0

    def __len__(self) -> int:
        return self._chunks

    def push(self, chunk: Chunk) -> None:
        """A new chunk, at the back of its request's queue."""
        self._by_req.setdefault(chunk.req, deque()).append(chunk)
        self._chunks += 1

    def push_front(self, items: list[Pending]) -> None:
        """Items taken back from a dead worker: first in line within their requests."""
        by_req: dict[Request, list[Pending]] = {}
        for p in items:
            by_req.setdefault(p.req, []).append(p)
        for req, mine in by_req.items():
            self._by_req.setdefault(req, deque()).appendleft(Chunk(mine))
            self._chunks += 1

    def pop(self) -> Chunk | None:
        """The next chunk to send, from the request with the fewest items on workers; None
        when nothing is queued. Requests that were cancelled lose their chunks here."""
        best: Request | None = None
        for req in list(self._by_req):
            if req.cancelled:
                self._chunks -= len(self._by_req.pop(req))
                continue
            if best is None or req.on_workers < best.on_workers:
                best = req
        if best is None:
            return None
        chunks = self._by_req[best]
        chunk = chunks.popleft()
        if not chunks:
            del self._by_req[best]
        self._chunks -= 1
        return chunk

    def drain(self) -> Iterator[Chunk]:
        """Take every queued chunk (to fail them)."""
        while self._by_req:
            _, chunks = self._by_req.popitem()
            self._chunks -= len(chunks)
            yield from chunks
