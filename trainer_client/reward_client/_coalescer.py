"""Coalescing of concurrent async calls into shared requests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from trainer_client.reward_client._chunks import ENVELOPE_BYTES
from trainer_client.reward_client._models import ScoreResult
from trainer_client.reward_client._settings import ClientSettings


class Batch:
    """Items of coalesced calls waiting for their shared request."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.pieces: list[bytes] = []
        self.bytes = 0
        self.done: asyncio.Future[list[ScoreResult]] = loop.create_future()
        # nobody may be left to read a failure (every caller cancelled): mark it read
        self.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.timer: asyncio.TimerHandle | None = None


class Coalescer:
    """Packs concurrent calls of one event loop into shared requests: a call's items join the
    open batch for its ``timeout_s``; the batch is sent ``coalesce_window_s`` after its first
    item, or at once when it holds ``chunk_size`` items or ``max_request_bytes`` bytes. Each
    caller gets its own slice of the results, or the batch's exception. A cancelled caller
    leaves the batch going for the others."""

    def __init__(self, send: Callable[[list[bytes], float | None], Awaitable[list[ScoreResult]]],
                 settings: ClientSettings) -> None:
        self._send = send
        self._s = settings
        self._open: dict[float | None, Batch] = {}
        self._inflight: set[asyncio.Task[None]] = set()

    async def score(self, pieces: list[bytes], timeout_s: float | None) -> list[ScoreResult]:
        batch = self._open.get(timeout_s)
        if batch is None:
            loop = asyncio.get_running_loop()
            batch = self._open[timeout_s] = Batch(loop)
            batch.timer = loop.call_later(self._s.coalesce_window_s, self._flush, timeout_s)
        start = len(batch.pieces)
        batch.pieces.extend(pieces)
        batch.bytes += sum(len(p) + 1 for p in pieces)
        if (len(batch.pieces) >= self._s.chunk_size
                or batch.bytes >= self._s.max_request_bytes - ENVELOPE_BYTES):
            self._flush(timeout_s)
        results = await asyncio.shield(batch.done)
        return results[start:start + len(pieces)]

    def _flush(self, timeout_s: float | None) -> None:
        batch = self._open.pop(timeout_s, None)
        if batch is None:
            return
        if batch.timer is not None:
            batch.timer.cancel()
        task = asyncio.ensure_future(self._run(batch, timeout_s))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _run(self, batch: Batch, timeout_s: float | None) -> None:
        try:
            results = await self._send(batch.pieces, timeout_s)
        except asyncio.CancelledError:  # the loop is closing: so are the callers
            batch.done.cancel()
            raise
        except Exception as e:  # handed to every caller of the batch
            if not batch.done.done():
                batch.done.set_exception(e)
        else:
            if not batch.done.done():
                batch.done.set_result(results)

    async def drain(self) -> None:
        """Send what is open and wait for every batch in flight (before closing the client)."""
        for key in list(self._open):
            self._flush(key)
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)
