"""HTTP client for the reward service's ``POST /v1/score`` (sync and async, httpx).

    from trainer_client.reward_client import RewardClient, RewardClientSettings, ScoreItem

    settings = RewardClientSettings(urls=("http://127.0.0.1:8000",))
    with RewardClient(settings) as client:
        client.wait_ready(timeout_s=30)
        results = client.score([ScoreItem(response="7", ground_truth="7", scorer="gsm8k")])
        rewards = [reward_or_none(r) for r in results]      # TRL's list[float | None]

What the client guarantees:

- One :class:`ScoreResult` per item, in the order given, or an exception (see
  :mod:`trainer_client.errors`); never a silently shortened or reordered list.
- Large batches are split into ``chunk_size`` chunks sent concurrently (at most
  ``max_concurrency`` in flight); results are put back in order.
- Retries, with jittered exponential backoff, happen *only* on connect errors (refused,
  connect timeout, pool timeout), on a connection the server closed without a complete
  reply (``RemoteProtocolError``: typically an idle keep-alive connection closed by a
  draining server just as the request went out, which the server never read; scoring is
  idempotent, so resending is safe) and on 502/503, whose ``Retry-After`` is honoured. With
  several URLs a failing URL is failed over to the next one at once; the backoff sleep
  happens after every URL of a round failed. A chunk gives up after
  ``retry.max_attempts`` attempts or ``retry.deadline_s`` seconds, whichever comes first,
  with :class:`~trainer_client.errors.RewardServiceUnavailable`.
- A request whose reply did not come in time (read or write timeout) is *not* resent: the
  service may still be working on it. It raises ``RewardServiceUnavailable`` at once; the
  caller (the trainer) decides when to try again.
- 4xx raise :class:`~trainer_client.errors.RewardRequestError` subclasses, never retried.
- Every network wait is bounded by :class:`Timeout`; sleeps between retries end early when
  the ``stop_event`` given to the client is set.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import random
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Self

import httpx
import orjson

from trainer_client.errors import (
    RewardAuthError,
    RewardPayloadTooLarge,
    RewardProtocolError,
    RewardRequestError,
    RewardServiceUnavailable,
    RewardValidationError,
)

__all__ = [
    "AVAILABLE_STATUSES",
    "AsyncRewardClient",
    "RetryPolicy",
    "RewardClient",
    "RewardClientSettings",
    "ScoreItem",
    "ScoreResult",
    "Status",
    "Timeout",
    "backoff_delay",
    "parse_retry_after",
    "reward_or_none",
]

logger = logging.getLogger(__name__)

Status = Literal["correct", "incorrect", "no_answer", "bad_ground_truth", "timeout", "error"]

#: Statuses whose ``score`` is a real reward. The others (``bad_ground_truth``, ``timeout``,
#: ``error``) mean "could not score": :func:`reward_or_none` maps them to ``None``.
AVAILABLE_STATUSES: frozenset[str] = frozenset({"correct", "incorrect", "no_answer"})

_JSON = {"content-type": "application/json"}
_RETRY_STATUS = frozenset({502, 503})
_RETRY_EXC: tuple[type[Exception], ...] = (httpx.ConnectError, httpx.ConnectTimeout,
                                           httpx.PoolTimeout, httpx.RemoteProtocolError)


@dataclass(frozen=True, kw_only=True)
class Timeout:
    """Per-request network timeouts in seconds (httpx's four phases)."""

    connect: float = 5.0  # TCP connect
    read: float = 120.0  # wait for the reply of one chunk (scoring included)
    write: float = 30.0  # send the body
    pool: float = 10.0  # wait for a free connection from the pool

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write,
                             pool=self.pool)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """When and how long to retry a chunk (connect errors, 502, 503 only)."""

    max_attempts: int = 10  # attempts per chunk over all URLs, the first included
    backoff_initial_s: float = 0.25  # first sleep after a failed round of URLs
    backoff_multiplier: float = 2.0  # growth per round
    backoff_max_s: float = 10.0  # cap on one sleep (before jitter)
    jitter: float = 0.5  # sleep is multiplied by uniform(1 - jitter, 1 + jitter)
    max_retry_after_s: float = 30.0  # cap on an honoured Retry-After
    deadline_s: float = 120.0  # give up on a chunk after this many seconds in total


