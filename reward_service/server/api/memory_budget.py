"""One budget for the request and reply bytes the server holds for its clients.

Two kinds of bytes count against ``REWARD_MAX_INFLIGHT_BODY_BYTES``:

* request bodies being read or handled (reserved by ``api.guards.BodyLimitMiddleware`` as
  they arrive, released when the request is answered);
* reply bytes that a slow (or stopped) reader has not taken: the write buffer of every
  connection whose transport has paused writing (``api/http_limits.py`` adds a connection at
  ``pause_writing`` and removes it at ``resume_writing`` or when it is lost).

A body that would take the total over the budget is refused (503 + Retry-After); a reply that
takes it over aborts its own connection (the reader is not reading, and the server will not
hold the bytes for it).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["MemoryBudget", "Stalled"]


class Stalled(Protocol):
    """A connection holding reply bytes its client has not read."""

    def unsent_bytes(self) -> int: ...


class MemoryBudget:
    """Bytes of bodies reserved plus the write buffers of stalled connections."""

    __slots__ = ("bodies", "limit", "stalled")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bodies = 0  # bytes of request bodies reserved now
        self.stalled: set[Stalled] = set()  # connections whose transport paused writing

    def unsent(self) -> int:
        """Reply bytes waiting in the write buffers of stalled connections."""
        return sum(c.unsent_bytes() for c in self.stalled)

    def used(self) -> int:
        return self.bodies + (self.unsent() if self.stalled else 0)

    def reserve(self, n: int) -> bool:
        """Reserve ``n`` more body bytes; False (nothing reserved) when over the budget."""
        if self.used() + n > self.limit:
            return False
        self.bodies += n
        return True

    def release(self, n: int) -> None:
        self.bodies -= n

    def over(self) -> bool:
        return self.used() > self.limit
