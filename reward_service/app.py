"""The FastAPI application: ``create_app(settings)``. Routes are thin; the lifespan owns the pool.

Errors for a request as a whole map to HTTP codes in one place (the exception handlers):
422 malformed, 413 too large, 401 bad token, 503 + Retry-After when overloaded or draining.
A failing *item* is never an HTTP error: it is a status in its result.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service import __version__
from reward_service.batcher import Batcher, Job, job_params
from reward_service.errors import DrainingError, OverloadedError, RequestTooLargeError
from reward_service.metrics import Metrics
from reward_service.pool import WorkerPool
from reward_service.schemas import InfoResponse, ItemResult, ScoreRequest, ScoreResponse
from reward_service.scorers.base import STATUSES, clip
from reward_service.scorers.registry import (
    ALIASES,
    DEFAULT_SCORER,
    SCORERS,
    UnknownScorerError,
    resolve_scorer,
)
from reward_service.settings import Settings

__all__ = ["create_app"]

log = logging.getLogger(__name__)


class BodyLimitMiddleware:
    """Answer 413 for bodies over ``max_bytes`` (by Content-Length or while streaming)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._reject(scope, receive, send)
                    return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body larger than {self.max_bytes} bytes"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)


def _check_token(settings: Settings) -> Callable[[Request], Awaitable[None]]:
    expected = settings.api_token.get_secret_value().encode() if settings.api_token else None

    async def check(request: Request) -> None:
        if expected is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), expected):
            raise _Unauthorized()

    return check


class _Unauthorized(Exception):
    pass


