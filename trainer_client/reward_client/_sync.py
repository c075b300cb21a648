"""The synchronous client: chunks of one call on a small thread pool, sleeps on an event."""

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
from trainer_client.reward_client._retry import Sleep, Step, ready_plan
from trainer_client.reward_client._settings import RewardClientSettings

T = TypeVar("T")


class RewardClient(ClientBase):
    """Synchronous client. Thread-safe; chunks of one call run on a small thread pool.

    Args:
        settings: see :class:`RewardClientSettings`.
        stop_event: when set, retry sleeps end and the call raises
            ``RewardServiceUnavailable`` (for a clean shutdown of the caller).
        seed: seed of the backoff jitter (tests).
    """

    def __init__(self, settings: RewardClientSettings | str | Sequence[str], *,
                 stop_event: threading.Event | None = None, seed: int | None = None,
                 **overrides: Any) -> None:
        super().__init__(settings, seed=seed, **overrides)
        self._stop = stop_event or threading.Event()
        self._http = httpx.Client(timeout=self.settings.timeout.to_httpx(),
                                  headers=self._headers, limits=self._limits)
        self._pool = ThreadPoolExecutor(max_workers=self.settings.max_concurrency,
                                        thread_name_prefix="reward-client")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the chunk threads and close connections. Idempotent."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._http.close()

    def wait_ready(self, timeout_s: float) -> str:
        """Poll ``GET /readyz`` on every URL until one answers 200; return that URL.

        Raises ``RewardServiceUnavailable`` after ``timeout_s`` seconds.
        """
        return self._drive(ready_plan(self.settings.urls, timeout_s, self.settings.ready_poll_s))

    def score(self, items: Sequence[ScoreItem | dict[str, Any]], *,
              item_timeout_s: float | None = None) -> list[ScoreResult]:
        """Score ``items``; one result per item, in order (see the module docstring)."""
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
                    resp = (self._http.get(step.url) if step.body is None else
                            self._http.post(step.url, content=step.body, headers=JSON_HEADERS))
                except httpx.TransportError as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(resp)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
