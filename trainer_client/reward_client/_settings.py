"""The client's settings: network timeouts, the retry policy, and the limits of a request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import httpx


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
class ClientSettings:
    """What every client shares, whatever carries its requests (HTTP, a Ray Serve handle).
    Each kind adds ``urls``: where its requests go, in the order tried (the names that
    errors and ``wait_ready`` give)."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    api_token: str | None = None  # sent as "Authorization: Bearer ..." when set
    chunk_size: int = 512  # items per request
    max_concurrency: int = 4  # chunks in flight at once per call
    max_request_bytes: int = 32 * 1024 * 1024  # body bytes per request (service default: 64 MiB)
    item_timeout_s: float | None = None  # per-item scoring deadline sent as "timeout_s"
    ready_poll_s: float = 0.25  # poll interval of wait_ready
    coalesce_window_s: float = 0.005  # async: gather concurrent calls this long; 0 disables

    if TYPE_CHECKING:  # declared for the type checker only: each kind defines it
        @property
        def urls(self) -> tuple[str, ...]: ...

    def __post_init__(self) -> None:
        if self.chunk_size < 1 or self.max_concurrency < 1:
            raise ValueError("chunk_size and max_concurrency must be >= 1")
        if self.max_request_bytes < 1024:
            raise ValueError("max_request_bytes must be >= 1024")
        if self.coalesce_window_s < 0:
            raise ValueError("coalesce_window_s must be >= 0")


@dataclass(frozen=True, kw_only=True)
class RewardClientSettings(ClientSettings):
    """Everything the HTTP client needs; built once at the entry point."""

    urls: tuple[str, ...]  # base URLs, e.g. ("http://10.0.0.5:8000",); tried in order
    timeout: Timeout = field(default_factory=Timeout)

    def __post_init__(self) -> None:
        if isinstance(self.urls, str):  # urls="http://..." is one URL, not 20 one-letter ones
            object.__setattr__(self, "urls", (self.urls,))
        elif isinstance(self.urls, Sequence):
            object.__setattr__(self, "urls", tuple(self.urls))
        else:
            raise TypeError(f"urls must be a URL or a sequence of URLs, not {type(self.urls).__name__}")
        if not self.urls:
            raise ValueError("at least one URL is needed")
        for url in self.urls:
            if not isinstance(url, str):
                raise TypeError(f"a URL must be a str, not {type(url).__name__}: {url!r}")
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"not an http(s) URL: {url!r}")
        super().__post_init__()


def client_settings(target: RewardClientSettings | str | Sequence[str],
                    overrides: dict[str, Any]) -> RewardClientSettings:
    """What a client was given: its settings, or a URL (or URLs) to build them from, with
    ``overrides`` (``api_token=...``, ``chunk_size=...``) applied; a clear ``TypeError`` for
    anything else (``RewardClient(8000)``, ``RewardClient({"urls": ...})``)."""
    if isinstance(target, RewardClientSettings):
        return replace(target, **overrides) if overrides else target
    if isinstance(target, str) or (isinstance(target, Sequence) and not isinstance(target, bytes)
                                   and target and all(isinstance(u, str) for u in target)):
        return RewardClientSettings(urls=target, **overrides)  # type: ignore[arg-type]
    raise TypeError("a reward client takes a URL such as 'http://127.0.0.1:8000', a list of "
                    f"URLs, or RewardClientSettings; got {type(target).__name__}: {target!r:.80}")
