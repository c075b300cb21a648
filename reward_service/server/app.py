"""The FastAPI application: ``create_app(settings)``. The lifespan owns the worker pool.

The routes are thin (``reward_service/server/api/``): each turns its protocol's request into items
for :class:`~reward_service.server.service.ScoringService` and its results into the protocol's reply.
Errors for a request as a whole are rendered in one place (``api/errors.py``): 422 malformed,
413 too large, 401 bad token, 503 + Retry-After when overloaded or draining. A failing *item*
is never an HTTP error: it is a status in its result.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from starlette.types import ASGIApp

from reward_service import __version__
from reward_service.server.api import nemo_gym, openrlhf, ops, score, slime
from reward_service.server.api.errors import error_responder, install_error_handlers
from reward_service.server.api.guards import BodyLimitMiddleware, bearer_check
from reward_service.server.api.memory_budget import MemoryBudget
from reward_service.server.metrics import Metrics
from reward_service.server.pool import WorkerPool
from reward_service.server.routing import ExpressLane
from reward_service.server.service import ScoringService
from reward_service.settings import Settings

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def _log_sandbox(settings: Settings, report: dict[str, Any]) -> None:
    """One line at startup telling the operator which sandbox layers the workers run with."""
    statuses = {name: str(layer.get("status")) for name, layer in report.items()}
    active = sorted(n for n, s in statuses.items() if s == "active")
    inactive = sorted(f"{n}({s})" for n, s in statuses.items() if s != "active")
    level = logging.WARNING if any(s == "failed" for s in statuses.values()) else logging.INFO
    log.log(level, "sandbox layers", extra={"sandbox": settings.sandbox,
                                            "active": ",".join(active) or "none",
                                            "inactive": ",".join(inactive) or "none"})


#: FastAPI >= 0.160 checks OpenTelemetry's global providers on every request (~20 Python
#: calls, three environment lookups) for its native telemetry; the service exports its own
#: Prometheus metrics, so that telemetry is off where the installed FastAPI has it.
_NO_TELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters else {})


class _App(FastAPI):
    """FastAPI with the service's own front (body limits, then the express lane) ahead of
    Starlette's middleware: per-sample requests on the lean routes pay for none of it."""

    front: Callable[[ASGIApp], ASGIApp] | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        return stack if self.front is None else self.front(stack)


def create_app(settings: Settings, *, pool: WorkerPool | None = None) -> FastAPI:
    """Build the app. The pool is started by the lifespan (pass one in tests to inspect it)."""
    metrics = Metrics()
    pool = pool if pool is not None else WorkerPool(settings, metrics=metrics)
    service = ScoringService(settings, pool, metrics)
    token = settings.api_token.get_secret_value().encode() if settings.api_token else None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.start()
        _log_sandbox(settings, pool.sandbox_report)
        try:
            yield
        finally:
            await pool.stop()

    app = _App(
        title="Math reward service",
        version=__version__,
        summary="Scores LLM answers to math problems in sandboxed workers with hard deadlines.",
        lifespan=lifespan,
        # with a token, nothing but the probes is open: the schema and docs pages go too
        openapi_url=None if token else "/openapi.json",
        docs_url=None if token else "/docs",
        redoc_url=None if token else "/redoc",
        **_NO_TELEMETRY,
    )
    app.state.settings = settings
    app.state.pool = pool
    app.state.metrics = metrics
    app.state.service = service
    budget = MemoryBudget(settings.max_inflight_body_bytes)  # bodies + unsent replies
    app.state.budget = budget
    metrics.held_bytes.labels(kind="body").set_function(lambda: budget.bodies)
    metrics.held_bytes.labels(kind="unsent_reply").set_function(budget.unsent)
    auth = [Depends(bearer_check(token))]
    routers = [score.router(service, auth), openrlhf.router(service, auth),
               slime.router(service, auth), nemo_gym.router(service, auth),  # NeMo-Gym /verify
               ops.router(service, auth, auth=token is not None)]
    routes = [r for x in routers for r in x.routes]
    respond = error_responder(metrics, retry_after_s=settings.retry_after_s,
                              paths=[getattr(r, "path", "") for r in routes])

    def front(stack: ASGIApp) -> ASGIApp:  # body limits → express lane → Starlette's stack
        lane = ExpressLane(stack, routes=routes, responder=respond)
        return BodyLimitMiddleware(lane, max_bytes=settings.max_body_bytes, budget=budget,
                                   body_timeout_s=settings.body_timeout_s,
                                   body_total_timeout_s=settings.body_total_timeout_s,
                                   responder=respond, token=token)

    app.front = front
    install_error_handlers(app, respond)
    for router in routers:
        app.include_router(router)
    return app
