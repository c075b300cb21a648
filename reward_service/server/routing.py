"""A lean FastAPI route for the scoring hot path.

FastAPI's generic request handler resolves the dependency graph, decodes the body with the
standard library, validates it, then validates the returned model a second time before
serialising it. For ``POST /v1/score`` with one item that was about a third of the server's
CPU per request. :class:`LeanJSONRoute` keeps everything FastAPI derives from the endpoint's
signature (the OpenAPI schema, ``/docs``) and replaces only the per-request work:

* plain ``Depends(fn)`` dependencies are awaited as ``fn(request)`` (no sub-dependencies);
* the body must be ``application/json`` (or ``+json``), as FastAPI's strict content type
  requires; it is decoded with orjson, falling back to the standard library for what orjson
  refuses but Python accepts (``NaN``, lone surrogates such as ``"\\ud800"``, so that
  pydantic and the app answer them with a 422 naming the field) and for a body with a run of
  19 or more digits (orjson turns an integer over 64 bits into a float, so a label such as
  ``123456789012345678901234567890`` would be scored as ``1.2345678901234568e+29``), then
  validated once with pydantic;
* the returned model is serialised by pydantic-core straight to JSON bytes, or the endpoint
  returns a ``Response`` itself (``POST /v1/score`` builds its reply as plain dicts and
  serialises them with orjson).

:class:`FastAPIErrorsRoute` is the same route with FastAPI's generic handler's error answers
(the order of the checks, the body's Content-Type rule, JSON errors located at
``("body", position)``, the options' and the body's errors answered together) for the
framework protocols whose clients saw those answers first (``/slime/reward``, ``/verify``).

Options in the URL come as one pydantic model, ``options: Annotated[Model, Query()]`` (the
second parameter, if any), validated once from the query string; errors are located at
``("query", field)`` as FastAPI locates them.

:class:`ExpressLane` sends ``POST`` requests for lean routes straight to their handler,
past Starlette's exception middleware, router and FastAPI's per-route wrappers: with one
item per request (OpenRLHF's and slime's per-sample traffic) those took about a third of the
server's CPU per request. It sits inside the body-limit middleware, and its errors go to the
same renderer (``api/errors.py``), so a request answers the same either way.

A client that disconnects before its reply is ready gets its handler cancelled
(:func:`unless_disconnected`, :class:`ClientDisconnected`), so its queued items are never
scored; ``/get_reward`` uses the same helper.

Errors raise ``InvalidRequestError`` with FastAPI's ``("body", ...)`` locations, so the
one error handler (``api/errors.py``) answers them exactly as it answers FastAPI's own.
"""

from __future__ import annotations

import asyncio
import email.message
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, get_args, get_origin
from urllib.parse import parse_qsl

import orjson
from fastapi.params import Query
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from reward_service.errors import ClientDisconnected, InvalidRequestError

__all__ = ["ON_DISCONNECT", "ExpressLane", "FastAPIErrorsRoute", "LeanJSONRoute",
           "body_error", "unless_disconnected"]


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/")
                                           and media.endswith("+json"))


#: A run of 19 digits may be an integer over 64 bits, which orjson parses as a float. Found
#: as a run of zeros once every digit reads as one: ``bytes.translate`` and a substring
#: search cost ~2 ns a byte, a ``[0-9]{19}`` regex search ~25 (13 ms on a 0.5 MB body).
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_LONG_DIGITS = b"0" * 19

_UNDECODED = object()


def _orjson_loads(raw: bytes) -> Any:
    """orjson's reading of ``raw``, or ``_UNDECODED`` where only the standard library reads
    it as Python does (or refuses it, with its reason)."""
    if _LONG_DIGITS not in raw.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _UNDECODED


def _decode(raw: bytes) -> Any:
    """``json.loads(raw)`` (orjson first, for speed: it accepts nothing the standard library
    refuses). Refusals are answered as FastAPI answers a JSON error, on every route: at
    ``("body", position)``, ``JSON decode error``; a body that is not UTF-8 or is nested too
    deeply at ``("body",)``, saying so."""
    if (data := _orjson_loads(raw)) is not _UNDECODED:
        return data
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidRequestError.at(("body", exc.pos), "JSON decode error",
                                     "json_invalid") from None
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise InvalidRequestError.at(("body",), body_error(exc), "json_invalid") from None


def body_error(exc: BaseException | None) -> str:
    """Why a body could not be decoded, in words (a 2,000-deep array is not a server error)."""
    if isinstance(exc, RecursionError):
        return "request body is nested too deeply"
    if isinstance(exc, UnicodeDecodeError):
        return "request body is not valid UTF-8"
    return "request body is not valid JSON"


