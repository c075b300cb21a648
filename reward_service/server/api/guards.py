"""What stands in front of every route: the bearer-token check and the request-body limit."""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service.errors import (
    BodyTimeoutError,
    OverloadedError,
    RequestTooLargeError,
    RewardServiceError,
    UnauthorizedError,
)
from reward_service.server.routing import ErrorResponder

__all__ = ["BodyLimitMiddleware", "bearer_check"]


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
    """Buffers each request body before the app sees it, within three bounds:

    * one body over ``max_bytes`` (by Content-Length or while streaming) → 413;
    * all bodies being read or handled at once over ``budget_bytes`` → 503 + Retry-After
      (six concurrent 55 MB bodies took the server to 725 MB before this bound);
    * no progress on a body for ``body_timeout_s`` → 408 (a client that stops sending
      holds its reservation only that long).

    Its refusals are answered and counted by the one renderer (``responder``).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, *, budget_bytes: int,
                 body_timeout_s: float, responder: ErrorResponder) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.budget_bytes = budget_bytes
        self.body_timeout_s = body_timeout_s
        self.responder = responder
        self.in_flight = 0  # bytes of bodies reserved by requests now being read or handled

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._refuse(scope, send, self._too_large())
                    return
        body = bytearray()
        reserved = 0
        try:
            more = True
            while more:
                try:  # a timeout scope, not wait_for: that wraps receive() in a new task
                    async with asyncio.timeout(self.body_timeout_s):
                        message = await receive()
                except TimeoutError:
                    await self._refuse(scope, send, BodyTimeoutError(
                        f"request body not received within {self.body_timeout_s:g}s"))
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
                    if self.in_flight + grow > self.budget_bytes:
                        await self._refuse(scope, send, OverloadedError(
                            "too many request bytes in flight; retry"))
                        return
                    self.in_flight += grow
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
            self.in_flight -= reserved

    def _too_large(self) -> RequestTooLargeError:
        return RequestTooLargeError(f"request body larger than {self.max_bytes} bytes")

    async def _refuse(self, scope: Scope, send: Send, exc: RewardServiceError) -> None:
        async def nothing() -> Message:  # the body is not read again
            return {"type": "http.disconnect"}

        response = await self.responder(Request(scope, nothing), exc)
        await response(scope, nothing, send)