def create_app(settings: Settings, *, pool: WorkerPool | None = None) -> FastAPI:
    """Build the app. The pool is started by the lifespan (pass one in tests to inspect it)."""
    metrics = Metrics()
    pool = pool if pool is not None else WorkerPool(settings, metrics=metrics)
    batcher = Batcher(pool, cache_items=settings.cache_items, metrics=metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.start()
        try:
            yield
        finally:
            await pool.stop()

    app = FastAPI(
        title="Math reward service",
        version=__version__,
        summary="Scores LLM answers to math problems in sandboxed workers with hard deadlines.",
        lifespan=lifespan,
        # with a token, nothing but the probes is open: the schema and docs pages go too
        openapi_url=None if settings.api_token else "/openapi.json",
        docs_url=None if settings.api_token else "/docs",
        redoc_url=None if settings.api_token else "/redoc",
    )
    app.state.settings = settings
    app.state.pool = pool
    app.state.metrics = metrics
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    auth = [Depends(_check_token(settings))]
    retry_after = {"Retry-After": str(settings.retry_after_s)}

    @app.exception_handler(_Unauthorized)
    async def _unauthorized(request: Request, exc: _Unauthorized) -> Response:
        metrics.http_requests.labels(route=request.url.path, code="401").inc()
        return JSONResponse(
            {"detail": "missing or wrong bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    @app.exception_handler(OverloadedError)
    async def _overloaded(request: Request, exc: OverloadedError) -> Response:
        metrics.http_requests.labels(route=request.url.path, code="503").inc()
        return JSONResponse(
            {"detail": f"overloaded: {exc}"}, status_code=503, headers=retry_after
        )

    @app.exception_handler(DrainingError)
    async def _draining(request: Request, exc: DrainingError) -> Response:
        metrics.http_requests.labels(route=request.url.path, code="503").inc()
        return JSONResponse(
            {"detail": "draining: the service is shutting down"}, status_code=503,
            headers=retry_after,
        )

    @app.exception_handler(RequestTooLargeError)
    async def _too_large(request: Request, exc: RequestTooLargeError) -> Response:
        metrics.http_requests.labels(route=request.url.path, code="413").inc()
        return JSONResponse({"detail": str(exc)}, status_code=413)

    @app.exception_handler(UnknownScorerError)
    async def _unknown_scorer(request: Request, exc: UnknownScorerError) -> Response:
        metrics.http_requests.labels(route=request.url.path, code="422").inc()
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code, detail = exc.status_code, exc.detail
        if code == 400:  # FastAPI's "error parsing the body": undecodable bytes → malformed
            code, detail = 422, "request body is not valid UTF-8 JSON"
        metrics.http_requests.labels(route=request.url.path, code=str(code)).inc()
        return JSONResponse({"detail": detail}, status_code=code, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        # FastAPI's default echoes the offending input, which may be megabytes: never do that.
        errors = [
            {"loc": list(e.get("loc", ()))[:6], "msg": clip(e.get("msg", ""), 300),
             "type": e.get("type")}
            for e in exc.errors()[:20]
        ]
        metrics.http_requests.labels(route=request.url.path, code="422").inc()
        return JSONResponse({"detail": errors}, status_code=422)

    async def score(body: ScoreRequest) -> ScoreResponse:
        t0 = time.perf_counter()
        if pool.draining:
            raise DrainingError()
        n = len(body.items)
        if n > settings.max_items:
            raise RequestTooLargeError(f"{n} items; at most {settings.max_items} per request")
        timeout_s = body.timeout_s if body.timeout_s is not None else settings.default_timeout_s
        if timeout_s > settings.max_timeout_s:
            raise RequestValidationError(
                [{"loc": ("body", "timeout_s"), "type": "less_than_equal",
                  "msg": f"timeout_s must be <= {settings.max_timeout_s}"}]
            )
        jobs: list[Job] = []
        for i, item in enumerate(body.items):
            if len(item.response) > settings.max_response_chars:
                raise RequestTooLargeError(
                    f"items[{i}].response has {len(item.response)} characters; "
                    f"at most {settings.max_response_chars}"
                )
            if len(item.ground_truth) > settings.max_ground_truth_chars:
                raise RequestTooLargeError(
                    f"items[{i}].ground_truth has {len(item.ground_truth)} characters; "
                    f"at most {settings.max_ground_truth_chars}"
                )
            try:
                name = resolve_scorer(item.scorer, item.data_source)
            except UnknownScorerError as exc:
                raise UnknownScorerError(f"items[{i}]: {exc}") from None
            jobs.append(Job(name, item.response, item.ground_truth, job_params(name, item.extra)))
        metrics.batch_items.observe(n)
        scored = await batcher.score(jobs, timeout_s)
        results = [
            ItemResult(
                id=item.id,
                score=s.verdict.score,
                status=s.verdict.status,
                scorer=s.job.scorer,
                scorer_version=SCORERS[s.job.scorer].version,
                extracted=s.verdict.extracted,
                extracted_gold=s.verdict.extracted_gold,
                reason=s.verdict.reason,
                elapsed_s=s.elapsed_s,
                cached=s.cached,
            )
            for item, s in zip(body.items, scored, strict=True)
        ]
        statuses: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for r in results:
            statuses[r.status] += 1
        elapsed = time.perf_counter() - t0
        metrics.request_seconds.labels(route="score").observe(elapsed)
        metrics.http_requests.labels(route="score", code="200").inc()
        return ScoreResponse(results=results, count=n, statuses=statuses, elapsed_s=elapsed)

    for path in ("/v1/score", "/score"):
        app.add_api_route(
            path, score, methods=["POST"], response_model=ScoreResponse, dependencies=auth,
            summary="Score a batch of responses against ground truths",
            responses={
                401: {"description": "Missing or wrong bearer token"},
                413: {"description": "Too many items, or an item or the body is too large"},
                422: {"description": "Malformed request, unknown scorer, bad timeout_s"},
                503: {"description": "Overloaded or draining; retry after Retry-After seconds"},
            },
        )

    @app.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/readyz", summary="Readiness: workers are warm and the service is not draining")
    async def readyz() -> Response:
        st = pool.status()
        body = {"ready": st.ready, "active_workers": st.active, "draining": st.draining}
        return JSONResponse(body, status_code=200 if st.ready else 503)

    @app.get("/metrics", dependencies=auth, summary="Prometheus metrics")
    async def metrics_endpoint() -> Response:
        st = pool.status()
        for state in ("active", "spare", "starting", "retiring"):
            metrics.workers.labels(state=state).set(getattr(st, state))
        metrics.outstanding_items.set(st.outstanding_items)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/v1/info", dependencies=auth, response_model=InfoResponse,
             summary="Version, scorers, limits and the active sandbox layers")
    async def info() -> InfoResponse:
        st = pool.status()
        return InfoResponse(
            version=__version__,
            scorers=[
                {"name": s.name, "version": s.version, "description": s.description,
                 "options": list(s.params)}
                for s in SCORERS.values()
            ],
            default_scorer=DEFAULT_SCORER,
            limits={
                "max_items": settings.max_items,
                "max_response_chars": settings.max_response_chars,
                "max_ground_truth_chars": settings.max_ground_truth_chars,
                "max_body_bytes": settings.max_body_bytes,
                "default_timeout_s": settings.default_timeout_s,
                "max_timeout_s": settings.max_timeout_s,
                "max_queue_items": settings.max_queue_items,
                "scorer_aliases": ALIASES,
            },
            workers={"configured": settings.workers, "spares": settings.spares, **asdict(st)},
            sandbox={"mode": settings.sandbox, "layers": pool.sandbox_report},
            auth=settings.api_token is not None,
        )

    return app
