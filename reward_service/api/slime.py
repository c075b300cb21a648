"""``POST /slime/reward``: slime's remote reward protocol (translation in ``compat.py``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.params import Depends

from reward_service.api.openrlhf import COMPAT_RESPONSES, misconfigured
from reward_service.compat import CompatError, slime_item
from reward_service.schemas import SlimeRewardDetail, SlimeRewardRequest
from reward_service.scorers.registry import resolve_scorer
from reward_service.service import ScoringService

__all__ = ["router"]


def router(service: ScoringService, dependencies: Sequence[Depends]) -> APIRouter:
    r = APIRouter()

    @r.post(
        "/slime/reward", dependencies=list(dependencies),
        response_model=float | SlimeRewardDetail,  # type: ignore[arg-type]
        summary="slime remote reward: --rm-type remote_rm --rm-url http://HOST:PORT/slime/reward",
        responses=COMPAT_RESPONSES,
    )
    async def slime_reward(
        body: SlimeRewardRequest,
        response: Response,
        details: Annotated[bool, Query(description="Answer a dict (with --reward-key score) "
                                                   "instead of a bare number.")] = False,
        scorer: Annotated[str | None, Query(max_length=64,
                                            description="Scorer for the item.")] = None,
        data_source: Annotated[str | None, Query(max_length=256,
                                                 description="Route as verl does.")] = None,
        timeout_s: Annotated[float | None, Query(gt=0, description="Deadline.")] = None,
    ) -> float | SlimeRewardDetail:
        """``{"prompt", "response", "label"}`` → the reward as a bare JSON number.

        slime uses the reply body as the reward, so it is ``1.0`` or ``0.0``; the status
        is in the ``X-Reward-Status`` header. With ``?details=true`` the reply is
        ``{"score", "acc", "pred", "status", "reason"}`` for ``--reward-key score``.
        """
        t0 = time.perf_counter()
        timeout = service.open(1, timeout_s)
        name = resolve_scorer(scorer, data_source)  # unknown → 422
        try:
            e = slime_item(body.response, body.label)
        except CompatError as exc:
            raise misconfigured(service, "slime_reward", exc) from None
        job = service.job(("response", "label"), e.response or "", e.ground_truth, name,
                          None, None)
        (s,) = await service.run([job], timeout)
        response.headers["X-Reward-Status"] = s.verdict.status
        service.done("slime_reward", t0)
        if details:
            return SlimeRewardDetail(score=s.verdict.score, acc=s.verdict.score,
                                     pred=s.verdict.extracted or "", status=s.verdict.status,
                                     reason=s.verdict.reason)
        return s.verdict.score

    return r
