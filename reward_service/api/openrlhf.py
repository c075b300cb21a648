"""``POST /get_reward``: OpenRLHF's remote reward protocol (translation in ``compat.py``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.params import Depends

from reward_service.batcher import Job
from reward_service.compat import CompatError, openrlhf_items
from reward_service.errors import RequestTooLargeError
from reward_service.routing import unless_disconnected
from reward_service.schemas import GetRewardRequest, GetRewardResponse
from reward_service.scorers.base import Verdict
from reward_service.scorers.registry import resolve_scorer
from reward_service.scorers.rules import RULE_KEYS, rule_flags
from reward_service.service import PreFailed, ScoringService

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


async def get_reward(service: ScoringService, body: GetRewardRequest, *, scorer: str | None,
                     data_source: str | None, timeout_s: float | None) -> GetRewardResponse:
    t0 = time.perf_counter()
    timeout = service.open(len(body.query), timeout_s)
    name = resolve_scorer(scorer, data_source)  # unknown → 422
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
            jobs.append(service.job((f"query[{i}]", f"labels[{i}]"), e.response, e.ground_truth,
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
    return GetRewardResponse.model_validate({
        "rewards": rewards, "scores": rewards, "extra_logs": logs,
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

    @r.post(
        "/get_reward", dependencies=list(dependencies), response_model=GetRewardResponse,
        summary="OpenRLHF remote reward: --remote_rm_url http://HOST:PORT/get_reward",
        responses=COMPAT_RESPONSES,
    )
    async def get_reward_route(
        body: GetRewardRequest,
        request: Request,
        scorer: Annotated[str | None, Query(max_length=64,
                                            description="Scorer for every item.")] = None,
        data_source: Annotated[str | None, Query(max_length=256,
                                                 description="Route as verl does.")] = None,
        timeout_s: Annotated[float | None, Query(gt=0, description="Deadline per item.")] = None,
    ) -> GetRewardResponse:
        """``{"query", "prompts", "labels"}`` → ``{"rewards", "scores", "extra_logs"}``.

        Options go in the URL, since OpenRLHF posts only the body:
        ``--remote_rm_url 'http://HOST:PORT/get_reward?scorer=gsm8k&timeout_s=10'``.
        """
        # a batch route like /v1/score: a client that is gone must not keep workers busy
        reply: GetRewardResponse = await unless_disconnected(request, get_reward(
            service, body, scorer=scorer, data_source=data_source, timeout_s=timeout_s))
        return reply

    return r
