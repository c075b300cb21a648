"""Split one large ``POST /v1/score`` over the Serve replicas, and merge the parts' replies.

Serve routes a whole HTTP request to one replica, so one 512-item request at a time keeps
every other replica idle. :class:`FanOut` wraps a replica's FastAPI app: a ``/v1/score``
(or ``/score``) body of at least ``2 * min_part`` items, within the app's item and body
limits, is cut into up to ``parts`` contiguous parts; the first is scored by this replica's
own app, the others go to the deployment's handle (Serve sends each to the replica with the
fewest requests in flight). A replica that already holds work (``backlog``: at least
``min_part`` items outstanding in its pool) scores a request whole: under concurrent requests
Serve's router already keeps every replica busy, and a split would only add a replica-to-replica
call per request (about 10 ms of CPU here) and queue the part behind the other replica's work.
Each part passes through the real app (its token check, its
validation, its pool), so every item is scored exactly as in one request. When every part
answers 200, the parts' results are concatenated in order, ``count`` and ``statuses``
summed; otherwise the whole body is answered by this replica's app alone, so errors (422
with the item's real index, 401, 413, 503) are exactly those of the plain service.

Everything else (other routes, small or unparsable bodies, no Content-Length) goes to the
app untouched, its buffered body replayed first.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

__all__ = ["FanOut", "answer", "call_app", "merge_replies", "split_body"]

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
#: Score one part elsewhere: (path, headers, body) -> (status, body).
Remote = Callable[[str, Headers, bytes], Awaitable[tuple[int, bytes]]]
#: Items this replica's pool holds (queued or being scored) right now.
Backlog = Callable[[], int]

SCORE_PATHS = frozenset({"/v1/score", "/score"})


def split_body(body: bytes, parts: int, min_part: int, max_items: int) -> list[bytes] | None:
    """The part bodies (each ``{"items": [...], ...}`` with the other fields kept), or None
    when ``body`` should go to the app whole: not a JSON object with an ``items`` list, too
    few items for two parts of ``min_part``, or more than ``max_items`` (the app's 413)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict) or not isinstance(items := doc.get("items"), list):
        return None
    n = len(items)
    k = min(parts, n // min_part)
    if k < 2 or n > max_items:
        return None
    rest = {key: v for key, v in doc.items() if key != "items"}
    bounds = [n * i // k for i in range(k + 1)]
    return [orjson.dumps({"items": items[a:b], **rest}) for a, b in itertools.pairwise(bounds)]


def merge_replies(replies: list[bytes], elapsed_s: float) -> bytes:
    """One ``ScoreResponse`` from the parts' (in order): results concatenated, counts summed."""
    results: list[Any] = []
    statuses: dict[str, int] = {}
    for raw in replies:
        doc = orjson.loads(raw)
        results.extend(doc["results"])
        for status, count in doc["statuses"].items():
            statuses[status] = statuses.get(status, 0) + count
    return orjson.dumps({"results": results, "count": len(results), "statuses": statuses,
                         "elapsed_s": elapsed_s})


def _app_path(scope: Scope) -> str:
    """The request's path within the app (Serve's route prefix, in ``root_path``, removed)."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root):] if root and path.startswith(root) else path


def _scope(method: str, path: str, headers: Headers, length: int) -> Scope:
    kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
            "root_path": "", "query_string": b"", "client": None, "server": None,
            "headers": [*kept, (b"content-length", str(length).encode())]}


async def call_app(app: App, path: str, headers: Headers, body: bytes) -> tuple[int, bytes]:
    """``POST path`` to the ASGI ``app`` in this process: (status, response body)."""
    status, _, reply = await answer(app, "POST", path, headers, body)
    return status, reply


async def answer(app: App, method: str, path: str, headers: Headers,
                 body: bytes) -> tuple[int, Headers, bytes]:
    """``method path`` with ``body`` to the ASGI ``app`` in this process, as a client on a
    connection would send it: (status, response headers, response body)."""
    status = 500
    reply_headers: Headers = []
    chunks: list[bytes] = []
    delivered = False
    never = asyncio.Event()  # the caller stays connected until the app has answered

    async def receive() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await never.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status, reply_headers
        if message["type"] == "http.response.start":
            status = int(message["status"])
            reply_headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(_scope(method, path, headers, len(body)), receive, send)
    return status, reply_headers, b"".join(chunks)


class FanOut:
    """The ASGI app a replica serves: ``app`` with large score requests split (see module)."""

    def __init__(self, app: App, remote: Remote, *, parts: int, min_part: int,
                 max_items: int, max_body_bytes: int, body_timeout_s: float,
                 backlog: Backlog | None = None) -> None:
        self.app = app
        self.remote = remote
        self.backlog = backlog
        self.parts = parts
        self.min_part = min_part
        self.max_items = max_items
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s

    def __getattr__(self, name: str) -> Any:  # Serve adds its exception handlers to the app
        if name == "app":
            raise AttributeError(name)
        return getattr(self.app, name)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        length = self._length(scope) if scope["type"] == "http" else None
        if length is None:
            await self.app(scope, receive, send)
            return
        buffered: list[Message] = []
        body = bytearray()
        complete = False
        try:
            while not complete:
                message = await asyncio.wait_for(receive(), self.body_timeout_s)
                buffered.append(message)
                if message["type"] != "http.request":
                    break
                body += message.get("body", b"")
                complete = not message.get("more_body", False)
        except TimeoutError:
            pass  # the app's own body timeout answers this client
        if complete and len(body) == length:
            reply = await self._split(scope, bytes(body))
            if reply is not None:
                await send({"type": "http.response.start", "status": 200,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(reply)).encode())]})
                await send({"type": "http.response.body", "body": reply})
                return

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self.app(scope, replay, send)

    def _length(self, scope: Scope) -> int | None:
        """Content-Length of a score POST small enough to buffer here, else None."""
        if scope.get("method") != "POST" or _app_path(scope) not in SCORE_PATHS:
            return None
        if scope.get("query_string"):
            return None
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    n = int(value)
                except ValueError:
                    return None
                return n if 0 < n <= self.max_body_bytes else None
        return None

    async def _split(self, scope: Scope, body: bytes) -> bytes | None:
        t0 = time.perf_counter()
        if self.backlog is not None and self.backlog() >= self.min_part:
            return None  # busy already: the other replicas get their own requests
        parts = split_body(body, self.parts, self.min_part, self.max_items)
        if parts is None:
            return None
        path, headers = _app_path(scope), list(scope.get("headers", ()))
        replies = await asyncio.gather(
            call_app(self.app, path, headers, parts[0]),
            *(self.remote(path, headers, p) for p in parts[1:]), return_exceptions=True)
        bodies = [r[1] for r in replies if not isinstance(r, BaseException) and r[0] == 200]
        if len(bodies) < len(parts):
            return None  # a part failed or was refused: the whole body goes to the app
        return merge_replies(bodies, time.perf_counter() - t0)
