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
- Large batches are split into requests of at most ``chunk_size`` items *and*
  ``max_request_bytes`` bytes (below the service's ``REWARD_MAX_BODY_BYTES``), sent
  concurrently (at most ``max_concurrency`` in flight); results are put back in order. A
  request the service still answers 413 (its limit is lower) is split in two and resent, down
  to a single item, which raises :class:`~trainer_client.errors.RewardPayloadTooLarge`.
- :class:`AsyncRewardClient` coalesces concurrent calls: items of calls made within
  ``coalesce_window_s`` of each other on one event loop travel in shared requests, so a
  framework that awaits one reward per sample (verl's reward loop, TRL's async path) sends a
  few large requests instead of hundreds of one-item ones.
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
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
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
    max_request_bytes: int = 32 * 1024 * 1024  # body bytes per request (service default: 64 MiB)
    item_timeout_s: float | None = None  # per-item scoring deadline sent as "timeout_s"
    ready_poll_s: float = 0.25  # poll interval of wait_ready
    coalesce_window_s: float = 0.005  # async: gather concurrent calls this long; 0 disables

    def __post_init__(self) -> None:
        if not self.urls:
            raise ValueError("at least one URL is needed")
        if self.chunk_size < 1 or self.max_concurrency < 1:
            raise ValueError("chunk_size and max_concurrency must be >= 1")
        if self.max_request_bytes < 1024:
            raise ValueError("max_request_bytes must be >= 1024")
        if self.coalesce_window_s < 0:
            raise ValueError("coalesce_window_s must be >= 0")


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
        out: dict[str, Any] = {"response": self.response, "ground_truth": self.ground_truth}
        for key in ("data_source", "scorer", "id"):
            if (value := getattr(self, key)) is not None:
                out[key] = value
        if self.extra is not None:
            out["extra"] = self.extra
        return out


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


def _encode(item: dict[str, Any]) -> bytes:
    """One item's JSON: orjson (a third of the standard library's time); the standard library
    for what orjson refuses (lone surrogates, huge integers), so that the service answers with
    a 422 naming the field instead of this process raising TypeError."""
    try:
        return orjson.dumps(item)
    except TypeError:
        return json.dumps(item).encode()


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One request's worth of items, already encoded (encoded once, however often sent)."""

    pieces: list[bytes]  # one JSON object per item
    timeout_s: float | None

    @property
    def body(self) -> bytes:
        tail = b"]}" if self.timeout_s is None else b'],"timeout_s":%s}' % _encode(self.timeout_s)
        return b'{"items":[' + b",".join(self.pieces) + tail

    def halves(self) -> tuple[_Chunk, _Chunk] | None:
        if len(self.pieces) < 2:
            return None
        mid = len(self.pieces) // 2
        return _Chunk(self.pieces[:mid], self.timeout_s), _Chunk(self.pieces[mid:], self.timeout_s)


def _pack(pieces: list[bytes], timeout_s: float | None, max_items: int,
          max_bytes: int) -> list[_Chunk]:
    """Cut encoded items into chunks of at most ``max_items`` items and ``max_bytes`` body
    bytes (an item larger than ``max_bytes`` goes alone; the service answers it 413)."""
    budget = max_bytes - 64  # the envelope and timeout_s
    chunks: list[_Chunk] = []
    current: list[bytes] = []
    size = 0
    for piece in pieces:
        if current and (len(current) >= max_items or size + len(piece) + 1 > budget):
            chunks.append(_Chunk(current, timeout_s))
            current, size = [], 0
        current.append(piece)
        size += len(piece) + 1
    if current:
        chunks.append(_Chunk(current, timeout_s))
    return chunks


@dataclass(frozen=True, slots=True)
class _Post:
    url: str
    body: bytes


@dataclass(frozen=True, slots=True)
class _Sleep:
    seconds: float
    attempts: int
    last_error: str


_Step = _Post | _Sleep


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

    def _timeout(self, item_timeout_s: float | None) -> float | None:
        return self.settings.item_timeout_s if item_timeout_s is None else item_timeout_s

    def _chunks(self, pieces: list[bytes], timeout_s: float | None) -> list[_Chunk]:
        return _pack(pieces, timeout_s, self.settings.chunk_size, self.settings.max_request_bytes)

    def _plan(self, chunk: _Chunk) -> Generator[_Step, httpx.Response | None, list[ScoreResult]]:
        """The retry core shared by both clients: yields what to do next (post a body to a
        URL, or sleep); the driver sends back the reply or throws the transport error."""
        att = _Attempts(self.settings, self._preferred, self._rng)
        body = chunk.body
        while True:
            try:
                resp = yield _Post(f"{att.url}/v1/score", body)
            except _RETRY_EXC as e:
                delay = att.failed(f"{type(e).__name__}: {e}", None)
            except httpx.TransportError as e:
                raise att.gave_up(f"{type(e).__name__}: {e}") from e
            else:
                assert resp is not None
                if resp.status_code not in _RETRY_STATUS:
                    results = _check_reply(resp, len(chunk.pieces))
                    self._preferred = att.url_idx
                    return results
                delay = att.failed(f"HTTP {resp.status_code}",
                                   parse_retry_after(resp.headers.get("retry-after")))
            if delay > 0:
                yield _Sleep(delay, att.attempts, att.last_error)


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
        pieces = [_encode(it) for it in _as_items(items)]
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

    def _score_chunk(self, chunk: _Chunk) -> list[ScoreResult]:
        try:
            return self._drive(self._plan(chunk))
        except RewardPayloadTooLarge:
            halves = chunk.halves()  # the service's limit is below ours: split and resend
            if halves is None:
                raise
            return [r for half in halves for r in self._score_chunk(half)]

    def _drive(self, plan: Generator[_Step, httpx.Response | None, list[ScoreResult]]
               ) -> list[ScoreResult]:
        try:
            step = next(plan)
            while True:
                if isinstance(step, _Sleep):
                    if self._stop.wait(step.seconds):
                        raise RewardServiceUnavailable("stopped while retrying",
                                                       attempts=step.attempts,
                                                       last_error=step.last_error)
                    step = plan.send(None)
                    continue
                try:
                    resp = self._http.post(step.url, content=step.body, headers=_JSON)
                except httpx.TransportError as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(resp)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


class AsyncRewardClient(_Base):
    """asyncio client with the same behaviour as :class:`RewardClient`, plus coalescing:
    concurrent :meth:`score` calls share requests (see ``coalesce_window_s``)."""

    def __init__(self, settings: RewardClientSettings, *, seed: int | None = None) -> None:
        super().__init__(settings, seed=seed)
        self._http = httpx.AsyncClient(timeout=settings.timeout.to_httpx(),
                                       headers=self._headers, limits=self._limits)
        self._coalescer = _Coalescer(self._score_pieces, settings)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._coalescer.drain()
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
        """Async :meth:`RewardClient.score`; concurrent calls are coalesced."""
        pieces = [_encode(it) for it in _as_items(items)]
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

        async def one(c: _Chunk) -> list[ScoreResult]:
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

    async def _score_chunk(self, chunk: _Chunk) -> list[ScoreResult]:
        try:
            return await self._drive(self._plan(chunk))
        except RewardPayloadTooLarge:
            halves = chunk.halves()  # the service's limit is below ours: split and resend
            if halves is None:
                raise
            return [*await self._score_chunk(halves[0]), *await self._score_chunk(halves[1])]

    async def _drive(self, plan: Generator[_Step, httpx.Response | None, list[ScoreResult]]
                     ) -> list[ScoreResult]:
        try:
            step = next(plan)
            while True:
                if isinstance(step, _Sleep):
                    await asyncio.sleep(step.seconds)
                    step = plan.send(None)
                    continue
                try:
                    resp = await self._http.post(step.url, content=step.body, headers=_JSON)
                except httpx.TransportError as e:
                    step = plan.throw(e)
                else:
                    step = plan.send(resp)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


class _Batch:
    """Items of coalesced calls waiting for their shared request."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.pieces: list[bytes] = []
        self.bytes = 0
        self.done: asyncio.Future[list[ScoreResult]] = loop.create_future()
        # nobody may be left to read a failure (every caller cancelled): mark it read
        self.done.add_done_callback(lambda f: f.cancelled() or f.exception())
        self.timer: asyncio.TimerHandle | None = None


class _Coalescer:
    """Packs concurrent calls of one event loop into shared requests: a call's items join the
    open batch for its ``timeout_s``; the batch is sent ``coalesce_window_s`` after its first
    item, or at once when it holds ``chunk_size`` items or ``max_request_bytes`` bytes. Each
    caller gets its own slice of the results, or the batch's exception. A cancelled caller
    leaves the batch going for the others."""

    def __init__(self, send: Callable[[list[bytes], float | None], Awaitable[list[ScoreResult]]],
                 settings: RewardClientSettings) -> None:
        self._send = send
        self._s = settings
        self._open: dict[float | None, _Batch] = {}
        self._inflight: set[asyncio.Task[None]] = set()

    async def score(self, pieces: list[bytes], timeout_s: float | None) -> list[ScoreResult]:
        batch = self._open.get(timeout_s)
        if batch is None:
            loop = asyncio.get_running_loop()
            batch = self._open[timeout_s] = _Batch(loop)
            batch.timer = loop.call_later(self._s.coalesce_window_s, self._flush, timeout_s)
        start = len(batch.pieces)
        batch.pieces.extend(pieces)
        batch.bytes += sum(len(p) + 1 for p in pieces)
        if (len(batch.pieces) >= self._s.chunk_size
                or batch.bytes >= self._s.max_request_bytes - 64):
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

    async def _run(self, batch: _Batch, timeout_s: float | None) -> None:
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
