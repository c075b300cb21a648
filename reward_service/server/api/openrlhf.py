"""``POST /get_reward``: OpenRLHF's remote reward protocol (translation in ``compat.py``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query
from fastapi.params import Depends
from starlette.responses import Response

from reward_service.errors import RequestTooLargeError
from reward_service.scorers.base import Verdict
from reward_service.scorers.registry import resolve_scorer
from reward_service.scorers.rule_labels import RULE_KEYS, rule_flags
from reward_service.server.batcher import Job
from reward_service.server.compat import CompatError, openrlhf_items
from reward_service.server.routing import counted_route
from reward_service.server.schemas import GetRewardOptions, GetRewardRequest, GetRewardResponse
from reward_service.server.service import PreFailed, ScoringService

__all__ = ["COMPAT_RESPONSES", "get_reward", "misconfigured", "router"]

log = logging.getLogger(__name__)

COMPAT_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong bearer token"},
    413: {"description": "Too many items, or an item or the body is too large"},
    422: {"description": "Not the framework's protocol (lengths, labels), bad options"},
    503: {"description": "Overloaded or draining; retry after Retry-After seconds"},
}


def _rule_logs(reasons: list[str | None]) -> dict[str, list[float]]:
    """``{"rule/hedged": [0/1 per item], ...}``: which scoring rule decided each item."""
    flags = [rule_flags(r) for r in reasons]
    return {key: [f[key] for f in flags] for key in RULE_KEYS}


async def get_reward(service: ScoringService, body: GetRewardRequest,
                     options: GetRewardOptions) -> bytes:
    """The ``GetRewardResponse`` for ``body``, as JSON bytes (plain dicts, orjson)."""
    t0 = time.perf_counter()
    timeout = service.open(len(body.query), options.timeout_s)
    name = resolve_scorer(options.scorer, options.data_source)  # unknown → 422
    max_chars = service.settings.max_response_chars
    for i, query in enumerate(body.query):
        if len(query) > max_chars:  # checked on the query as sent, before any work on it
            raise RequestTooLargeError(
                f"query[{i}] has {len(query)} characters; at most {max_chars}")
    try:
        extracted = openrlhf_items(body.query, body.prompts, body.labels)
    except CompatError as exc:
        raise misconfigured(service, "get_reward", exc) from None
    jobs: list[Job | PreFailed] = []
    for i, e in enumerate(extracted):
        if e.how not in ("prompt", ""):
            service.metrics.compat_located.labels(how=e.how).inc()
        if e.response is None:
            jobs.append((name, Verdict("error", reason=e.reason)))
        else:
            jobs.append(service.job((("query", i), ("labels", i)), e.response, e.ground_truth,
                                    name, None, None))
    scored = await service.run(jobs, timeout)
    statuses = [s.verdict.status for s in scored]
    rewards = [s.verdict.score for s in scored]
    logs = {
        "acc": [float(st == "correct") for st in statuses],
        **{st_name: [float(st == st_name) for st in statuses]
           for st_name in ("no_answer", "bad_ground_truth", "timeout", "error")},
        "prompt_not_found": [float(e.how not in ("prompt", "")) for e in extracted],
        **_rule_logs([s.verdict.reason for s in scored]),  # rule/hedged, ...: when a policy hedges
    }
    results = [service.result(s) for s in scored]
    for r, e in zip(results, extracted, strict=True):  # how an unusual item was located
        r["reason"] = r["reason"] or e.reason
    service.done("get_reward", t0)
    return orjson.dumps({"rewards": rewards, "scores": rewards, "extra_logs": logs,
                         "statuses": service.statuses(statuses), "results": results})


def misconfigured(service: ScoringService, route: str, exc: CompatError) -> CompatError:
    """A framework request refused as a whole: the trainer is misconfigured, and its own log
    may not say why (OpenRLHF logs failures at INFO), so the service says it: a WARNING with
    the reason, ``reward_compat_rejected_total{route, reason}``, and the 422 body."""
    service.metrics.compat_rejected.labels(route=route, reason=exc.reason).inc()
    log.warning("framework request refused", extra={"route": route, "reason": exc.reason,
                                                    "detail": str(exc)})
    return exc


def router(service: ScoringService, dependencies: Sequence[Depends]) -> APIRouter:
    r = APIRouter()

    async def get_reward_route(body: GetRewardRequest,
                               options: Annotated[GetRewardOptions, Query()]) -> Response:
        """``{"query", "prompts", "labels"}`` → ``{"rewards", "scores", "extra_logs"}``.

        Options go in the URL, since OpenRLHF posts only the body:
        ``--remote_rm_url 'http://HOST:PORT/get_reward?scorer=gsm8k&timeout_s=10'``.
        """
        # a GetRewardResponse, serialised directly (the schema is the route's response_model)
        return Response(await get_reward(service, body, options), media_type="application/json")

    r.add_api_route(
        "/get_reward", get_reward_route, methods=["POST"], response_model=GetRewardResponse,
        dependencies=list(dependencies),
        # per-sample traffic (reward_service/server/routing.py); too many queries: 413 on the count
        route_class_override=counted_route("query", service.check_count),
        summary="OpenRLHF remote reward: --remote_rm_url http://HOST:PORT/get_reward",
        responses=COMPAT_RESPONSES,
    )
    return r
