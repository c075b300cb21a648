"""What every framework adapter shares: where the service is, one client per process, and
turning framework values (numpy scalars, chat messages, None) into request fields.

The environment is read here because these adapters *are* the entry point: a framework
imports them by name and calls them with its own arguments, so there is no other place to
configure them. Explicit arguments always win over the environment.

=========================  =============================================================
``REWARD_SERVICE_URL``     base URL(s) of the service, comma-separated for failover
``REWARD_SERVICE_TOKEN``   bearer token, when the service has ``REWARD_API_TOKEN`` set
=========================  =============================================================
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import math
import os
import threading
import weakref
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from trainer_client.reward_client import (
    AsyncRewardClient,
    RetryPolicy,
    RewardClient,
    RewardClientSettings,
    Timeout,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_READ_TIMEOUT_S",
    "ENV_TOKEN",
    "ENV_URL",
    "SCORER_OPTION_KEYS",
    "aclose_clients",
    "async_client",
    "close_clients",
    "completion_text",
    "ground_truth_text",
    "make_settings",
    "scorer_options",
    "sync_client",
]

ENV_URL = "REWARD_SERVICE_URL"
ENV_TOKEN = "REWARD_SERVICE_TOKEN"

#: Keys of a per-item mapping (verl's ``extra_info``) forwarded as scorer options.
SCORER_OPTION_KEYS: tuple[str, ...] = ("rel_tol", "abs_tol", "choices")

#: Items per HTTP request. The service's default ``REWARD_MAX_ITEMS`` is 16384, so a trainer's
#: batch goes in one request (the service dedups and groups by gold across all of it).
DEFAULT_CHUNK_SIZE = 16384
#: A whole batch is scored before the reply; adversarial items cost up to their deadline each.
DEFAULT_READ_TIMEOUT_S = 600.0


def make_settings(url: str | Sequence[str] | None = None, *, api_token: str | None = None,
                  timeout_s: float | None = None, chunk_size: int | None = None,
                  read_timeout_s: float | None = None,
                  retry_deadline_s: float | None = None) -> RewardClientSettings:
    """Client settings from arguments, falling back to ``REWARD_SERVICE_URL``/``_TOKEN``.

    Per-sample adapters call this once per sample: the result is remembered per arguments
    and environment (a few hundred bytes each)."""
    if url is None:
        url = os.environ.get(ENV_URL, "")
    key = (url if isinstance(url, str) else tuple(url), api_token, timeout_s, chunk_size,
           read_timeout_s, retry_deadline_s, os.environ.get(ENV_TOKEN))
    return _settings(*key)


@functools.lru_cache(maxsize=64)
def _settings(url: str | tuple[str, ...], api_token: str | None, timeout_s: float | None,
              chunk_size: int | None, read_timeout_s: float | None,
              retry_deadline_s: float | None, env_token: str | None) -> RewardClientSettings:
    urls = [url] if isinstance(url, str) else list(url)
    urls = [u.strip().rstrip("/") for part in urls for u in str(part).split(",") if u.strip()]
    if not urls:
        raise ValueError(
            f"no reward service URL: set {ENV_URL}=http://HOST:PORT or pass url=... "
            "(in verl: custom_reward_function.reward_kwargs.url)"
        )
    for u in urls:
        if not u.startswith(("http://", "https://")):
            raise ValueError(f"reward service URL {u!r} must start with http:// or https://")
    token = api_token if api_token is not None else (env_token or None)
    return RewardClientSettings(
        urls=tuple(urls),
        api_token=token,
        item_timeout_s=timeout_s,
        chunk_size=chunk_size or DEFAULT_CHUNK_SIZE,
        timeout=Timeout(read=read_timeout_s or DEFAULT_READ_TIMEOUT_S),
        retry=RetryPolicy() if retry_deadline_s is None else RetryPolicy(
            deadline_s=retry_deadline_s),
    )


# --- one client per (process, settings); async clients also per event loop ---------------
_lock = threading.Lock()
_sync: dict[tuple[int, RewardClientSettings], RewardClient] = {}
_async: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[RewardClientSettings, AsyncRewardClient]
] = weakref.WeakKeyDictionary()


def sync_client(settings: RewardClientSettings) -> RewardClient:
    """The process's client for ``settings`` (connections are reused across calls).

    Keyed by pid too: a client inherited through ``fork`` is never used by the child.
    """
    key = (os.getpid(), settings)
    with _lock:
        client = _sync.get(key)
        if client is None:
            client = _sync[key] = RewardClient(settings)
        return client


def async_client(settings: RewardClientSettings) -> AsyncRewardClient:
    """The running event loop's async client for ``settings`` (httpx binds to one loop)."""
    loop = asyncio.get_running_loop()
    with _lock:
        per_loop = _async.setdefault(loop, {})
        client = per_loop.get(settings)
        if client is None:
            client = per_loop[settings] = AsyncRewardClient(settings)
        return client


def close_clients() -> None:
    """Close this process's sync clients (also run at exit). Async clients close with their
    loop's ``await aclose_clients()``."""
    with _lock:
        mine = [k for k in _sync if k[0] == os.getpid()]
        clients = [_sync.pop(k) for k in mine]
    for c in clients:
        c.close()


async def aclose_clients() -> None:
    """Close the running loop's async clients."""
    with _lock:
        clients = list(_async.pop(asyncio.get_running_loop(), {}).values())
    for c in clients:
        await c.aclose()


atexit.register(close_clients)


# --- values ---------------------------------------------------------------------------------
def _scalar(value: Any) -> Any:
    """numpy scalars and 0-d / one-element arrays or lists → a plain Python value."""
    if isinstance(value, list | tuple):
        return _scalar(value[0]) if len(value) == 1 else value
    tolist = getattr(value, "tolist", None)  # numpy scalars and arrays, without importing numpy
    if callable(tolist) and not isinstance(value, str | bytes):
        return _scalar(tolist())
    return value


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) and not isinstance(value, str | bytes) else value


def ground_truth_text(value: Any, where: str) -> str:
    """A ground truth as the service's string, or ``ValueError`` naming ``where``."""
    v = _scalar(value)
    if v is None:
        raise ValueError(f"{where} is None: the dataset has no ground truth for this item")
    if isinstance(v, bool):
        raise ValueError(f"{where} is a boolean; expected a string or a number")
    if isinstance(v, str):
        return v
    if isinstance(v, float) and math.isfinite(v):
        # the exact positional decimal: str() writes 1e-05, a scientific-notation gold
        return format(Decimal(repr(v)), "f")
    if isinstance(v, int | float):
        return str(v)
    raise ValueError(
        f"{where} is a {type(v).__name__} of {len(v) if hasattr(v, '__len__') else '?'}; "
        "expected one string or number"
    )


def completion_text(completion: Any) -> str:
    """The text to score: a string as is; for a conversation (TRL's conversational format,
    a list of ``{"role", "content"}`` messages) the content of the last assistant message,
    with the text parts of a multimodal content list joined."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                return _content_text(message.get("content"))
        raise ValueError("the conversation has no assistant message")
    raise ValueError(f"a completion must be a string or a list of messages, not "
                     f"{type(completion).__name__}")


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(p.get("text", "") for p in content
                       if isinstance(p, Mapping) and p.get("type", "text") == "text")
    return str(content)


def scorer_options(extra: Any) -> dict[str, Any] | None:
    """Scorer options (``rel_tol``, ``abs_tol``, ``choices``) from a per-item mapping."""
    if not isinstance(extra, Mapping):
        return None
    opts = {k: _plain(extra[k]) for k in SCORER_OPTION_KEYS if k in extra}
    return opts or None