#: Where a server may offer a cheaper way to learn of a disconnect than a watcher task:
#: ``scope["extensions"][ON_DISCONNECT](callback)`` calls ``callback()`` (soon) once the
#: client's connection is lost, and returns a function that withdraws it. The service's
#: uvicorn protocol (``api/connections.py``) offers it; without it a task watches ``receive``.
ON_DISCONNECT = "reward_service.on_disconnect"


async def unless_disconnected(request: Request, work: Coroutine[Any, Any, Any]) -> Any:
    """Await ``work``, cancelling it if the client disconnects first. uvicorn keeps running a
    handler whose client is gone; a trainer whose read timed out would then wait, on its
    retry, behind the scoring of a batch nobody will read. Cancelling the handler drops the
    batch's queued chunks (``WorkerPool.submit``). ``work`` runs in this task; the server's
    :data:`ON_DISCONNECT` hook, else one watcher task, says when the client is gone (a task
    per request was ~1/6 of the server's CPU per one-sample request)."""
    this = asyncio.current_task()
    assert this is not None
    gone = finished = False

    def lost() -> None:
        nonlocal gone
        if not finished and not gone:
            gone = True
            this.cancel()

    hook = request.scope.get("extensions", {}).get(ON_DISCONNECT)
    withdraw = hook(lost) if hook is not None else _watch(request, lost)
    try:
        return await work
    except asyncio.CancelledError:
        if not gone:  # this handler itself is cancelled (shutdown)
            raise
        this.uncancel()  # the cancel was ours: answered as ClientDisconnected
        raise ClientDisconnected from None
    finally:
        finished = True
        withdraw()


def _watch(request: Request, lost: Callable[[], None]) -> Callable[[], object]:
    """A task that calls ``lost()`` when ``receive`` says the client is gone (the body is
    read: the next message is the disconnect); returns its ``cancel``."""

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        lost()

    return asyncio.ensure_future(disconnected()).cancel


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


def _validated(model: type[BaseModel], data: Any, where: str) -> BaseModel:
    errors: list[dict[str, Any]] = []
    value = _collect(errors, model, data, where)
    if value is None:
        raise InvalidRequestError(errors=errors)
    return value


def _query_model(param: inspect.Parameter) -> type[BaseModel] | None:
    """``Annotated[Model, Query()]``: the model, else None."""
    args = get_args(param.annotation) if get_origin(param.annotation) is not None else ()
    if (len(args) == 2 and isinstance(args[0], type) and issubclass(args[0], BaseModel)
            and isinstance(args[1], Query)):
        return args[0]
    return None


def _query(request: Request) -> dict[str, str]:
    """The query string as Starlette reads it: the last of repeated keys wins."""
    return dict(parse_qsl(request.scope["query_string"].decode("latin-1"),
                          keep_blank_values=True))


_MISSING = object()


@functools.lru_cache(maxsize=64)
def _fastapi_json(content_type: str) -> bool:
    """FastAPI's test of a Content-Type for a JSON body (``email.message``'s parsing)."""
    if not content_type:
        return False  # FastAPI's strict content type: no header, no JSON
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json"))


def _collect(errors: list[dict[str, Any]], model: type[BaseModel], data: Any, where: str,
             *, from_attributes: bool = False) -> BaseModel | None:
    try:
        return model.model_validate(data, from_attributes=from_attributes)
    except ValidationError as exc:
        errors.extend({**e, "loc": (where, *e["loc"])}
                      for e in exc.errors(include_url=False, include_input=False))
        return None


Parser = Callable[[Request], Awaitable[list[BaseModel]]]


