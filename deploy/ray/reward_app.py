"""The reward service on Ray Serve: each replica runs ``create_app(settings)`` with its own
worker pool, and Serve's proxy on every node routes ``/v1/score`` to the replicas.

    $ serve run deploy/ray/serve_config.yaml --working-dir deploy/ray   # or RAY_ADDRESS=...
    $ curl -s localhost:8000/v1/score -H 'content-type: application/json' -d '{"items": [...]}'

or from Python, next to a trainer that already runs on the cluster::

    from ray import serve
    import reward_app
    serve.run(reward_app.build_app({"settings": {"workers": 4}}), route_prefix="/")

Each replica is one Ray actor. Its constructor builds the ``Settings`` (``REWARD_*`` variables
of the node apply, then the ``settings`` overrides); Serve runs the FastAPI lifespan when the
replica starts (the pool's zygote and workers start, and a replica whose strict sandbox
refuses to start fails instead of serving) and when it stops (``pool.stop()``: workers get
EOF, then SIGKILL, nothing left running). The replica reserves ``workers`` CPUs, so Ray places
replicas where cores are free and a 2-core node holds one 2-worker replica.

A trainer that runs on the cluster can skip the HTTP proxy: ``RayRewardClient`` (in
``trainer_client.reward_client``) calls the replicas' :meth:`RewardService.score` through the
deployment's handle, with the HTTP client's chunking, retries and per-item statuses. The
method hands the body to the same ASGI app that serves ``POST /v1/score`` (its token check,
body limits, validation, ``ScoringService``), so every answer, 422 and 503 included, is the
one HTTP gives.

One large ``/v1/score`` request that reaches an idle replica is split over the replicas
(``fanout.py``): Serve alone routes a whole request to one replica, so one 512-item request at
a time would leave the others idle. A replica with work in hand scores a request whole.

Autoscaling: ``QueueDepthPolicy`` scales on the items waiting in the replicas' pools (one RL
step is a few requests of thousands of items, so Serve's count of ongoing requests alone
says little), and never below what ongoing requests ask for.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from fanout import FanOut, Headers, answer, call_app
from ray import serve
from ray.serve import Application
from ray.serve.config import AutoscalingContext

from reward_service.server.app import create_app
from reward_service.settings import Settings

__all__ = ["QueueDepthPolicy", "RewardService", "build_app"]

OUTSTANDING_ITEMS = "outstanding_items"  # the custom autoscaling metric, per replica


class QueueDepthPolicy:
    """Replicas wanted = outstanding items / ``target_items_per_replica`` (Serve custom policy).

    Also at least ``ongoing requests / target_ongoing_requests`` (Serve's default rule), and
    within ``[min_replicas, max_replicas]``. Serve applies the up/down-scale delays after.
    """

    def __init__(self, target_items_per_replica: float = 2048.0) -> None:
        if target_items_per_replica <= 0:
            raise ValueError("target_items_per_replica must be > 0")
        self.target_items_per_replica = target_items_per_replica

    def __call__(self, ctx: AutoscalingContext) -> tuple[int, dict[str, Any]]:
        metrics = ctx.aggregated_metrics or {}
        items = sum(metrics.get(OUTSTANDING_ITEMS, {}).values())
        target_requests = getattr(ctx.config, "target_ongoing_requests", None) or 2.0
        wanted = max(
            math.ceil(items / self.target_items_per_replica),
            math.ceil(ctx.total_num_requests / target_requests),
        )
        low, high = ctx.capacity_adjusted_min_replicas, ctx.capacity_adjusted_max_replicas
        return max(low, min(high, wanted)), ctx.policy_state


def _encode(doc: dict[str, Any]) -> bytes:
    """A body given as a document: orjson, or the standard library for what orjson refuses
    (lone surrogates, huge integers), so that the app answers it with its 422."""
    try:
        return orjson.dumps(doc)
    except TypeError:
        return json.dumps(doc).encode()


@serve.ingress()  # late-bound: the app is built in the replica, by __serve_build_asgi_app__
class RewardService:
    """One Serve replica: one FastAPI app and one worker pool."""

    def __init__(self, settings: dict[str, Any] | None = None, fanout: int = 1,
                 min_part: int = 64) -> None:
        # The entry point of this process: REWARD_* from the node's environment, then overrides.
        self._settings = Settings(**(settings or {}))
        self._fanout = fanout
        self._min_part = min_part
        self._app: Any = None
        self._asgi: Any = None  # what Serve's proxy calls: the app, or FanOut around it
        self._peers: Any = None  # this deployment's handle, made on first use

    def __serve_build_asgi_app__(self) -> Any:
        self._app = self._asgi = create_app(self._settings)
        if self._fanout < 2:
            return self._app  # Serve runs its lifespan next: the pool starts here
        s = self._settings
        self._asgi = FanOut(self._app, self._score_elsewhere, parts=self._fanout,
                            min_part=self._min_part, max_items=s.max_items,
                            max_body_bytes=s.max_body_bytes, body_timeout_s=s.body_timeout_s,
                            backlog=self._backlog)
        return self._asgi

    async def score(self, body: bytes | dict[str, Any],
                    headers: Headers | None = None) -> tuple[int, Headers, bytes]:
        """``POST /v1/score`` from a deployment handle (``RayRewardClient``): ``body`` is the
        request's body (bytes), or the same JSON document as a dict; ``headers`` the request's
        other headers (``authorization``). Answered by what answers Serve's proxy (the app,
        split over the replicas as an HTTP request would be): (status, headers, body)."""
        raw = body if isinstance(body, bytes) else _encode(body)
        return await answer(self._asgi, "POST", "/v1/score",
                            [(b"content-type", b"application/json"), *(headers or ())], raw)

    async def readyz(self) -> int:
        """``GET /readyz``'s status from a deployment handle (200: ready)."""
        status, _, _ = await answer(self._app, "GET", "/readyz", [], b"")
        return status

    def _backlog(self) -> int:
        return int(self._app.state.pool.status().outstanding_items)

    async def score_part(self, path: str, headers: Headers, body: bytes) -> tuple[int, bytes]:
        """One part of a request split by another replica, through this replica's app."""
        return await call_app(self._app, path, headers, body)

    async def _score_elsewhere(self, path: str, headers: Headers,
                               body: bytes) -> tuple[int, bytes]:
        if self._peers is None:
            ctx = serve.get_replica_context()
            self._peers = serve.get_deployment_handle(ctx.deployment, ctx.app_name)
        result: tuple[int, bytes] = await self._peers.score_part.remote(path, headers, body)
        return result

    def check_health(self) -> None:
        """Serve's replica health check: unhealthy when no worker is warm (Serve replaces it)."""
        status = self._app.state.pool.status()
        if not status.ready and not status.draining:
            raise RuntimeError(f"no warm worker: {status}")

    def record_autoscaling_stats(self) -> dict[str, float]:
        return {OUTSTANDING_ITEMS: float(self._app.state.pool.status().outstanding_items)}


