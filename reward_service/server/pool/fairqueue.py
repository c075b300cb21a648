"""The queue of chunks waiting for a worker, fair between requests.

Each request keeps its own FIFO of chunks. The next free worker slot goes to the request with
the fewest items on workers right now (ties: the request that came first). So a new small
request is served at the next free slot, whatever another client has queued; two big
requests share the workers evenly; and one request alone is served in order, exactly as a
plain FIFO would (no loss of throughput).

``pop`` can also be asked for at most so many items, from a request not already in the
worker message being packed: the scheduler packs many small requests (one item each, as
OpenRLHF and slime send them) into one message per worker, still least-served first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container, Iterator

from reward_service.server.pool.records import Chunk, Pending, Request

__all__ = ["FairQueue"]


class FairQueue:
    """Chunks by request; ``pop`` picks the least-served request."""

    def __init__(self) -> None:
        self._by_req: dict[Request, deque[Chunk]] = {}  # insertion order = arrival order
        self._chunks = 0
        self.items = 0  # items in the queued chunks

    def __len__(self) -> int:
        return self._chunks

    def push(self, chunk: Chunk) -> None:
        """A new chunk (of one request), at the back of its request's queue."""
        self._by_req.setdefault(chunk.req, deque()).append(chunk)
        self._chunks += 1
        self.items += len(chunk.items)

    def push_front(self, items: list[Pending]) -> None:
        """Items taken back from a dead worker: first in line within their requests."""
        by_req: dict[Request, list[Pending]] = {}
        for p in items:
            by_req.setdefault(p.req, []).append(p)
        for req, mine in by_req.items():
            self._by_req.setdefault(req, deque()).appendleft(Chunk(mine))
            self._chunks += 1
            self.items += len(mine)

    def pop(self, max_items: int | None = None,
            exclude: Container[Request] = ()) -> Chunk | None:
        """The next chunk to send, from the request with the fewest items on workers (not one
        in ``exclude``), cut to ``max_items`` (the rest stays first in line); None when
        nothing is queued. Requests that were cancelled lose their chunks here."""
        best: Request | None = None
        for req in list(self._by_req):
            if req.cancelled:
                dropped = self._by_req.pop(req)
                self._chunks -= len(dropped)
                self.items -= sum(len(c.items) for c in dropped)
                continue
            if req not in exclude and (best is None or req.on_workers < best.on_workers):
                best = req
        if best is None:
            return None
        chunks = self._by_req[best]
        chunk = chunks[0]
        if max_items is not None and len(chunk.items) > max_items:
            head = Chunk(chunk.items[:max_items])
            chunk.items = chunk.items[max_items:]
            self.items -= max_items
            return head
        chunks.popleft()
        if not chunks:
            del self._by_req[best]
        self._chunks -= 1
        self.items -= len(chunk.items)
        return chunk

    def drain(self) -> Iterator[Chunk]:
        """Take every queued chunk (to fail them)."""
        while self._by_req:
            _, chunks = self._by_req.popitem()
            self._chunks -= len(chunks)
            self.items -= sum(len(c.items) for c in chunks)
            yield from chunks
