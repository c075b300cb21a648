"""``POST /v1/score`` (and ``POST /score``): the native batch API, on the lean route."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import orjson
from fastapi import APIRouter
from fastapi.params import Depends
from starlette.responses import Response

from reward_service.scorers.registry import UnknownScorerError
from reward_service.server.batcher import Job
from reward_service.server.routing import counted_route
from reward_service.server.schemas import ScoreRequest, ScoreResponse
from reward_service.server.service import PreFailed, ScoringService

__all__ = ["router"]

RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong bearer token"},
    413: {"description": "Too many items, or an item or the body is too large"},
    422: {"description": "Malformed request, unknown scorer, bad timeout_s"},
    503: {"description": "Overloaded or draining; retry after Retry-After seconds"},
}


async def score(service: ScoringService, body: ScoreRequest) -> bytes:
    """The ``ScoreResponse`` for ``body``, as JSON bytes (plain dicts serialised by orjson)."""
    t0 = time.perf_counter()
    timeout_s = service.open(len(body.items), body.timeout_s)
    jobs: list[Job | PreFailed] = []
    for i, item in enumerate(body.items):
        try:
            jobs.append(service.job((("items", i, "response"), ("items", i, "ground_truth")),
                                    item.response, item.ground_truth, item.scorer,
                                    item.data_source, item.extra))
        except UnknownScorerError as exc:
            raise UnknownScorerError(errors=[{"loc": ("body", "items", i, "scorer"),
                                              "msg": str(exc), "type": exc.kind}]) from None
    scored = await service.run(jobs, timeout_s)
    results = [service.result(s, item.id) for item, s in zip(body.items, scored, strict=True)]
    service.done("score", t0)
    return orjson.dumps({"results": results, "count": len(results),
                         "statuses": service.statuses(s.verdict.status for s in scored),
                         "elapsed_s": time.perf_counter() - t0})


def router(service: ScoringService, dependencies: Sequence[Depends]) -> APIRouter:
    r = APIRouter()

    async def score_route(body: ScoreRequest) -> Response:
        # a ScoreResponse, serialised directly (the schema is the route's response_model)
        return Response(await score(service, body), media_type="application/json")

    for path in ("/v1/score", "/score"):
        r.add_api_route(
            path, score_route, methods=["POST"], response_model=ScoreResponse,
            dependencies=dependencies,
            # the hot path (reward_service/server/routing.py); too many items: 413 on the count
            route_class_override=counted_route("items", service.check_count),
            summary="Score a batch of responses against ground truths",
            responses=RESPONSES,
        )
    return r

