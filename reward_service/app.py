"""The FastAPI application: ``create_app(settings)``. Routes are thin; the lifespan owns the pool.

Errors for a request as a whole map to HTTP codes in one place (the exception handlers):
422 malformed, 413 too large, 401 bad token, 503 + Retry-After when overloaded or draining.
A failing *item* is never an HTTP error: it is a status in its result.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any

import orjson
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service import __version__
from reward_service.batcher import Batcher, Job, Scored, job_params
from reward_service.compat import CompatError, openrlhf_items, slime_item
from reward_service.errors import DrainingError, OverloadedError, RequestTooLargeError
from reward_service.metrics import Metrics
from reward_service.pool import WorkerPool
from reward_service.routing import ClientDisconnected, LeanJSONRoute, unless_disconnected
from reward_service.schemas import (
    GetRewardRequest,
    GetRewardResponse,
    InfoResponse,
    ScoreRequest,
    ScoreResponse,
    SlimeRewardDetail,
    SlimeRewardRequest,
)
from reward_service.scorers.base import STATUSES, Verdict, clip
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


def _log_sandbox(settings: Settings, report: dict[str, Any]) -> None:
    """One line at startup telling the operator which sandbox layers the workers run with."""
    statuses = {name: str(layer.get("status")) for name, layer in report.items()}
    active = sorted(n for n, s in statuses.items() if s == "active")
    inactive = sorted(f"{n}({s})" for n, s in statuses.items() if s != "active")
    level = logging.WARNING if any(s == "failed" for s in statuses.values()) else logging.INFO
    log.log(level, "sandbox layers", extra={"sandbox": settings.sandbox,
                                            "active": ",".join(active) or "none",
                                            "inactive": ",".join(inactive) or "none"})


def _is_unicode(value: str | dict[str, Any]) -> bool:
    """False if ``value`` holds a lone surrogate (valid JSON escape, not Unicode text)."""
    try:
        if isinstance(value, str):
            value.encode("utf-8")
        else:
            orjson.dumps(value)
    except (UnicodeEncodeError, TypeError):
        return False
    return True


def _not_unicode(field_name: str) -> RequestValidationError:
    return RequestValidationError([{
        "loc": ("body", field_name), "type": "string_unicode",
        "msg": "has a lone surrogate (a \\ud800-\\udfff escape without its pair), "
               "which is not Unicode text",
    }])


class _Rejected(Exception):
    """A framework request that does not follow its protocol (→ 422 with the reason)."""


def create_app(settings: Settings, *, pool: WorkerPool | None = None) -> FastAPI:
    """Build the app. The pool is started by the lifespan (pass one in tests to inspect it)."""
    metrics = Metrics()
    pool = pool if pool is not None else WorkerPool(settings, metrics=metrics)
    batcher = Batcher(pool, cache_items=settings.cache_items, metrics=metrics)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await pool.start()
        _log_sandbox(settings, pool.sandbox_report)
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

    @app.exception_handler(ClientDisconnected)
    async def _gone(request: Request, exc: ClientDisconnected) -> Response:
        # nobody reads this; nginx's "client closed request" code keeps it apart in /metrics
        metrics.http_requests.labels(route=request.url.path, code="499").inc()
        return Response(status_code=499)

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

    @app.exception_handler(_Rejected)
    async def _rejected(request: Request, exc: _Rejected) -> Response:
        metrics.http_requests.labels(route=request.url.path, code="422").inc()
        return JSONResponse({"detail": str(exc)}, status_code=422)

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

    # --- the one scoring path: every route below turns its request into Jobs and calls _run --
    def _open(n: int, timeout_s: float | None) -> float:
        """Whole-request checks shared by every scoring route; returns the per-item deadline."""
        if pool.draining:
            raise DrainingError()
        if n > settings.max_items:
            raise RequestTooLargeError(f"{n} items; at most {settings.max_items} per request")
        timeout = timeout_s if timeout_s is not None else settings.default_timeout_s
        if timeout > settings.max_timeout_s:
            raise RequestValidationError(
                [{"loc": ("body", "timeout_s"), "type": "less_than_equal",
                  "msg": f"timeout_s must be <= {settings.max_timeout_s}"}]
            )
        return timeout

    def _job(where: tuple[str, str], response: str, ground_truth: str, scorer: str | None,
             data_source: str | None, extra: dict[str, Any] | None) -> Job:
        """One validated Job; ``where`` names the two fields in errors (e.g. items[3].response)."""
        if len(response) > settings.max_response_chars:
            raise RequestTooLargeError(
                f"{where[0]} has {len(response)} characters; "
                f"at most {settings.max_response_chars}"
            )
        if len(ground_truth) > settings.max_ground_truth_chars:
            raise RequestTooLargeError(
                f"{where[1]} has {len(ground_truth)} characters; "
                f"at most {settings.max_ground_truth_chars}"
            )
        name = resolve_scorer(scorer, data_source)
        params = job_params(name, extra)
        # a lone surrogate (a valid JSON escape such as "\ud800", not Unicode text) can be
        # neither scored nor sent to a worker: the request is malformed
        for field_name, text in ((where[0], response), (where[1], ground_truth)):
            if not text.isascii() and not _is_unicode(text):
                raise _not_unicode(field_name)
        if params and not _is_unicode(params):
            raise _not_unicode(where[0].rsplit(".", 1)[0] + ".extra")
        return Job(name, response, ground_truth, params)

    versions = {name: sc.version for name, sc in SCORERS.items()}

    def _result(s: Scored, item_id: str | None = None) -> dict[str, Any]:
        """An ``ItemResult`` as the plain dict it serialises to (no model per item on the hot
        path; ``tests/test_api.py`` checks the two agree field by field)."""
        v = s.verdict
        return {
            "id": item_id,
            "score": v.score,
            "status": v.status,
            "scorer": s.job.scorer,
            "scorer_version": versions[s.job.scorer],
            "extracted": v.extracted,
            "extracted_gold": v.extracted_gold,
            "reason": v.reason,
            "elapsed_s": s.elapsed_s,
            "cached": s.cached,
        }

    async def _run(jobs: list[Job | tuple[str, Verdict]], timeout_s: float) -> list[Scored]:
        """Score the Jobs through the batcher; ``(scorer, Verdict)`` is an item already failed."""
        todo = [j for j in jobs if isinstance(j, Job)]
        metrics.batch_items.observe(len(jobs))
        scored = iter(await batcher.score(todo, timeout_s) if todo else [])
        out: list[Scored] = []
        for j in jobs:
            if isinstance(j, Job):
                out.append(next(scored))
            else:  # e.g. no response found in an OpenRLHF query: an item error, never a guess
                name, verdict = j
                out.append(Scored(Job(name, "", "", {}), verdict, 0.0, False))
                metrics.items.labels(scorer=name, status=verdict.status).inc()
        return out

    def _done(route: str, t0: float) -> None:
        metrics.request_seconds.labels(route=route).observe(time.perf_counter() - t0)
        metrics.http_requests.labels(route=route, code="200").inc()

    def _statuses(statuses: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for st in statuses:
            counts[st] += 1
        return counts

    async def score(body: ScoreRequest) -> Response:
        t0 = time.perf_counter()
        timeout_s = _open(len(body.items), body.timeout_s)
        jobs: list[Job | tuple[str, Verdict]] = []
        for i, item in enumerate(body.items):
            try:
                jobs.append(_job((f"items[{i}].response", f"items[{i}].ground_truth"),
                                 item.response, item.ground_truth, item.scorer,
                                 item.data_source, item.extra))
            except UnknownScorerError as exc:
                raise UnknownScorerError(f"items[{i}]: {exc}") from None
        scored = await _run(jobs, timeout_s)
        results = [_result(s, item.id) for item, s in zip(body.items, scored, strict=True)]
        _done("score", t0)
        # a ScoreResponse, serialised directly (the schema is the route's response_model)
        return Response(orjson.dumps({"results": results, "count": len(results),
                                   "statuses": _statuses(s.verdict.status for s in scored),
                                   "elapsed_s": time.perf_counter() - t0}),
                        media_type="application/json")

    for path in ("/v1/score", "/score"):
        app.router.add_api_route(
            path, score, methods=["POST"], response_model=ScoreResponse, dependencies=auth,
            route_class_override=LeanJSONRoute,  # the hot path: see reward_service/routing.py
            summary="Score a batch of responses against ground truths",
            responses={
                401: {"description": "Missing or wrong bearer token"},
                413: {"description": "Too many items, or an item or the body is too large"},
                422: {"description": "Malformed request, unknown scorer, bad timeout_s"},
                503: {"description": "Overloaded or draining; retry after Retry-After seconds"},
            },
        )

    # --- framework protocols (translation in reward_service/compat.py), same path as above --
    compat_responses: dict[int | str, dict[str, Any]] = {
        401: {"description": "Missing or wrong bearer token"},
        413: {"description": "Too many items, or an item or the body is too large"},
        422: {"description": "Not the framework's protocol (lengths, labels), bad options"},
        503: {"description": "Overloaded or draining; retry after Retry-After seconds"},
    }

    @app.post(
        "/get_reward", dependencies=auth, response_model=GetRewardResponse,
        summary="OpenRLHF remote reward: --remote_rm_url http://HOST:PORT/get_reward",
        responses=compat_responses,
    )
    async def get_reward(
        body: GetRewardRequest,
        request: Request,
        scorer: Annotated[str | None, Query(description="Scorer for every item.")] = None,
        data_source: Annotated[str | None, Query(description="Route as verl does.")] = None,
        timeout_s: Annotated[float | None, Query(gt=0, description="Deadline per item.")] = None,
    ) -> GetRewardResponse:
        """``{"query", "prompts", "labels"}`` → ``{"rewards", "scores", "extra_logs"}``.

        Options go in the URL, since OpenRLHF posts only the body:
        ``--remote_rm_url 'http://HOST:PORT/get_reward?scorer=gsm8k&timeout_s=10'``.
        """
        t0 = time.perf_counter()
        timeout = _open(len(body.query), timeout_s)
        name = resolve_scorer(scorer, data_source)  # unknown → 422
        try:
            extracted = openrlhf_items(body.query, body.prompts, body.labels)
        except CompatError as exc:
            raise _Rejected(str(exc)) from None
        jobs: list[Job | tuple[str, Verdict]] = []
        for i, (query, e) in enumerate(zip(body.query, extracted, strict=True)):
            if len(query) > settings.max_response_chars:  # checked on the query as sent
                raise RequestTooLargeError(
                    f"query[{i}] has {len(query)} characters; at most {settings.max_response_chars}"
                )
            if e.response is None:
                jobs.append((name, Verdict("error", reason=e.reason)))
            else:
                jobs.append(_job((f"query[{i}]", f"labels[{i}]"), e.response, e.ground_truth,
                                 name, None, None))
        # a batch route like /v1/score: a client that is gone must not keep workers busy
        scored = await unless_disconnected(request, _run(jobs, timeout))
        statuses = [s.verdict.status for s in scored]
        rewards = [s.verdict.score for s in scored]
        logs = {
            "acc": [float(st == "correct") for st in statuses],
            **{name: [float(st == name) for st in statuses]
               for name in ("no_answer", "bad_ground_truth", "timeout", "error")},
        }
        _done("get_reward", t0)
        return GetRewardResponse.model_validate({
            "rewards": rewards, "scores": rewards, "extra_logs": logs,
            "statuses": _statuses(statuses), "results": [_result(s) for s in scored]})

    @app.post(
        "/slime/reward", dependencies=auth,
        response_model=float | SlimeRewardDetail,  # type: ignore[arg-type]
        summary="slime remote reward: --rm-type remote_rm --rm-url http://HOST:PORT/slime/reward",
        responses=compat_responses,
    )
    async def slime_reward(
        body: SlimeRewardRequest,
        response: Response,
        details: Annotated[bool, Query(description="Answer a dict (with --reward-key score) "
                                                   "instead of a bare number.")] = False,
        scorer: Annotated[str | None, Query(description="Scorer for the item.")] = None,
        data_source: Annotated[str | None, Query(description="Route as verl does.")] = None,
        timeout_s: Annotated[float | None, Query(gt=0, description="Deadline.")] = None,
    ) -> float | SlimeRewardDetail:
        """``{"prompt", "response", "label"}`` → the reward as a bare JSON number.

        slime uses the reply body as the reward, so it is ``1.0`` or ``0.0``; the status
        is in the ``X-Reward-Status`` header. With ``?details=true`` the reply is
        ``{"score", "acc", "pred", "status", "reason"}`` for ``--reward-key score``.
        """
        t0 = time.perf_counter()
        timeout = _open(1, timeout_s)
        name = resolve_scorer(scorer, data_source)  # unknown → 422
        try:
            e = slime_item(body.response, body.label)
        except CompatError as exc:
            raise _Rejected(str(exc)) from None
        job = _job(("response", "label"), e.response or "", e.ground_truth, name, None, None)
        (s,) = await _run([job], timeout)
        response.headers["X-Reward-Status"] = s.verdict.status
        _done("slime_reward", t0)
        if details:
            return SlimeRewardDetail(score=s.verdict.score, acc=s.verdict.score,
                                     pred=s.verdict.extracted or "", status=s.verdict.status,
                                     reason=s.verdict.reason)
        return s.verdict.score

    @app.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    readiness = {"type": "object", "required": ["ready", "active_workers", "draining"],
                 "properties": {"ready": {"type": "boolean"},
                                "active_workers": {"type": "integer"},
                                "draining": {"type": "boolean"}}}

    @app.get(
        "/readyz", summary="Readiness: workers are warm and the service is not draining",
        responses={
            200: {"description": "Ready",
                  "content": {"application/json": {"schema": readiness}}},
            503: {"description": "Starting, no active worker, or draining",
                  "content": {"application/json": {"schema": readiness}}},
        },
    )
    async def readyz() -> Response:
        st = pool.status()
        body = {"ready": st.ready, "active_workers": st.active, "draining": st.draining}
        return JSONResponse(body, status_code=200 if st.ready else 503)

    @app.get(
        "/metrics", dependencies=auth, summary="Prometheus metrics",
        response_class=PlainTextResponse,  # documents text/plain: the exposition format
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
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
