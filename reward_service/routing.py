"""A lean FastAPI route for the scoring hot path.

FastAPI's generic request handler resolves the dependency graph, decodes the body with the
standard library, validates it, then validates the returned model a second time before
serialising it. For ``POST /v1/score`` with one item that was about a third of the server's
CPU per request. :class:`LeanJSONRoute` keeps everything FastAPI derives from the endpoint's
signature (the OpenAPI schema, ``/docs``) and replaces only the per-request work:

* plain ``Depends(fn)`` dependencies are awaited as ``fn(request)`` (no sub-dependencies);
* the body must be ``application/json`` (or ``+json``), as FastAPI's strict content type
  requires; it is decoded with orjson, falling back to the standard library for what orjson
  refuses but Python accepts (``NaN``, integers over 64 bits, lone surrogates such as
  ``"\\ud800"``, so that pydantic and the app answer them with a 422 naming the field), then
  validated once with pydantic;
* the returned model is serialised by pydantic-core straight to JSON bytes, or the endpoint
  returns a ``Response`` itself (``POST /v1/score`` builds its reply as plain dicts and
  serialises them with orjson).

A client that disconnects before its reply is ready gets its handler cancelled
(:func:`unless_disconnected`, :class:`ClientDisconnected`), so its queued items are never
scored; ``/get_reward`` uses the same helper.

Errors raise ``InvalidRequestError`` with FastAPI's ``("body", ...)`` locations, so the
one error handler (``api/errors.py``) answers them exactly as it answers FastAPI's own.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import orjson
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from reward_service.errors import ClientDisconnected, InvalidRequestError

__all__ = ["LeanJSONRoute", "body_error", "unless_disconnected"]


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


def _decode(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InvalidRequestError.at(("body",), body_error(exc), "json_invalid") from None


def body_error(exc: BaseException | None) -> str:
    """Why a body could not be decoded, in words (a 2,000-deep array is not a server error)."""
    if isinstance(exc, RecursionError):
        return "request body is nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return "request body is not valid UTF-8"
    return "request body is not valid JSON"


async def unless_disconnected(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``, cancelling it if the client disconnects first. uvicorn keeps running a
    handler whose client is gone; a trainer whose read timed out would then wait, on its
    retry, behind the scoring of a batch nobody will read. Cancelling the handler drops the
    batch's queued chunks (``WorkerPool.submit``)."""
    task = asyncio.ensure_future(work)

    async def disconnected() -> None:  # the body is read: the next message is the disconnect
        while (await request.receive())["type"] != "http.disconnect":
            pass

    watcher = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # this handler itself is cancelled (shutdown)
        task.cancel()
        watcher.cancel()
        raise
    watcher.cancel()
    if task.done():
        return task.result()  # the endpoint's reply, or its exception for the handlers
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)  # its pool requests are withdrawn
    raise ClientDisconnected


class LeanJSONRoute(APIRoute):
    """For endpoints ``async def f(body: Model) -> ResponseModel`` (one JSON body parameter,
    nothing else) whose dependencies take only the request."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        params = list(inspect.signature(self.endpoint).parameters.values())
        body_field = self.body_field
        model = body_field.field_info.annotation if body_field is not None else None
        if (len(params) != 1 or body_field is None or not isinstance(model, type)
                or not issubclass(model, BaseModel) or params[0].name != body_field.name):
            raise TypeError(f"LeanJSONRoute needs one pydantic body parameter: {self.path}")
        response_model = self.response_model
        if not (isinstance(response_model, type) and issubclass(response_model, BaseModel)):
            raise TypeError(f"LeanJSONRoute needs a pydantic response_model: {self.path}")
        checks: list[Callable[[Request], Awaitable[None]]] = [
            d.dependency for d in self.dependencies if d.dependency is not None
        ]
        endpoint: Callable[[BaseModel], Awaitable[Any]] = self.endpoint
        serializer = response_model.__pydantic_serializer__
        status_code = self.status_code or 200

        async def handler(request: Request) -> Response:
            for check in checks:
                await check(request)
            if not _is_json(request.headers.get("content-type", "")):
                raise InvalidRequestError.at(("body",), "Content-Type must be application/json",
                                             "content_type")
            data = _decode(await request.body())
            try:
                body = model.model_validate(data)
            except ValidationError as exc:
                raise InvalidRequestError(errors=[
                    {**e, "loc": ("body", *e["loc"])}
                    for e in exc.errors(include_url=False, include_input=False)
                ]) from None
            result = await unless_disconnected(request, endpoint(body))
            if isinstance(result, Response):
                return result
            return Response(serializer.to_json(result), status_code=status_code,
                            media_type="application/json")

        return handler
