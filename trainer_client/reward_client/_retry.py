"""The retry core shared by the sync and async clients.

The clients' loops are written once, as generators that yield what to do next (a
:class:`Request` to send, or a :class:`Sleep`) and are sent the reply or thrown the transport
error; each client drives them with its own I/O (:mod:`._sync`, :mod:`._async`) over its own
transport (httpx, or a Ray Serve handle: :mod:`._ray`, whose replies come as
``httpx.Response`` too, and whose errors are named by the ``retryable`` and ``lost`` tuples
it passes in).
"""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Generator
from dataclasses import dataclass

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
from trainer_client.reward_client._models import ScoreResult
from trainer_client.reward_client._settings import ClientSettings, RetryPolicy

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({502, 503})
Errors = tuple[type[BaseException], ...]
#: Transport errors after which a request is sent again: it never reached the service, or the
#: service closed the connection without a reply (scoring is idempotent).
RETRY_EXC: Errors = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout,
                     httpx.RemoteProtocolError)
#: Other transport errors: the request may still be worked on (a read timeout); not resent.
LOST_EXC: Errors = (httpx.TransportError,)


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


@dataclass(frozen=True, slots=True)
class Request:
    """Send this: ``POST`` of ``body`` as JSON, or ``GET`` when ``body`` is None."""

    url: str
    body: bytes | None = None


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait this long; a client whose stop event is set meanwhile raises
    ``RewardServiceUnavailable(stopped, attempts=..., last_error=...)``."""

    seconds: float
    attempts: int
    last_error: str
    stopped: str = "stopped while retrying"


Step = Request | Sleep


class Attempts:
    """Bookkeeping of one chunk's attempts over the URLs."""

    def __init__(self, settings: ClientSettings, first_url: int, rng: random.Random):
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


def score_plan(att: Attempts, body: bytes, n_items: int, retryable: Errors = RETRY_EXC,
               lost: Errors = LOST_EXC,
               ) -> Generator[Step, httpx.Response | None, list[ScoreResult]]:
    """One chunk's exchange: post ``body`` until a non-retryable reply, failing over and
    backing off as :class:`Attempts` says; ``att.url_idx`` is the URL that answered."""
    while True:
        try:
            resp = yield Request(f"{att.url}/v1/score", body)
        except retryable as e:
            delay = att.failed(f"{type(e).__name__}: {e}", None)
        except lost as e:
            raise att.gave_up(f"{type(e).__name__}: {e}") from e
        else:
            assert resp is not None
            if resp.status_code not in RETRY_STATUS:
                return check_reply(resp, n_items)
            delay = att.failed(f"HTTP {resp.status_code}",
                               parse_retry_after(resp.headers.get("retry-after")))
        if delay > 0:
            yield Sleep(delay, att.attempts, att.last_error)


def ready_plan(urls: tuple[str, ...], timeout_s: float, poll_s: float,
               errors: Errors = LOST_EXC) -> Generator[Step, httpx.Response | None, str]:
    """``wait_ready``: poll ``GET /readyz`` on every URL until one answers 200 (its URL is
    returned), sleeping ``poll_s`` between rounds; give up after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last = "never polled"
    attempts = 0
    while True:
        for url in urls:
            attempts += 1
            try:
                r = yield Request(f"{url}/readyz")
            except errors as e:
                last = f"{url}: {type(e).__name__}: {e}"
                continue
            assert r is not None
            if r.status_code == 200:
                return url
            last = f"{url}: HTTP {r.status_code}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RewardServiceUnavailable("reward service not ready", attempts=attempts,
                                           last_error=last)
        yield Sleep(min(poll_s, remaining), attempts, last, stopped="reward service not ready")


def check_reply(resp: httpx.Response, n_items: int) -> list[ScoreResult]:
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
