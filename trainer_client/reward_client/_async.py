"""The asyncio clients: chunks of one call as tasks, concurrent calls coalesced.

:class:`AsyncClient` is the behaviour over any transport; :class:`AsyncRewardClient` is it
over HTTP (httpx); :mod:`._ray` has it over a Ray Serve deployment handle.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from typing import Any, Self, TypeVar

import httpx

from trainer_client.errors import RewardPayloadTooLarge
from trainer_client.reward_client._base import JSON_HEADERS, ClientBase
from trainer_client.reward_client._chunks import Chunk, as_items, encode
from trainer_client.reward_client._coalescer import Coalescer
from trainer_client.reward_client._models import ScoreItem, ScoreResult
from trainer_client.reward_client._retry import Request, Sleep, Step, ready_plan
from trainer_client.reward_client._settings import (
    ClientSettings,
    RewardClientSettings,
    client_settings,
)

T = TypeVar("T")


class AsyncClient(ClientBase):
    """An asyncio client over the transport that :meth:`_send` speaks, with coalescing:
    concurrent :meth:`score` calls share requests (see ``coalesce_window_s``)."""

    def __init__(self, settings: ClientSettings, *, seed: int | None = None) -> None:
        super().__init__(settings, seed=seed)
        self._coalescer = Coalescer(self._score_pieces, settings)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._coalescer.drain()
        await self._close_transport()

    async def wait_ready(self, timeout_s: float) -> str:
        """Async :meth:`RewardClient.wait_ready`."""
        return await self._drive(ready_plan(self.settings.urls, timeout_s,
                                            self.settings.ready_poll_s,
                                            self.lost + self.retryable))

    async def score(self, items: Sequence[ScoreItem | dict[str, Any]], *,
                    item_timeout_s: float | None = None) -> list[ScoreResult]:
        """Async :meth:`RewardClient.score`; concurrent calls are coalesced."""
        pieces = [encode(it) for it in as_items(items)]
        if not pieces:
            return []
        timeout_s = self._timeout(item_timeout_s)
        if self.settings.coalesce_window_s <= 0:
            return await self._score_pieces(pieces, timeout_s)
        return await self._coalescer.score(pieces, timeout_s)

    async def _score_pieces(self, pieces: list[bytes],
                            timeout_s: float | None) -> list[ScoreResult]:
        chunks = self._chunks(pieces, timeout_s)
        sem = asyncio.Semaphore(self.settings.max_concurrency)

        async def one(c: Chunk) -> list[ScoreResult]:
            async with sem:
                return await self._score_chunk(c)

        if len(chunks) == 1:
            return await self._score_chunk(chunks[0])
        try:  # a failing chunk cancels the others (no orphaned requests)
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(one(c)) for c in chunks]
        except BaseExceptionGroup as eg:
            raise eg.exceptions[0] from None
        return [r for t in tasks for r in t.result()]

    async def _score_chunk(self, chunk: Chunk) -> list[ScoreResult]:
        try:
            return await self._drive(self._plan(chunk))
        except RewardPayloadTooLarge:
            halves = chunk.halves()  # the service's limit is below ours: split and resend
            if halves is None:
                raise
            return [*await self._score_chunk(halves[0]), *await self._score_chunk(halves[1])]

    async def _drive(self, plan: Generator[Step, httpx.Response | None, T]) -> T:
        errors = self.retryable + self.lost
        try:
            step = next(plan)
            while True:
                if isinstance(step, Sleep):
                    await asyncio.sleep(step.seconds)
                    step = plan.send(None)
                    continue
                try:
                    resp = await self._send(step)
                except errors as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(resp)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _send(self, request: Request) -> httpx.Response:
        """The reply to ``request`` (``POST`` of its body, or ``GET`` without one)."""
        raise NotImplementedError

    async def _close_transport(self) -> None:
        raise NotImplementedError


class AsyncRewardClient(AsyncClient):
    """asyncio HTTP client with the same behaviour as :class:`RewardClient` (the same
    arguments), plus coalescing: concurrent :meth:`score` calls share requests (see
    ``coalesce_window_s``)."""

    def __init__(self, settings: RewardClientSettings | str | Sequence[str], *,
                 seed: int | None = None, **overrides: Any) -> None:
        http = client_settings(settings, overrides)
        super().__init__(http, seed=seed)
        self._http = httpx.AsyncClient(timeout=http.timeout.to_httpx(),
                                       headers=self._headers, limits=self._limits)

    async def _send(self, request: Request) -> httpx.Response:
        if request.body is None:
            return await self._http.get(request.url)
        return await self._http.post(request.url, content=request.body, headers=JSON_HEADERS)

    async def _close_transport(self) -> None:
        await self._http.aclose()
