"""``POST /slime/reward``: slime's remote reward protocol (translation in ``compat.py``).

One request per sample, so it is on the lean route (``reward_service/server/routing.py``) with
FastAPI's own error answers (:class:`~reward_service.server.routing.FastAPIErrorsRoute`): options
from the URL as one model, the reply serialised without validating it again.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.params import Depends
from pydantic import TypeAdapter
from starlette.responses import Response

from reward_service.scorers.registry import resolve_scorer
from reward_service.server.api.openrlhf import COMPAT_RESPONSES, misconfigured
from reward_service.server.compat import CompatError, slime_item
from reward_service.server.routing import FastAPIErrorsRoute
from reward_service.server.schemas import SlimeRewardDetail, SlimeRewardOptions, SlimeRewardRequest
from reward_service.server.service import ScoringService

__all__ = ["router"]

#: What the route answers (and documents): a bare number, or the details.
SlimeReply = float | SlimeRewardDetail
_REPLY = TypeAdapter(SlimeReply).serializer


def router(service: ScoringService, dependencies: Sequence[Depends]) -> APIRouter:
    r = APIRouter()

    async def slime_reward(body: SlimeRewardRequest,
                           options: Annotated[SlimeRewardOptions, Query()]) -> Response:
        """``{"prompt", "response", "label"}`` → the reward as a bare JSON number.

        slime uses the reply body as the reward, so it is ``1.0`` or ``0.0``; the status
        is in the ``X-Reward-Status`` header. With ``?details=true`` the reply is
        ``{"score", "acc", "pred", "status", "reason"}`` for ``--reward-key score``.
        """
        t0 = time.perf_counter()
        timeout = service.open(1, options.timeout_s)
        name = resolve_scorer(options.scorer, options.data_source)  # unknown → 422
        try:
            e = slime_item(body.response, body.label)
        except CompatError as exc:
            raise misconfigured(service, "slime_reward", exc) from None
        job = service.job((("response",), ("label",)), e.response or "", e.ground_truth, name,
                          None, None)
        (s,) = await service.run([job], timeout)
        v = s.verdict
        reply: SlimeReply = v.score
        if options.details:
            reply = SlimeRewardDetail(score=v.score, acc=v.score, pred=v.extracted or "",
                                      status=v.status, reason=v.reason)
        service.done("slime_reward", t0)
        return Response(_REPLY.to_json(reply), media_type="application/json",
                        headers={"X-Reward-Status": v.status})

    r.add_api_route(
        "/slime/reward", slime_reward, methods=["POST"],
        response_model=SlimeReply,  # documents the reply; never validated per request
        dependencies=list(dependencies),
        route_class_override=FastAPIErrorsRoute,  # per-sample: see reward_service/server/routing.py
        summary="slime remote reward: --rm-type remote_rm --rm-url http://HOST:PORT/slime/reward",
        responses=COMPAT_RESPONSES,
    )
    return r
