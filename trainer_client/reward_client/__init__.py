"""Clients for the reward service's ``POST /v1/score``: over HTTP (httpx) or a Ray Serve
handle, sync and async.

    from trainer_client.reward_client import RewardClient, RewardClientSettings, ScoreItem

    settings = RewardClientSettings(urls=("http://127.0.0.1:8000",))
    with RewardClient(settings) as client:
        client.wait_ready(timeout_s=30)
        results = client.score([ScoreItem(response="7", ground_truth="7", scorer="gsm8k")])
        rewards = [reward_or_none(r) for r in results]      # TRL's list[float | None]

On a Ray cluster that runs the Serve app (``deploy/ray/``), :class:`RayRewardClient` and
:class:`AsyncRayRewardClient` give the same API and guarantees over the deployment's handle,
skipping Serve's HTTP proxy (see :mod:`._ray` and docs/deploy.md, "Which client"): use them
in a process of that cluster (a verl/OpenRLHF worker under ``ray.init``); use
``RewardClient`` anywhere else, and against the plain service.

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

The package, one job a module (``__init__`` only re-exports):

=================  ===========================================================================
``_models``        ``ScoreItem``, ``ScoreResult``, statuses, ``reward_or_none``
``_settings``      ``RewardClientSettings``, ``Timeout``, ``RetryPolicy``
``_chunks``        encoding items once and cutting them into requests by items and bytes
``_retry``         the retry core: backoff, ``Retry-After``, failover, reply to error tree,
                   written once as plans that both clients drive
``_base``          what both clients share (headers, limits, chunking, the preferred URL)
``_sync``          ``SyncClient`` (threads, 413 splitting, stop event) and ``RewardClient``,
                   it over httpx
``_async``         ``AsyncClient`` (tasks, 413 splitting) and ``AsyncRewardClient``
``_coalescer``     the async clients' sharing of requests between concurrent calls
``_ray``           ``RayRewardClient``, ``AsyncRayRewardClient``: the same over a Ray Serve
                   deployment handle (Ray imported only when one is built)
=================  ===========================================================================
"""

from trainer_client.reward_client._async import AsyncRewardClient
from trainer_client.reward_client._models import (
    AVAILABLE_STATUSES,
    ScoreItem,
    ScoreResult,
    Status,
    reward_or_none,
)
from trainer_client.reward_client._ray import (
    AsyncRayRewardClient,
    RayClientSettings,
    RayRewardClient,
)
from trainer_client.reward_client._retry import backoff_delay, parse_retry_after
from trainer_client.reward_client._settings import (
    ClientSettings,
    RetryPolicy,
    RewardClientSettings,
    Timeout,
)
from trainer_client.reward_client._sync import RewardClient

__all__ = [
    "AVAILABLE_STATUSES",
    "AsyncRayRewardClient",
    "AsyncRewardClient",
    "ClientSettings",
    "RayClientSettings",
    "RayRewardClient",
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