@dataclass(frozen=True, kw_only=True)
class RewardClientSettings:
    """Everything the client needs; built once at the entry point."""

    urls: tuple[str, ...]  # base URLs, e.g. ("http://10.0.0.5:8000",); tried in order
    timeout: Timeout = field(default_factory=Timeout)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    api_token: str | None = None  # sent as "Authorization: Bearer ..." when set
    chunk_size: int = 512  # items per request
    max_concurrency: int = 4  # chunks in flight at once per call
    item_timeout_s: float | None = None  # per-item scoring deadline sent as "timeout_s"
    ready_poll_s: float = 0.25  # poll interval of wait_ready

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("at least one URL is needed")
        if self.chunk_size < 1 or self.max_concurrency < 1:
            raise ValueError("chunk_size and max_concurrency must be >= 1")


@dataclass(frozen=True, kw_only=True)
class ScoreItem:
    """One response to score; fields as in the API contract."""

    response: str
    ground_truth: str
    data_source: str | None = None
    scorer: str | None = None
    id: str | None = None
    extra: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass(frozen=True, kw_only=True)
class ScoreResult:
    """The service's verdict on one item."""

    score: float
    status: str
    extracted: str | None = None
    scorer: str = ""
    scorer_version: str = ""
    elapsed_s: float = 0.0
    reason: str | None = None
    id: str | None = None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ScoreResult:
        try:
            return cls(score=float(d["score"]), status=str(d["status"]),
                       extracted=d.get("extracted"), scorer=str(d.get("scorer", "")),
                       scorer_version=str(d.get("scorer_version", "")),
                       elapsed_s=float(d.get("elapsed_s", 0.0)), reason=d.get("reason"),
                       id=d.get("id"))
        except (KeyError, TypeError, ValueError) as e:
            raise RewardProtocolError(f"malformed result {str(d)[:200]}: {e}") from e


def reward_or_none(result: ScoreResult) -> float | None:
    """TRL's contract: the score, or ``None`` when the item could not be scored."""
    return result.score if result.status in AVAILABLE_STATUSES else None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def backoff_delay(round_no: int, policy: RetryPolicy, rng: random.Random,
                  retry_after: float | None = None) -> float:
    """Sleep before retry round ``round_no`` (0-based): jittered exponential, at least the
    server's ``Retry-After`` (capped at ``policy.max_retry_after_s``)."""
    base = min(policy.backoff_max_s,
               policy.backoff_initial_s * policy.backoff_multiplier ** round_no)
    delay = base * rng.uniform(1.0 - policy.jitter, 1.0 + policy.jitter)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.max_retry_after_s))
    return delay


class _Attempts:
    """Bookkeeping of one chunk's attempts over the URLs (shared by sync and async)."""

    def __init__(self, settings: RewardClientSettings, first_url: int, rng: random.Random):
        self.s = settings
        self.url_idx = first_url
        self.rng = rng
        self.start = time.monotonic()
        self.attempts = 0
        self.round_no = 0
        self.tried_in_round = 0
        self.retry_after: float | None = None
        self.last_error = ""

    @property
    def url(self) -> str:
        return self.s.urls[self.url_idx]

    def failed(self, error: str, retry_after: float | None) -> float:
        """Record a retryable failure; return the sleep before the next attempt (0 for
        an immediate failover), or raise RewardServiceUnavailable when out of budget."""
        self.attempts += 1
        self.last_error = f"{self.url}: {error}"
        if retry_after is not None:
            self.retry_after = max(self.retry_after or 0.0, retry_after)
        elapsed = time.monotonic() - self.start
        if self.attempts >= self.s.retry.max_attempts or elapsed >= self.s.retry.deadline_s:
            raise RewardServiceUnavailable("reward service unavailable",
                                           attempts=self.attempts, last_error=self.last_error)
        logger.warning("reward request failed, will retry",
                       extra={"url": self.url, "attempt": self.attempts, "error": error[:200]})
        self.url_idx = (self.url_idx + 1) % len(self.s.urls)
        self.tried_in_round += 1
        if self.tried_in_round < len(self.s.urls):
            return 0.0
        delay = backoff_delay(self.round_no, self.s.retry, self.rng, self.retry_after)
        self.round_no += 1
        self.tried_in_round = 0
        self.retry_after = None
        return max(0.0, min(delay, self.s.retry.deadline_s - elapsed))

    def gave_up(self, error: str) -> RewardServiceUnavailable:
        return RewardServiceUnavailable("reward request lost after sending",
                                        attempts=self.attempts + 1, last_error=f"{self.url}: {error}")


