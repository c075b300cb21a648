"""Operations routes: ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/info``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from fastapi import APIRouter
from fastapi.params import Depends
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from reward_service import __version__
from reward_service.scorers.registry import ALIASES, DEFAULT_SCORER, SCORERS
from reward_service.server.exposure import exposure_warning
from reward_service.server.schemas import InfoResponse
from reward_service.server.service import ScoringService

__all__ = ["router"]

_READINESS = {"type": "object", "required": ["ready", "active_workers", "draining"],
              "properties": {"ready": {"type": "boolean"},
                             "active_workers": {"type": "integer"},
                             "draining": {"type": "boolean"}}}


def router(service: ScoringService, dependencies: Sequence[Depends], *, auth: bool) -> APIRouter:
    r = APIRouter()
    pool, metrics, settings = service.pool, service.metrics, service.settings

    @r.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @r.get(
        "/readyz", summary="Readiness: workers are warm and the service is not draining",
        responses={
            200: {"description": "Ready",
                  "content": {"application/json": {"schema": _READINESS}}},
            503: {"description": "Starting, no active worker, or draining",
                  "content": {"application/json": {"schema": _READINESS}}},
        },
    )
    async def readyz() -> Response:
        st = pool.status()
        body = {"ready": st.ready, "active_workers": st.active, "draining": st.draining}
        return JSONResponse(body, status_code=200 if st.ready else 503)

    @r.get(
        "/metrics", dependencies=list(dependencies), summary="Prometheus metrics",
        response_class=PlainTextResponse,  # documents text/plain: the exposition format
        responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
    )
    async def metrics_endpoint() -> Response:
        st = pool.status()
        for state in ("active", "spare", "starting", "retiring"):
            metrics.workers.labels(state=state).set(getattr(st, state))
        metrics.outstanding_items.set(st.outstanding_items)
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @r.get("/v1/info", dependencies=list(dependencies), response_model=InfoResponse,
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
            auth=auth,
            warnings=[w for w in (exposure_warning(settings),) if w is not None],
        )

    return r
