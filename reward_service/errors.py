"""Errors of the service, as one tree. A failing *item* is never an exception: it is a status.

Every class carries the HTTP status it maps to and the message a client may see; one
handler (``reward_service.server.api.errors``) renders all of them. Nothing outside this tree is
raised to the HTTP layer on purpose (FastAPI's own validation errors are translated into
``InvalidRequestError`` by that handler).

::

    RewardServiceError              500  base of every error this package raises
    ├── PoolError                   503  the worker pool cannot take the work
    │   ├── PoolStartError               workers could not be started (strict sandbox refused)
    │   ├── OverloadedError         503  the queue is full (+ Retry-After)
    │   └── DrainingError           503  shutting down, no new work (+ Retry-After)
    ├── RequestError                400  the request as a whole is refused
    │   ├── InvalidRequestError     422  malformed JSON, wrong types, bad options, lone surrogates
    │   │   ├── UnknownScorerError  422  (reward_service.scorers.registry)
    │   │   └── CompatError         422  not the framework's protocol (reward_service.server.compat)
    │   ├── RequestTooLargeError    413  too many items, a field or the body too large
    │   ├── BodyTimeoutError        408  the body stalled (connection closed)
    │   └── UnauthorizedError       401  missing or wrong bearer token (+ WWW-Authenticate)
    ├── ClientDisconnected          499  the client left before its reply (nobody reads it)
    └── ProtocolError                    a peer sent bytes that are not a valid frame
        │                                (reward_service.protocol; never reaches HTTP)
        └── ControlError                 a zygote control packet that is not a record
                                         (reward_service.control)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

__all__ = [
    "BodyTimeoutError",
    "ClientDisconnected",
    "DrainingError",
    "InvalidRequestError",
    "OverloadedError",
    "PoolError",
    "PoolStartError",
    "RequestError",
    "RequestTooLargeError",
    "RewardServiceError",
    "UnauthorizedError",
    "UnsupportedEncodingError",
    "clip_echo",
    "clip_text",
]

_ECHO_CHARS = 120  # at most this much of any client-supplied value is ever echoed back


def clip_echo(value: object, limit: int = _ECHO_CHARS) -> str:
    """``repr`` of a client-supplied value, cut to about ``limit`` characters: an error never
    echoes more than that of the input (a 12 MB scorer name must not come back as 60 MB)."""
    if isinstance(value, str):
        return repr(value[:limit]) + ("..." if len(value) > limit else "")
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def clip_text(text: str, limit: int = 300) -> str:
    """``text`` cut to ``limit`` characters (error messages that may quote input)."""
    return text if len(text) <= limit else text[:limit] + "..."


class RewardServiceError(Exception):
    """Base of every error this package raises."""

    status_code: ClassVar[int] = 500
    public: ClassVar[str] = "internal error"  # what a client sees when the message is private

    def detail(self) -> Any:
        """The ``detail`` of the JSON error body."""
        return self.public

    def headers(self, *, retry_after_s: int) -> Mapping[str, str] | None:
        return None


class PoolError(RewardServiceError):
    """The worker pool cannot take the work."""

    status_code = 503
    public = "the worker pool cannot take work"


class PoolStartError(PoolError):
    """Workers could not be started."""


class OverloadedError(PoolError):
    """The queue is full."""

    def detail(self) -> Any:
        return f"overloaded: {self}"

    def headers(self, *, retry_after_s: int) -> Mapping[str, str] | None:
        return {"Retry-After": str(retry_after_s)}


class DrainingError(PoolError):
    """The pool is shutting down."""

    def detail(self) -> Any:
        return "draining: the service is shutting down"

    def headers(self, *, retry_after_s: int) -> Mapping[str, str] | None:
        return {"Retry-After": str(retry_after_s)}


class RequestError(RewardServiceError):
    """The request as a whole is refused; the message is written for the client."""

    status_code = 400

    def detail(self) -> Any:
        return str(self)


class InvalidRequestError(RequestError):
    """Malformed or not allowed (422). ``errors`` are FastAPI-shaped ``{loc, msg, type}``
    entries naming the fields; without them the detail is one such entry at ``("body",)``
    with the message and :attr:`kind`: every 422 on every route answers a list."""

    status_code = 422
    kind: str = "value_error"  # the ``type`` of the entry when there are no ``errors``

    def __init__(self, message: str = "", *, errors: Sequence[Mapping[str, Any]] = ()) -> None:
        super().__init__(message or (errors[0]["msg"] if errors else "invalid request"))
        self.errors = [dict(e) for e in errors]

    @classmethod
    def at(cls, loc: Sequence[str | int], msg: str, type_: str) -> InvalidRequestError:
        """One error at a location, e.g. ``at(("body", "timeout_s"), "must be <= 60", ...)``."""
        return cls(errors=[{"loc": tuple(loc), "msg": msg, "type": type_}])

    def detail(self) -> Any:
        if not self.errors:
            return [{"loc": ["body"], "msg": clip_text(str(self)), "type": self.kind}]
        return [
            {"loc": list(e.get("loc", ()))[:6], "msg": clip_text(str(e.get("msg", ""))),
             "type": e.get("type")}
            for e in self.errors[:20]
        ]


class RequestTooLargeError(RequestError):
    """A request exceeds one of the configured limits."""

    status_code = 413


class BodyTimeoutError(RequestError):
    """No progress on the request body for ``REWARD_BODY_TIMEOUT_S``: 408, and the
    connection is closed (the rest of the body may still be on its way)."""

    status_code = 408

    def headers(self, *, retry_after_s: int) -> Mapping[str, str] | None:
        return {"Connection": "close"}


class UnsupportedEncodingError(RequestError):
    """A request body with a ``Content-Encoding`` (gzip, ...): bodies are never inflated."""

    status_code = 415


class UnauthorizedError(RequestError):
    """Missing or wrong bearer token."""

    status_code = 401

    def detail(self) -> Any:
        return "missing or wrong bearer token"

    def headers(self, *, retry_after_s: int) -> Mapping[str, str] | None:
        return {"WWW-Authenticate": "Bearer"}


class ClientDisconnected(RewardServiceError):
    """The client closed the connection before its reply was ready."""

    status_code = 499  # nginx's "client closed request": keeps it apart in /metrics
