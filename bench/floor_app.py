"""A trivial ASGI app for the per-sample bench's floor: reads the body and answers a fixed
``/get_reward`` reply, so uvicorn (httptools, uvloop, as the service runs it), the kernel's
TCP work for a new connection per request and the caller's own client are all that a request
costs. ``python -m uvicorn bench.floor_app:app``."""

from __future__ import annotations

from typing import Any

REPLY = b'{"rewards":[1.0],"scores":[1.0],"extra_logs":{}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(REPLY)).encode())]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": REPLY})
