"""What stands in front of every route: the bearer-token check and the request-body limit."""

from __future__ import annotations

import asyncio
import hmac
import time
from collections.abc import Awaitable, Callable, Collection, Iterable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service.errors import (
    BodyTimeoutError,
    OverloadedError,
    RequestTooLargeError,
    RewardServiceError,
    UnauthorizedError,
    UnsupportedEncodingError,
)
from reward_service.server.api.memory_budget import MemoryBudget
from reward_service.server.routing import ErrorResponder

__all__ = ["OPEN_PATHS", "BodyLimitMiddleware", "bearer_check", "bearer_ok"]

#: Paths answered without a token (the probes of an orchestrator).
OPEN_PATHS = frozenset({"/healthz", "/readyz"})


def bearer_ok(token: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether raw ASGI ``headers`` carry ``Authorization: Bearer TOKEN`` (constant time)."""
    for name, value in headers:
        if name == b"authorization":
            scheme, _, given = value.partition(b" ")
            return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), token)
    return False


def bearer_check(token: bytes | None) -> Callable[[Request], Awaitable[None]]:
    """A dependency that raises :class:`UnauthorizedError` unless the request carries
    ``Authorization: Bearer TOKEN`` (constant-time comparison). ``None``: no check."""

    async def check(request: Request) -> None:
        if token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token):
            raise UnauthorizedError()

    return check


class BodyLimitMiddleware:
    """Checks each request on its headers, then buffers its body before the app sees it.

    On the headers, before a byte of the body is read:

    * with a token configured, a request without it (any path but ``open_paths``) → 401: an
      unauthenticated client cannot hold body bytes, the budget or a decoder (four trickling
      unauthenticated bodies had locked the token holder out with 503s);
    * a ``Content-Encoding`` other than ``identity`` → 415 (bodies are never inflated);
    * a declared ``Content-Length`` over ``max_bytes`` → 413.

    While the body arrives:

    * one body over ``max_bytes`` → 413;
    * the server's :class:`MemoryBudget` (all bodies being read or handled, plus reply bytes
      slow readers have not taken) over its limit → 503 + Retry-After (six concurrent 55 MB
      bodies took the server to 725 MB before this bound);
    * no progress for ``body_timeout_s``, or the whole body not in within
      ``body_total_timeout_s`` of the headers → 408 (a body trickled a byte at a time holds
      its reservation only that long).

    Its refusals are answered and counted by the one renderer (``responder``); one given
    before the body is read closes the connection.
    """

    def __init__(self, app: ASGIApp, max_bytes: int, *, budget: MemoryBudget,
                 body_timeout_s: float, body_total_timeout_s: float,
                 responder: ErrorResponder, token: bytes | None = None,
                 open_paths: Collection[str] = OPEN_PATHS) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.budget = budget
        self.body_timeout_s = body_timeout_s
        self.body_total_timeout_s = body_total_timeout_s
        self.responder = responder
        self.token = token
        self.open_paths = frozenset(open_paths)

    @property
    def in_flight(self) -> int:
        """Bytes of bodies reserved by requests now being read or handled."""
        return self.budget.bodies

    def _head_error(self, scope: Scope) -> RewardServiceError | None:
        """Why the request is refused on its headers, if it is."""
        headers = scope.get("headers", ())
        if (self.token is not None and scope["path"] not in self.open_paths
                and not bearer_ok(self.token, headers)):
            return UnauthorizedError()
        for name, value in headers:
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    return self._too_large()
            elif name == b"content-encoding" and value.strip().lower() != b"identity":
                return UnsupportedEncodingError(
                    "Content-Encoding is not supported: send the body uncompressed")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._head_error(scope)
        if refusal is not None:
            await self._refuse(scope, send, refusal, close=True)
            return
        body = bytearray()
        reserved = 0
        budget = self.budget
        until = time.monotonic() + self.body_total_timeout_s
        try:
            more = True
            while more:
                wait = min(self.body_timeout_s, until - time.monotonic())
                try:  # a timeout scope, not wait_for: that wraps receive() in a new task
                    async with asyncio.timeout(max(0.0, wait)):
                        message = await receive()
                except TimeoutError:
                    await self._refuse(scope, send, BodyTimeoutError(
                        f"request body not received within {self.body_timeout_s:g}s"
                        if wait >= self.body_timeout_s else
                        f"request body not received in full within "
                        f"{self.body_total_timeout_s:g}s"))
                    return
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_bytes:
                    await self._refuse(scope, send, self._too_large())
                    return
                grow = len(body) - reserved
                if grow:
                    if not budget.reserve(grow):
                        await self._refuse(scope, send, OverloadedError(
                            "too many request bytes in flight; retry"))
                        return
                    reserved += grow
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": bytes(body), "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
        finally:
            budget.release(reserved)

    def _too_large(self) -> RequestTooLargeError:
        return RequestTooLargeError(f"request body larger than {self.max_bytes} bytes")

    async def _refuse(self, scope: Scope, send: Send, exc: RewardServiceError, *,
                      close: bool = False) -> None:
        async def nothing() -> Message:  # the body is not read again
            return {"type": "http.disconnect"}

        response = await self.responder(Request(scope, nothing), exc)
        if close:  # the body was not read: the connection cannot carry another request
            response.headers["connection"] = "close"
        await response(scope, nothing, send)
