"""The lean routes in process (``reward_service/server/routing.py``): which requests take the express
lane past Starlette's stack, what the OpenAPI document says of the routes on it, and the
error answers of :class:`~reward_service.server.routing.FastAPIErrorsRoute` (FastAPI's own)."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any, ClassVar

import httpx
import orjson
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from reward_service.server import routing
from reward_service.server.app import create_app
from reward_service.settings import Settings
from tests.helpers import service, wait_until

SLIME = {"prompt": "p", "response": "So \\boxed{7}.", "label": "7"}
VERIFY = {"responses_create_params": {}, "expected_answer": "7", "extra_field": [1],
          "response": {"output": [{"type": "message",
                                   "content": [{"type": "output_text", "text": "\\boxed{7}"}]}]}}


class Seen:
    """A Starlette middleware that records the paths that reach Starlette's stack."""

    paths: ClassVar[list[str]] = []

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            Seen.paths.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)


def test_framework_routes_take_the_express_lane() -> None:
    """POST /get_reward, /slime/reward and /verify are answered (scored by real workers)
    without passing through Starlette's middleware; /seed_session (no body) and GET requests
    still do."""
    app = create_app(Settings(workers=1, spares=0, api_token=None))
    app.add_middleware(Seen)
    Seen.paths = []

    async def run() -> dict[str, httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return {
                    "slime": await c.post("/slime/reward?details=true", json=SLIME),
                    "verify": await c.post("/verify?scorer=math", json=VERIFY),
                    "get_reward": await c.post("/get_reward", json={
                        "query": ["Q: \\boxed{7}"], "prompts": ["Q: "], "labels": ["7"]}),
                    "bad": await c.post("/slime/reward?timeout_s=0", json={}),
                    "seed": await c.post("/seed_session", json={}),
                    "health": await c.get("/healthz"),
                }

    r = asyncio.run(run())
    assert r["slime"].status_code == 200, r["slime"].text
    assert r["slime"].json()["status"] == "correct"
    assert r["slime"].headers["x-reward-status"] == "correct"
    assert r["verify"].json()["reward"] == 1.0 and r["verify"].json()["extra_field"] == [1]
    assert r["get_reward"].json()["rewards"] == [1.0]
    assert r["bad"].status_code == 422
    assert [e["loc"] for e in r["bad"].json()["detail"]] == [["query", "timeout_s"],
                                                            ["body", "response"]]
    assert r["seed"].json() == {} and r["health"].status_code == 200
    assert Seen.paths == ["POST /seed_session", "GET /healthz"]


def _schema() -> dict[str, Any]:
    return create_app(Settings(workers=1, api_token=None)).openapi()


def test_openapi_documents_every_routes_reply() -> None:
    """Each route's 200 answer has a schema in /openapi.json (``/verify``'s was empty)."""
    empty = []
    for path, ops in _schema()["paths"].items():
        for method, op in ops.items():
            content = op["responses"].get("200", {}).get("content", {})
            if not any(c.get("schema") for c in content.values()):
                empty.append(f"{method.upper()} {path}")
    assert not empty, empty


def test_openapi_documents_the_options_and_replies_of_the_lean_framework_routes() -> None:
    schema = _schema()
    paths = schema["paths"]
    slime = paths["/slime/reward"]["post"]
    params = {p["name"]: p for p in slime["parameters"]}
    assert list(params) == ["details", "scorer", "data_source", "timeout_s"]
    assert all(p["in"] == "query" and not p["required"] for p in params.values())
    assert params["details"]["schema"]["default"] is False
    assert "--reward-key score" in params["details"]["description"]
    assert params["scorer"]["schema"]["anyOf"][0]["maxLength"] == 64
    assert params["timeout_s"]["schema"]["anyOf"][0]["exclusiveMinimum"] == 0
    body = slime["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SlimeRewardRequest"}
    reply = slime["responses"]["200"]["content"]["application/json"]["schema"]
    assert reply["anyOf"] == [{"type": "number"},
                              {"$ref": "#/components/schemas/SlimeRewardDetail"}]
    assert {"401", "413", "422", "503"} <= set(slime["responses"])

    verify = paths["/verify"]["post"]
    params = {p["name"]: p for p in verify["parameters"]}
    assert list(params) == ["scorer", "timeout_s"]
    assert params["scorer"]["schema"]["default"] == "math_verify"
    body = verify["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/NemoGymVerifyRequest"}
    assert {"401", "413", "422", "503"} <= set(verify["responses"])
    reply = verify["responses"]["200"]["content"]["application/json"]["schema"]
    assert reply == {"$ref": "#/components/schemas/NemoGymVerifyResponse"}
    fields = schema["components"]["schemas"]["NemoGymVerifyResponse"]["properties"]
    assert {"response", "expected_answer", "reward", "extracted_answer", "status"} <= set(fields)
    assert "parameters" not in paths["/seed_session"]["post"]


JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(("path", "content", "headers", "detail"), [
    ("/slime/reward", b"{bad", JSON,
     [{"loc": ["body", 1], "msg": "JSON decode error", "type": "json_invalid"}]),
    ("/verify", b"[" * 2000 + b"]" * 2000, JSON,
     [{"loc": ["body"], "msg": "request body is nested too deeply", "type": "json_invalid"}]),
    ("/slime/reward", b'{"response": "\xff", "label": "1"}', JSON,
     [{"loc": ["body"], "msg": "request body is not valid UTF-8", "type": "json_invalid"}]),
    # the lean routes answer a JSON error as FastAPI does: one shape on every route
    ("/v1/score", b"{bad", JSON,
     [{"loc": ["body", 1], "msg": "JSON decode error", "type": "json_invalid"}]),
    ("/get_reward", b"{bad", JSON,
     [{"loc": ["body", 1], "msg": "JSON decode error", "type": "json_invalid"}]),
    ("/v1/score", b'{"items": [{"response": "1", "ground_truth": "1", "scorer": "nope"}]}', JSON,
     [{"loc": ["body", "items", 0, "scorer"], "type": "unknown_scorer", "msg": "unknown scorer "
       "'nope'; known: choice, gsm8k, math, math-verify, math_verify, mcq, numeric"}]),
    ("/slime/reward", b"", JSON, [{"loc": ["body"], "msg": "Field required", "type": "missing"}]),
    ("/verify", b'{"a": 1}', {"Content-Type": "text/plain"},
     [{"loc": ["body"], "msg": "Input should be a valid dictionary or object to extract fields "
                                "from", "type": "model_attributes_type"}]),
    ("/slime/reward", b'{"label": 1}', {},
     [{"loc": ["body"], "msg": "Input should be a valid dictionary or object to extract fields "
                                "from", "type": "model_attributes_type"}]),
    ("/slime/reward?details=maybe&timeout_s=0", b'{"label": 1}', JSON, [
        {"loc": ["query", "details"], "type": "bool_parsing",
         "msg": "Input should be a valid boolean, unable to interpret input"},
        {"loc": ["query", "timeout_s"], "msg": "Input should be greater than 0",
         "type": "greater_than"},
        {"loc": ["body", "response"], "msg": "Field required", "type": "missing"}]),
    # /get_reward keeps the service's own answers (no JSON body: the Content-Type is named)
    ("/get_reward", b'{"query": []}', {"Content-Type": "text/plain"},
     [{"loc": ["body"], "msg": "Content-Type must be application/json", "type": "content_type"}]),
])
def test_fastapi_error_answers(path: str, content: bytes, headers: dict[str, str],
                               detail: object) -> None:
    """What FastAPI's generic handler answered for these routes before they were lean."""
    app = create_app(Settings(workers=1, api_token=None))

    async def post() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as c:
            return await c.post(path, content=content, headers=headers)

    r = asyncio.run(post())
    assert r.status_code == 422 and r.json() == {"detail": detail}, r.text


def test_the_bearer_check_comes_before_the_body_then_fastapis_order() -> None:
    """Without the token a request is refused on its headers (401), before its body is read
    or decoded (issue 27: ``/verify`` and ``/slime/reward`` decoded JSON before the bearer
    check). With it, FastAPI's order holds: an undecodable body is a 422."""
    app = create_app(Settings(workers=1, api_token="s3cret"))

    async def post(content: bytes, **headers: str) -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://t") as c:
            return await c.post("/verify", content=content, headers={**JSON, **headers})

    r = asyncio.run(post(b"{bad"))
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert asyncio.run(post(b"{}")).status_code == 401
    assert asyncio.run(post(b"{bad", authorization="Bearer s3cret")).status_code == 422


HANG = "\\boxed{\\frac{10^{1300000}}{7^{1300000}}}"  # seconds inside C; killed at the deadline


def test_a_slime_or_nemo_gym_client_that_disconnects_gets_its_handler_cancelled() -> None:
    """On the lean route a client gone before its reply is noticed (499, counted by route)
    while its item is still being scored, as on /get_reward."""
    bodies = {"/slime/reward?timeout_s=5": {"response": HANG, "label": "1"},
              "/verify?timeout_s=5": {**VERIFY, "response": {"output": [{
                  "type": "message", "content": [{"type": "output_text", "text": HANG}]}]}}}
    with service(REWARD_WORKERS=2, REWARD_SPARES=0) as svc:
        for target, payload in bodies.items():
            body = json.dumps(payload).encode()
            sock = socket.create_connection(("127.0.0.1", svc.port))
            sock.sendall(b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\n\r\n" % (target.encode(), len(body)) + body)
            assert wait_until(lambda: httpx.get(svc.url + "/v1/info").json()["workers"]
                              ["outstanding_items"] > 0, timeout_s=10)
            sock.close()
            route = target.split("?")[0]
            assert wait_until(lambda: f'code="499",route="{route}"'  # noqa: B023
                              in httpx.get(svc.url + "/metrics").text, timeout_s=3), route


@pytest.mark.parametrize("number", [18446744073709551617, -9223372036854775809,
                                    123456789012345678901234567890])
def test_a_body_with_an_integer_beyond_64_bits_decodes_to_that_integer(number: int) -> None:
    """orjson reads these as floats (the control); ``_decode`` reads them exactly, whether the
    long digit run is a number or sits in a string next to one."""
    raw = json.dumps({"label": number, "text": "x" * 1000}).encode()
    assert orjson.loads(raw)["label"] != number  # the control: orjson rounds it
    assert routing._decode(raw)["label"] == number
    assert type(routing._decode(raw)["label"]) is int
    short = json.dumps({"label": 12345678901234567, "text": "7" * 19}).encode()
    assert routing._decode(short) == json.loads(short)