def _dumps(body: dict[str, Any]) -> bytes:
    """orjson (a 512-item body in a third of the standard library's time); the standard
    library for what orjson refuses (lone surrogates, huge integers), so that the service
    answers with a 422 naming the field instead of this process raising TypeError."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


def _check_reply(resp: httpx.Response, n_items: int) -> list[ScoreResult]:
    """Map a non-retryable reply to results or to the error tree."""
    code = resp.status_code
    if code == 200:
        try:
            raw = orjson.loads(resp.content)["results"]
        except (ValueError, KeyError, TypeError) as e:
            raise RewardProtocolError(f"bad JSON reply: {resp.text[:200]}") from e
        if not isinstance(raw, list) or len(raw) != n_items:
            got = len(raw) if isinstance(raw, list) else type(raw).__name__
            raise RewardProtocolError(f"expected {n_items} results, got {got}")
        return [ScoreResult.from_json(r) for r in raw]
    kinds: dict[int, type[RewardRequestError]] = {
        401: RewardAuthError, 403: RewardAuthError, 413: RewardPayloadTooLarge,
        422: RewardValidationError,
    }
    if code in kinds:
        raise kinds[code]("request rejected", status_code=code, body=resp.text)
    if 400 <= code < 500:
        raise RewardRequestError("request rejected", status_code=code, body=resp.text)
    raise RewardProtocolError(f"unexpected HTTP {code}: {resp.text[:200]}")


def _as_items(items: Iterable[ScoreItem | dict[str, Any]]) -> list[dict[str, Any]]:
    return [it.to_json() if isinstance(it, ScoreItem) else dict(it) for it in items]


class _Base:
    def __init__(self, settings: RewardClientSettings, *, seed: int | None = None) -> None:
        self.settings = settings
        self._preferred = 0  # index of the URL that last answered
        self._rng = random.Random(seed)
        self._headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token \
            else {}
        self._limits = httpx.Limits(max_connections=max(8, 2 * settings.max_concurrency),
                                    max_keepalive_connections=max(4, settings.max_concurrency))

    def _body(self, chunk: list[dict[str, Any]], item_timeout_s: float | None) -> bytes:
        body: dict[str, Any] = {"items": chunk}
        t = self.settings.item_timeout_s if item_timeout_s is None else item_timeout_s
        if t is not None:
            body["timeout_s"] = t
        return _dumps(body)

    def _chunks(self, payload: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
        n = self.settings.chunk_size
        return [payload[i:i + n] for i in range(0, len(payload), n)]


class RewardClient(_Base):
    """Synchronous client. Thread-safe; chunks of one call run on a small thread pool.

    Args:
        settings: see :class:`RewardClientSettings`.
        stop_event: when set, retry sleeps end and the call raises
            ``RewardServiceUnavailable`` (for a clean shutdown of the caller).
        seed: seed of the backoff jitter (tests).
    """

    def __init__(self, settings: RewardClientSettings, *,
                 stop_event: threading.Event | None = None, seed: int | None = None) -> None:
        super().__init__(settings, seed=seed)
        self._stop = stop_event or threading.Event()
        self._http = httpx.Client(timeout=settings.timeout.to_httpx(), headers=self._headers,
                                  limits=self._limits)
        self._pool = ThreadPoolExecutor(max_workers=settings.max_concurrency,
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
        deadline = time.monotonic() + timeout_s
        last = "never polled"
        attempts = 0
        while True:
            for url in self.settings.urls:
                attempts += 1
                try:
                    r = self._http.get(f"{url}/readyz")
                    if r.status_code == 200:
                        return url
                    last = f"{url}: HTTP {r.status_code}"
                except httpx.TransportError as e:
                    last = f"{url}: {type(e).__name__}: {e}"
            if time.monotonic() >= deadline or self._stop.wait(
                    min(self.settings.ready_poll_s, max(0.0, deadline - time.monotonic()))):
                raise RewardServiceUnavailable("reward service not ready", attempts=attempts,
                                               last_error=last)

    def score(self, items: Sequence[ScoreItem | dict[str, Any]], *,
              item_timeout_s: float | None = None) -> list[ScoreResult]:
        """Score ``items``; one result per item, in order (see the module docstring)."""
        chunks = self._chunks(_as_items(items))
        if not chunks:
            return []
        if len(chunks) == 1:
            return self._score_chunk(chunks[0], item_timeout_s)
        futures = [self._pool.submit(self._score_chunk, c, item_timeout_s) for c in chunks]
        out: list[ScoreResult] = []
        for f in futures:
            out.extend(f.result())  # re-raises the first failing chunk's error, in order
        return out

    def _score_chunk(self, chunk: list[dict[str, Any]],
                     item_timeout_s: float | None) -> list[ScoreResult]:
        att = _Attempts(self.settings, self._preferred, self._rng)
        body = self._body(chunk, item_timeout_s)
        while True:
            try:
                resp = self._http.post(f"{att.url}/v1/score", content=body, headers=_JSON)
            except _RETRY_EXC as e:
                delay = att.failed(f"{type(e).__name__}: {e}", None)
            except httpx.TransportError as e:
                raise att.gave_up(f"{type(e).__name__}: {e}") from e
            else:
                if resp.status_code not in _RETRY_STATUS:
                    results = _check_reply(resp, len(chunk))
                    self._preferred = att.url_idx
                    return results
                delay = att.failed(f"HTTP {resp.status_code}",
                                   parse_retry_after(resp.headers.get("retry-after")))
            if delay > 0 and self._stop.wait(delay):
                raise RewardServiceUnavailable("stopped while retrying", attempts=att.attempts,
                                               last_error=att.last_error)


class AsyncRewardClient(_Base):
    """asyncio client with the same behaviour as :class:`RewardClient`."""

    def __init__(self, settings: RewardClientSettings, *, seed: int | None = None) -> None:
        super().__init__(settings, seed=seed)
        self._http = httpx.AsyncClient(timeout=settings.timeout.to_httpx(),
                                       headers=self._headers, limits=self._limits)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def wait_ready(self, timeout_s: float) -> str:
        """Async :meth:`RewardClient.wait_ready`."""
        deadline = time.monotonic() + timeout_s
        last = "never polled"
        attempts = 0
        while True:
            for url in self.settings.urls:
                attempts += 1
                try:
                    r = await self._http.get(f"{url}/readyz")
                    if r.status_code == 200:
                        return url
                    last = f"{url}: HTTP {r.status_code}"
                except httpx.TransportError as e:
                    last = f"{url}: {type(e).__name__}: {e}"
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RewardServiceUnavailable("reward service not ready", attempts=attempts,
                                               last_error=last)
            await asyncio.sleep(min(self.settings.ready_poll_s, remaining))

    async def score(self, items: Sequence[ScoreItem | dict[str, Any]], *,
                    item_timeout_s: float | None = None) -> list[ScoreResult]:
        """Async :meth:`RewardClient.score`."""
        chunks = self._chunks(_as_items(items))
        sem = asyncio.Semaphore(self.settings.max_concurrency)

        async def one(c: list[dict[str, Any]]) -> list[ScoreResult]:
            async with sem:
                return await self._score_chunk(c, item_timeout_s)

        try:  # a failing chunk cancels the others (no orphaned requests)
            async with asyncio.TaskGroup() as tg:
                tasks = [tg.create_task(one(c)) for c in chunks]
        except BaseExceptionGroup as eg:
            raise eg.exceptions[0] from None
        return [r for t in tasks for r in t.result()]

    async def _score_chunk(self, chunk: list[dict[str, Any]],
                           item_timeout_s: float | None) -> list[ScoreResult]:
        att = _Attempts(self.settings, self._preferred, self._rng)
        body = self._body(chunk, item_timeout_s)
        while True:
            try:
                resp = await self._http.post(f"{att.url}/v1/score", content=body,
                                             headers=_JSON)
            except _RETRY_EXC as e:
                delay = att.failed(f"{type(e).__name__}: {e}", None)
            except httpx.TransportError as e:
                raise att.gave_up(f"{type(e).__name__}: {e}") from e
            else:
                if resp.status_code not in _RETRY_STATUS:
                    results = _check_reply(resp, len(chunk))
                    self._preferred = att.url_idx
                    return results
                delay = att.failed(f"HTTP {resp.status_code}",
                                   parse_retry_after(resp.headers.get("retry-after")))
            if delay > 0:
                await asyncio.sleep(delay)