def build_app(args: dict[str, Any] | None = None) -> Application:
    """Serve application builder (``import_path: reward_app:build_app`` with ``args``).

    args: ``settings`` (``Settings`` overrides, e.g. ``{"workers": 2}``); ``num_replicas``
    (an int for a fixed count; omitted: autoscaling); ``min_replicas`` (1), ``max_replicas``
    (8), ``target_items_per_replica`` (512 x workers), ``target_ongoing_requests`` (4),
    ``max_ongoing_requests`` (64); ``graceful_shutdown_timeout_s`` (``drain_s``); ``fanout``
    (parts one large score request is split into: ``num_replicas``, or 2 when autoscaling;
    1 turns splitting off) and ``min_part`` (64: fewer items per part are not split).
    """
    args = dict(args or {})
    overrides = dict(args.pop("settings", None) or {})
    settings = Settings(**overrides)  # validate here, on the driver, before any replica starts
    workers = settings.workers
    options: dict[str, Any] = {
        # A replica's workers are its CPUs; the server and zygote mostly wait on them.
        "ray_actor_options": {"num_cpus": workers},
        "max_ongoing_requests": args.pop("max_ongoing_requests", 64),
        "graceful_shutdown_timeout_s": args.pop("graceful_shutdown_timeout_s", settings.drain_s),
        "health_check_period_s": 10,
        "health_check_timeout_s": 30,
    }
    num_replicas = args.pop("num_replicas", None)
    autoscaling = {
        "min_replicas": args.pop("min_replicas", 1),
        "max_replicas": args.pop("max_replicas", 8),
        "target_ongoing_requests": args.pop("target_ongoing_requests", 4),
        "upscale_delay_s": 5,
        "downscale_delay_s": 300,  # RL steps are bursty: keep replicas between reward phases
        "policy": {
            "policy_function": f"{__name__}:QueueDepthPolicy",
            "policy_kwargs": {
                "target_items_per_replica": args.pop("target_items_per_replica", 512 * workers),
            },
        },
    }
    fanout = int(args.pop("fanout", num_replicas if num_replicas is not None else 2))
    min_part = int(args.pop("min_part", 64))
    if fanout < 1 or min_part < 1:
        raise ValueError("fanout and min_part must be >= 1")
    if args:
        raise ValueError(f"unknown build_app args: {sorted(args)}")
    if num_replicas is not None:
        options["num_replicas"] = int(num_replicas)
    else:
        options["autoscaling_config"] = autoscaling
    # Pass the overrides, not the Settings object: each replica builds its own Settings.
    deployment = serve.deployment(RewardService, name="reward-service", **options)
    return deployment.bind(overrides, fanout, min_part)