class LeanJSONRoute(APIRoute):
    """For endpoints ``async def f(body: Model[, options: Annotated[Options, Query()]])``
    (one JSON body, optionally one model of URL options) whose dependencies take only the
    request. The ``response_model`` (any type, or none when the endpoint returns a
    ``Response``) documents the reply and serialises a result that is not a ``Response``;
    it is never validated. ``lean_handler`` is what :class:`ExpressLane` calls."""

    lean_handler: Handler
    #: a check of the decoded body before it is validated (:func:`counted_route`), or None
    precheck: Callable[[Any], None] | None = None

    def get_route_handler(self) -> Handler:
        params = list(inspect.signature(self.endpoint, eval_str=True).parameters.values())
        body_field = self.body_field
        model = body_field.field_info.annotation if body_field is not None else None
        options = _query_model(params[1]) if len(params) == 2 else None
        if (len(params) != (1 if options is None else 2) or body_field is None
                or not isinstance(model, type) or not issubclass(model, BaseModel)
                or params[0].name != body_field.name):
            raise TypeError(f"LeanJSONRoute needs one pydantic body parameter (and at most "
                            f"one Query() model): {self.path}")
        checks: list[Callable[[Request], Awaitable[None]]] = [
            d.dependency for d in self.dependencies if d.dependency is not None
        ]
        parse = self.parser(model, options, checks)
        endpoint: Callable[..., Coroutine[Any, Any, Any]] = self.endpoint
        serializer = (None if self.response_model is None
                      else TypeAdapter(self.response_model).serializer)
        status_code = self.status_code or 200

        async def handler(request: Request) -> Response:
            result = await unless_disconnected(request, endpoint(*await parse(request)))
            if isinstance(result, Response):
                return result
            if serializer is None:
                raise TypeError(f"{request.url.path}: no response_model to serialise "
                                f"{type(result).__name__}")
            return Response(serializer.to_json(result), status_code=status_code,
                            media_type="application/json")

        self.lean_handler = handler
        return handler

    def parser(self, model: type[BaseModel], options: type[BaseModel] | None,
               checks: list[Callable[[Request], Awaitable[None]]]) -> Parser:
        """The endpoint's arguments from a request, or the request's error: the service's
        own order (dependencies, content type, body, options; the first error answers)."""

        precheck = self.precheck

        async def parse(request: Request) -> list[BaseModel]:
            for check in checks:
                await check(request)
            if not _is_json(request.headers.get("content-type", "")):
                raise InvalidRequestError.at(("body",), "Content-Type must be application/json",
                                             "content_type")
            data = _decode(await request.body())
            if precheck is not None:
                precheck(data)
            args = [_validated(model, data, "body")]
            if options is not None:
                args.append(_validated(options, _query(request), "query"))
            return args

        return parse


def counted_route(field: str, check: Callable[[int], None]) -> type[LeanJSONRoute]:
    """A :class:`LeanJSONRoute` that passes the length of the body's list ``field`` to
    ``check`` (which raises, e.g. the 413 of too many items) before any element is validated:
    a 7 MB body of 200,000 one-character items held the event loop 0.32 s in validation
    before its 413, and a request on its count alone takes what decoding takes."""

    def precheck(data: Any) -> None:
        value = data.get(field) if isinstance(data, dict) else None
        if isinstance(value, list):
            check(len(value))

    return type(f"Counted{field.title()}Route", (LeanJSONRoute,),
                {"precheck": staticmethod(precheck)})


class FastAPIErrorsRoute(LeanJSONRoute):
    """A :class:`LeanJSONRoute` whose errors are FastAPI's generic handler's, answer for
    answer (``/slime/reward``, ``/verify``: framework protocols that clients already see
    answered so). The body is read and decoded first (an undecodable body is a 422 before the
    route's bearer check; a request without the token never gets here: the front refuses it
    on its headers, ``server/api/guards.py``), JSON only for an ``application/json`` or ``+json`` Content-Type (any other
    body, or none, is validated as it is and fails as the wrong type), a JSON error is located
    at ``("body", position)``; then the dependencies; then the options and the body are both
    validated, and every error of both answers."""

    def parser(self, model: type[BaseModel], options: type[BaseModel] | None,
               checks: list[Callable[[Request], Awaitable[None]]]) -> Parser:
        async def parse(request: Request) -> list[BaseModel]:
            raw = await request.body()
            data = (_decode(raw) if raw and _fastapi_json(request.headers.get(
                "content-type", "")) else raw if raw else _MISSING)
            for check in checks:
                await check(request)
            errors: list[dict[str, Any]] = []
            query = (None if options is None
                     else _collect(errors, options, _query(request), "query"))
            if data is _MISSING:
                errors.append({"loc": ("body",), "msg": "Field required", "type": "missing"})
                body = None
            else:
                body = _collect(errors, model, data, "body", from_attributes=True)
            if errors:
                raise InvalidRequestError(errors=errors)
            assert body is not None
            return [body] if query is None else [body, query]

        return parse


ErrorResponder = Callable[[Request, Exception], Awaitable[Response]]


class ExpressLane:
    """ASGI middleware: ``POST`` to a :class:`LeanJSONRoute`'s exact path runs its handler
    here; anything else goes on to the app. The route is put in the scope (as the router
    would) so errors and metrics are labelled by its path template; errors the responder
    does not know (a bug) propagate to Starlette's server-error middleware, as they would
    from the router."""

    def __init__(self, app: ASGIApp, *, routes: Iterable[BaseRoute],
                 responder: ErrorResponder) -> None:
        self.app = app
        self.responder = responder
        self.routes: dict[str, LeanJSONRoute] = {
            r.path: r for r in routes if isinstance(r, LeanJSONRoute) and "POST" in (r.methods or ())
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(scope["path"]) if scope["type"] == "http" else None
        if route is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        scope["route"] = route
        request = Request(scope, receive, send)
        try:
            response = await route.lean_handler(request)
        except Exception as exc:
            response = await self.responder(request, exc)
        await response(scope, receive, send)
