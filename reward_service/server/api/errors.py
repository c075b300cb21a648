"""The one place errors become HTTP answers.

Every error of the service is a :class:`~reward_service.errors.RewardServiceError` that knows
its status code, public detail and headers; :func:`error_responder` turns one into a JSON
answer and counts it in ``reward_http_requests_total`` under the *route template* (never the
raw URL path: 12k distinct 404 paths must not grow ``/metrics`` without bound). FastAPI's and
Starlette's own errors (validation, 404, 405, undecodable bodies) are translated into the
tree first, so there is one renderer for all of them. It answers for FastAPI's exception
handlers, for :class:`~reward_service.server.routing.ExpressLane` and for the body limits
(``api/guards.py``), which refuse a request before any route is matched.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from reward_service.errors import (
    InvalidRequestError,
    RequestError,
    RewardServiceError,
)
from reward_service.server.metrics import Metrics
from reward_service.server.routing import ErrorResponder, body_error

__all__ = ["error_responder", "install_error_handlers", "route_label"]

log = logging.getLogger(__name__)


def route_label(request: Request) -> str:
    """The matched route's path template, or ``unmatched``: a bounded label set."""
    route = request.scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


class _HTTPError(RequestError):
    """A Starlette/FastAPI HTTP error (404, 405, ...) with its own status and detail."""

    def __init__(self, status_code: int, detail: str,
                 headers: Mapping[str, str] | None) -> None:
        super().__init__(detail)
        self.status_code = status_code  # type: ignore[misc]  # per instance here
        self._headers = headers

    def headers(self, *, retry_after_s: int) -> Mapping[str, str] | None:
        return self._headers


def error_responder(metrics: Metrics, *, retry_after_s: int,
                    paths: Collection[str]) -> ErrorResponder:
    """The one renderer: an error of the tree, or FastAPI's/Starlette's own, becomes its JSON
    answer; anything else (a bug) is raised again, for Starlette's 500. ``paths``: the app's
    route paths, to label a request refused before routing (the body limits) by its route."""
    static = frozenset(p for p in paths if "{" not in p)

    def label(request: Request) -> str:
        matched = route_label(request)
        path = request.scope.get("path", "")
        return path if matched == "unmatched" and path in static else matched

    def render(request: Request, exc: RewardServiceError) -> Response:
        code = exc.status_code
        route = label(request)
        metrics.http_requests.labels(route=route, code=str(code)).inc()
        if code == 499:  # nobody reads it
            return Response(status_code=499)
        if code == 500:
            log.error("request failed", extra={"route": route, "error": repr(exc)})
        return JSONResponse({"detail": exc.detail()}, status_code=code,
                            headers=exc.headers(retry_after_s=retry_after_s))

    async def respond(request: Request, exc: Exception) -> Response:
        if isinstance(exc, RewardServiceError):
            return render(request, exc)
        if isinstance(exc, RequestValidationError):
            # FastAPI's default echoes the offending input, which may be megabytes: never
            errors = [{"loc": e.get("loc", ()), "msg": e.get("msg", ""), "type": e.get("type")}
                      for e in exc.errors()[:20]]
            return render(request, InvalidRequestError(errors=errors))
        if isinstance(exc, StarletteHTTPException):
            if exc.status_code == 400:  # FastAPI's "error parsing the body", from the cause
                return render(request, InvalidRequestError.at(
                    ("body",), body_error(exc.__cause__), "json_invalid"))
            return render(request, _HTTPError(exc.status_code, str(exc.detail), exc.headers))
        raise exc

    return respond


def install_error_handlers(app: FastAPI, respond: ErrorResponder) -> None:
    for kind in (RewardServiceError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(kind, respond)
