"""NeMo-Gym's math resource server contract (``POST /verify``), served by the service.

Matched to NeMo-Gym 0.4.0 (``resources_servers/math_with_judge/app.py`` and
``nemo_gym/base_resources_server.py``): an agent posts the task row it was given
(``responses_create_params``, ``question``, ``expected_answer``, any other fields) plus the
model's ``response`` (an OpenAI Responses-API object); the server joins the ``output_text``
parts of every ``message`` item of ``response.output``, checks them against
``expected_answer`` and answers the request *echoed whole* plus ``reward``,
``extracted_answer``, ``library_reward`` and ``judge_evaluations`` (always ``null`` here:
there is no LLM judge, the library verdict is final, as with ``should_use_judge: false``).
``status`` and ``reason`` are added (the service's per-item status). ``/seed_session``
answers ``{}`` as NeMo-Gym's base server does.

``/verify`` is called once per rollout, so it is on the lean route
(``reward_service/server/routing.py``) with FastAPI's own error answers
(:class:`~reward_service.server.routing.FastAPIErrorsRoute`). ``/seed_session`` takes no body (any
body is ignored, as before), so it stays on FastAPI's generic route.

Point NeMo-Gym's math environment at the service instead of its own ``math_with_judge``
server (see docs/integrations.md). Options go in the URL: ``?scorer=`` (default
``math_verify``, the library NeMo-Gym's server uses), ``?timeout_s=``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.params import Depends
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from reward_service.errors import InvalidRequestError
from reward_service.scorers.base import Status
from reward_service.scorers.registry import resolve_scorer
from reward_service.server.api.openrlhf import COMPAT_RESPONSES
from reward_service.server.routing import FastAPIErrorsRoute
from reward_service.server.service import ScoringService

__all__ = ["NemoGymResponse", "NemoGymVerifyOptions", "NemoGymVerifyRequest", "response_text", "router"]

#: NeMo-Gym's math server uses math-verify; so does this route unless ``?scorer=`` says otherwise.
DEFAULT_SCORER = "math_verify"


class NemoGymResponse(BaseModel):
    """The model's OpenAI Responses-API object: ``output`` is read, every field is echoed."""

    model_config = ConfigDict(extra="allow")

    output: list[Any]


class NemoGymVerifyRequest(BaseModel):
    """``LibraryJudgeMathVerifyRequest``: the fields read here; every other field is kept and
    echoed back, as NeMo-Gym's server does with ``**body.model_dump()``."""

    model_config = ConfigDict(extra="allow")

    responses_create_params: dict[str, Any]
    response: NemoGymResponse
    expected_answer: str
    question: str | None = None


class NemoGymVerifyResponse(NemoGymVerifyRequest):
    """``/verify``'s reply: the request echoed (every field, extra ones too), plus the verdict
    in ``math_with_judge``'s fields and the service's own ``status`` and ``reason``."""

    reward: float = Field(description="1.0 when the answer equals expected_answer, else 0.0.")
    extracted_answer: str | None = Field(description="The final answer taken from the response.")
    library_reward: float = Field(description="math_with_judge's library reward: the reward.")
    judge_evaluations: None = Field(description="Always null: no LLM judge is asked.")
    status: Status = Field(description="The item's status (see POST /v1/score).")
    reason: str | None = Field(description="Why, for statuses other than correct/incorrect.")


class NemoGymVerifyOptions(BaseModel):
    """``/verify``'s options, in the URL (NeMo-Gym posts only the body)."""

    scorer: str = Field(DEFAULT_SCORER, max_length=64,
                        description="Scorer (default math_verify).")
    timeout_s: float | None = Field(None, gt=0, description="Deadline.")


def response_text(output: list[Any]) -> str:
    """The ``output_text`` parts of every ``message`` item of a Responses-API ``output``,
    joined (``math_with_judge/app.py: verify``); reasoning and tool-call items are skipped."""
    parts: list[str] = []
    for item in output:
        if not isinstance(item, dict) or item.get("type") != "message":
            continue
        contents = item.get("content")
        for content in contents if isinstance(contents, list) else ():
            if isinstance(content, dict) and content.get("type") == "output_text":
                text = content.get("text")
                if isinstance(text, str):
                    parts.append(text)
    return "".join(parts)


def _rfc8259(reply: dict[str, Any]) -> str:
    """The reply as RFC 8259 JSON, ASCII-escaped (an echoed field may hold a lone surrogate:
    valid JSON, not UTF-8). An echoed number that is not finite (``1e400`` reads as infinity)
    has no JSON form: NeMo-Gym's strict parser refused the ``Infinity`` the standard library
    wrote, and the rollout lost its reward. It is a 422 naming why, never invalid JSON."""
    try:
        return json.dumps(reply, ensure_ascii=True, allow_nan=False)
    except ValueError:
        raise InvalidRequestError.at(
            ("body",), "a number in the request is out of range (not finite as a double, "
            "e.g. 1e400); it cannot be echoed as JSON", "value_error") from None


def router(service: ScoringService, dependencies: Sequence[Depends]) -> APIRouter:
    """``POST /verify`` and ``POST /seed_session``."""
    r = APIRouter()

    async def verify(body: NemoGymVerifyRequest,
                     options: Annotated[NemoGymVerifyOptions, Query()]) -> Response:
        t0 = time.perf_counter()
        timeout = service.open(1, options.timeout_s)
        text = response_text(body.response.output)
        job = service.job((("response",), ("expected_answer",)), text, body.expected_answer,
                          resolve_scorer(options.scorer, None), None, None)
        (s,) = await service.run([job], timeout)
        v = s.verdict
        reply = {**body.model_dump(), "reward": v.score, "extracted_answer": v.extracted,
                 "library_reward": v.score, "judge_evaluations": None, "status": v.status,
                 "reason": v.reason}
        service.done("nemo_gym_verify", t0)
        return Response(_rfc8259(reply), media_type="application/json")

    r.add_api_route(
        "/verify", verify, methods=["POST"], dependencies=list(dependencies),
        route_class_override=FastAPIErrorsRoute,  # per rollout: see reward_service/server/routing.py
        response_model=NemoGymVerifyResponse,  # the schema only: the reply is built above
        responses=COMPAT_RESPONSES, summary="NeMo-Gym math resource server: POST /verify")

    @r.post("/seed_session", dependencies=list(dependencies),
            summary="NeMo-Gym: start a session (nothing to set up)")
    async def seed_session() -> dict[str, Any]:
        return {}

    return r
