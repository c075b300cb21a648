"""The synchronous clients: chunks of one call on a small thread pool, sleeps on an event.

:class:`SyncClient` is the behaviour (chunking, 413 splitting, retries, the stop event) over
any transport; :class:`RewardClient` is it over HTTP (httpx). The Ray Serve handle client
(:mod:`._ray`) is the same behaviour over a deployment handle.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self, TypeVar

import httpx

from trainer_client.errors import RewardPayloadTooLarge, RewardServiceUnavailable
from trainer_client.reward_client._base import JSON_HEADERS, ClientBase
from trainer_client.reward_client._chunks import Chunk, as_items, encode
from trainer_client.reward_client._models import ScoreItem, ScoreResult
from trainer_client.reward_client._retry import Request, Sleep, Step, ready_plan
from trainer_client.reward_client._settings import (
    ClientSettings,
    RewardClientSettings,
    client_settings,
)

T = TypeVar("T")


class SyncClient(ClientBase):
    """A synchronous client over the transport that :meth:`_send` speaks. Thread-safe; chunks
    of one call run on a small thread pool."""

    def __init__(self, settings: ClientSettings, *,
                 stop_event: threading.Event | None = None, seed: int | None = None) -> None:
        super().__init__(settings, seed=seed)
        self._stop = stop_event or threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency,
                                        thread_name_prefix="reward-client")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the chunk threads and close the transport. Idempotent."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._close_transport()

    def wait_ready(self, timeout_s: float) -> str:
        """Poll readiness (``GET /readyz``) on every URL until one is ready; return that URL.

        Raises ``RewardServiceUnavailable`` after ``timeout_s`` seconds.
        """
        return self._drive(ready_plan(self.settings.urls, timeout_s,
                                      self.settings.ready_poll_s, self.lost + self.retryable))

    def score(self, items: Sequence[ScoreItem | dict[str, Any]], *,
              item_timeout_s: float | None = None) -> list[ScoreResult]:
        """Score ``items``; one result per item, in order (see the package docstring)."""
        pieces = [encode(it) for it in as_items(items)]
        chunks = self._chunks(pieces, self._timeout(item_timeout_s))
        if not chunks:
            return []
        if len(chunks) == 1:
            return self._score_chunk(chunks[0])
        futures = [self._pool.submit(self._score_chunk, c) for c in chunks]
        out: list[ScoreResult] = []
        for f in futures:
            out.extend(f.result())  # re-raises the first failing chunk's error, in order
        return out

    def _score_chunk(self, chunk: Chunk) -> list[ScoreResult]:
        try:
            return self._drive(self._plan(chunk))
        except RewardPayloadTooLarge:
            halves = chunk.halves()  # the service's limit is below ours: split and resend
            if halves is None:
                raise
            return [r for half in halves for r in self._score_chunk(half)]

    def _drive(self, plan: Generator[Step, httpx.Response | None, T]) -> T:
        errors = self.retryable + self.lost
        try:
            step = next(plan)
            while True:
                if isinstance(step, Sleep):
                    if self._stop.wait(step.seconds):
                        raise RewardServiceUnavailable(step.stopped, attempts=step.attempts,
                                                       last_error=step.last_error)
                    step = plan.send(None)
                    continue
                try:
                    resp = self._send(step)
                except errors as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(resp)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _send(self, request: Request) -> httpx.Response:
        """The reply to ``request`` (``POST`` of its body, or ``GET`` without one)."""
        raise NotImplementedError

    def _close_transport(self) -> None:
        raise NotImplementedError


class RewardClient(SyncClient):
    """Synchronous HTTP client. Thread-safe; chunks of one call run on a small thread pool.

    Args:
        settings: a URL (``"http://127.0.0.1:8000"``), a list of URLs, or
            :class:`RewardClientSettings`; keyword ``overrides`` (``api_token=...``,
            ``chunk_size=...``) are applied to them.
        stop_event: when set, retry sleeps end and the call raises
            ``RewardServiceUnavailable`` (for a clean shutdown of the caller).
        seed: seed of the backoff jitter (tests).
    """

    def __init__(self, settings: RewardClientSettings | str | Sequence[str], *,
                 stop_event: threading.Event | None = None, seed: int | None = None,
                 **overrides: Any) -> None:
        http = client_settings(settings, overrides)
        super().__init__(http, stop_event=stop_event, seed=seed)
        self._http = httpx.Client(timeout=http.timeout.to_httpx(), headers=self._headers,
                                  limits=self._limits)

    def _send(self, request: Request) -> httpx.Response:
        if request.body is None:
            return self._http.get(request.url)
        return self._http.post(request.url, content=request.body, headers=JSON_HEADERS)

    def _close_transport(self) -> None:
        self._http.close()
