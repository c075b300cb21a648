"""``POST /get_reward``: OpenRLHF's remote reward protocol (translation in ``compat.py``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.params import Depends

from reward_service.batcher import Job
from reward_service.compat import openrlhf_items
from reward_service.errors import RequestTooLargeError
from reward_service.routing import unless_disconnected
from reward_service.schemas import GetRewardRequest, GetRewardResponse
from reward_service.scorers.base import Verdict
from reward_service.scorers.registry import resolve_scorer
from reward_service.scorers.rules import RULE_KEYS, rule_flags
from reward_service.service import PreFailed, ScoringService

__all__ = ["COMPAT_RESPONSES", "get_reward", "router"]

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
    extracted = openrlhf_items(body.query, body.prompts, body.labels)  # CompatError → 422
    max_chars = service.settings.max_response_chars
    jobs: list[Job | PreFailed] = []
    for i, (query, e) in enumerate(zip(body.query, extracted, strict=True)):
        if len(query) > max_chars:  # checked on the query as sent
            raise RequestTooLargeError(
                f"query[{i}] has {len(query)} characters; at most {max_chars}")
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
        **_rule_logs([s.verdict.reason for s in scored]),  # rule/hedged, ...: when a policy hedges
    }
    service.done("get_reward", t0)
    return GetRewardResponse.model_validate({
        "rewards": rewards, "scores": rewards, "extra_logs": logs,
        "statuses": service.statuses(statuses), "results": [service.result(s) for s in scored]})


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
