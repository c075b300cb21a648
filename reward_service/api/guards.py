"""What stands in front of every route: the bearer-token check and the request-body limit."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from fastapi.responses import JSONResponse
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reward_service.errors import UnauthorizedError

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
    """Answer 413 for bodies over ``max_bytes`` (by Content-Length or while streaming)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

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
                    await self._reject(scope, receive, send)
                    return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"request body larger than {self.max_bytes} bytes"
        await JSONResponse({"detail": detail}, status_code=413)(scope, receive, send)
