"""What stands in front of every route: the bearer-token check and the request-body limit."""

from __future__ import annotations

import asyncio
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
    """Buffers each request body before the app sees it, within three bounds:

    * one body over ``max_bytes`` (by Content-Length or while streaming) → 413;
    * all bodies being read or handled at once over ``budget_bytes`` → 503 + Retry-After
      (six concurrent 55 MB bodies took the server to 725 MB before this bound);
    * no progress on a body for ``body_timeout_s`` → 408 (a client that stops sending
      holds its reservation only that long).
    """

    def __init__(self, app: ASGIApp, max_bytes: int, *, budget_bytes: int,
                 body_timeout_s: float, retry_after_s: int) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.budget_bytes = budget_bytes
        self.body_timeout_s = body_timeout_s
        self.retry_after_s = retry_after_s
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
                    await self._answer(send, 413, f"request body larger than {self.max_bytes} bytes")
                    return
        body = bytearray()
        reserved = 0
        try:
            more = True
            while more:
                try:
                    message = await asyncio.wait_for(receive(), self.body_timeout_s)
                except TimeoutError:
                    await self._answer(send, 408, "request body not received within "
                                                  f"{self.body_timeout_s:g}s", close=True)
                    return
                if message["type"] == "http.disconnect":
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.max_bytes:
                    await self._answer(send, 413, f"request body larger than {self.max_bytes} bytes")
                    return
                grow = len(body) - reserved
                if grow:
                    if self.in_flight + grow > self.budget_bytes:
                        await self._answer(send, 503, "too many request bytes in flight; retry",
                                           retry=True)
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

    async def _answer(self, send: Send, code: int, detail: str, *, retry: bool = False,
                      close: bool = False) -> None:
        headers = {"Retry-After": str(self.retry_after_s)} if retry else {}
        if close:
            headers["Connection"] = "close"
        response = JSONResponse({"detail": detail}, status_code=code, headers=headers)
        await send({"type": "http.response.start", "status": code,
                    "headers": response.raw_headers})
        await send({"type": "http.response.body", "body": response.body})
