"""The clients over a Ray Serve deployment handle: a trainer on the Ray cluster skips the HTTP
proxy.

    import ray
    from trainer_client.reward_client import RayClientSettings, RayRewardClient

    ray.init(address="auto")  # a process of the cluster that runs deploy/ray's app
    with RayRewardClient(RayClientSettings(app_name="reward")) as client:
        client.wait_ready(timeout_s=60)
        results = client.score(items)  # one ScoreResult per item, in order

:class:`RayRewardClient` and :class:`AsyncRayRewardClient` are :class:`~._sync.SyncClient` and
:class:`~._async.AsyncClient`, the behaviour of ``RewardClient`` and ``AsyncRewardClient``
(chunks by items and bytes, 413 splitting, retries with backoff and ``Retry-After``, the stop
event, coalescing), with the deployment's handle as the transport. Each chunk's body, the
bytes a ``POST /v1/score`` would carry, goes to the replicas' ``RewardService.score``
(``deploy/ray/reward_app.py``), which hands it to the app that serves HTTP; its (status,
headers, body) is put in an ``httpx.Response``, so the one retry core (:mod:`._retry`) reads
it as it reads an HTTP reply: 200 is the results, 401/413/422 raise the
``RewardRequestError`` subclasses, 503 with ``Retry-After`` is retried.

Serve's own refusals are answered as its HTTP proxy answers them: ``BackPressureError`` (the
deployment's ``max_queued_requests``) as its status (503 unless configured) and
``Retry-After``, ``DeploymentUnavailableError`` as 503, an exception raised in the replica's
method (``RayTaskError``) as 500 (``RewardProtocolError``). A replica lost with the chunk in
hand (``RayActorError``: it died or cannot be reached; ``ReplicaUnavailableError``) is
retried, as a connection closed without a reply is: scoring is idempotent. No reply within
``reply_timeout_s``: the call is cancelled and raises ``RewardServiceUnavailable`` at once,
not resent, as after an HTTP read timeout.

Ray is imported when a client is built, never by this module: the HTTP clients need no Ray.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from trainer_client.reward_client._async import AsyncClient
from trainer_client.reward_client._retry import Errors, Request
from trainer_client.reward_client._settings import ClientSettings
from trainer_client.reward_client._sync import SyncClient

__all__ = ["AsyncRayRewardClient", "RayClientSettings", "RayRewardClient"]

#: Seconds one readiness probe waits for its answer (the handle waits for a replica to exist).
READY_CALL_S = 2.0


@dataclass(frozen=True, kw_only=True)
class RayClientSettings(ClientSettings):
    """The handle clients' settings: which deployment, how long a chunk's reply may take, and
    everything the HTTP client's settings also say (:class:`ClientSettings`)."""

    app_name: str = "reward"  # the Serve application (serve_config.yaml's "name")
    deployment_name: str = "reward-service"  # build_app's deployment
    reply_timeout_s: float = 120.0  # one chunk's reply, scoring included (HTTP: Timeout.read)

    @property
    def urls(self) -> tuple[str, ...]:
        """The one destination, as errors and ``wait_ready`` name it."""
        return (f"serve://{self.app_name}/{self.deployment_name}",)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.reply_timeout_s <= 0:
            raise ValueError("reply_timeout_s must be > 0")


class _Handle:
    """The deployment's handle, and its answers as the replies the plans read."""

    def __init__(self, settings: RayClientSettings, handle: Any,
                 headers: Mapping[str, str]) -> None:
        from ray.exceptions import RayActorError
        from ray.serve.exceptions import ReplicaUnavailableError

        if handle is None:
            from ray import serve

            handle = serve.get_deployment_handle(settings.deployment_name, settings.app_name)
        self.handle = handle
        self.reply_timeout_s = settings.reply_timeout_s
        self.headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        self.retryable: Errors = (RayActorError, ReplicaUnavailableError)
        self.lost: Errors = (TimeoutError,)

    def call(self, request: Request) -> tuple[Any, float]:
        """The handle call for ``request`` (a ``DeploymentResponse``) and its time limit."""
        if request.body is None:
            return self.handle.readyz.remote(), min(READY_CALL_S, self.reply_timeout_s)
        return self.handle.score.remote(request.body, self.headers), self.reply_timeout_s

    @staticmethod
    def reply(request: Request, answer: Any) -> httpx.Response:
        if request.body is None:  # readyz: a status
            return httpx.Response(int(answer))
        status, headers, body = answer
        return httpx.Response(status, headers=headers, content=body)

    def refused(self, exc: Exception, response: Any) -> httpx.Response:
        """Serve's refusal ``exc`` as its HTTP proxy answers it; ``exc`` itself (for the plan)
        when it is a lost replica or a timeout, after cancelling the call on a timeout."""
        from ray.exceptions import RayTaskError
        from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError

        if isinstance(exc, TimeoutError):
            response.cancel()  # the replica stops working on it (its items are dropped)
        if isinstance(exc, self.retryable + self.lost):
            raise exc
        if isinstance(exc, BackPressureError):
            after = {} if exc.retry_after_s is None else {"retry-after": str(exc.retry_after_s)}
            return httpx.Response(exc.status_code, headers=after, text=exc.message)
        if isinstance(exc, DeploymentUnavailableError):
            return httpx.Response(503, text=exc.message)
        if isinstance(exc, RayTaskError):
            return httpx.Response(500, text=str(exc)[:2000])
        raise exc


class RayRewardClient(SyncClient):
    """:class:`~trainer_client.reward_client.RewardClient` over a Serve deployment handle.

    Args:
        settings: see :class:`RayClientSettings` (default: app ``reward``).
        handle: a ``DeploymentHandle`` to use instead of
            ``serve.get_deployment_handle(deployment_name, app_name)``.
        stop_event, seed: as for ``RewardClient``.
    """

    def __init__(self, settings: RayClientSettings | None = None, *, handle: Any = None,
                 stop_event: Any = None, seed: int | None = None) -> None:
        settings = settings or RayClientSettings()
        super().__init__(settings, stop_event=stop_event, seed=seed)
        self._ray = _Handle(settings, handle, self._headers)
        self.retryable, self.lost = self._ray.retryable, self._ray.lost

    def _send(self, request: Request) -> httpx.Response:
        response, limit = self._ray.call(request)
        try:
            return self._ray.reply(request, response.result(timeout_s=limit))
        except Exception as e:
            return self._ray.refused(e, response)

    def _close_transport(self) -> None:
        pass  # the handle is Serve's: nothing of it is this client's to close


class AsyncRayRewardClient(AsyncClient):
    """:class:`~trainer_client.reward_client.AsyncRewardClient` over a Serve deployment
    handle (arguments as for :class:`RayRewardClient`)."""

    def __init__(self, settings: RayClientSettings | None = None, *, handle: Any = None,
                 seed: int | None = None) -> None:
        settings = settings or RayClientSettings()
        super().__init__(settings, seed=seed)
        self._ray = _Handle(settings, handle, self._headers)
        self.retryable, self.lost = self._ray.retryable, self._ray.lost

    async def _send(self, request: Request) -> httpx.Response:
        response, limit = self._ray.call(request)
        try:
            return self._ray.reply(request, await asyncio.wait_for(response, limit))
        except Exception as e:
            return self._ray.refused(e, response)

    async def _close_transport(self) -> None:
        pass
