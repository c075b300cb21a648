"""Trivial ASGI apps for the benches' floors, served by uvicorn as the service runs it
(httptools, uvloop):

* ``app`` reads the body and answers a fixed ``/get_reward`` reply, so uvicorn, the kernel's
  TCP work and the caller's own client are all that a request costs (the zero-cost app);
* ``relay`` does the same after one round trip to another process over a pair of pipes: the
  request's body goes to an echo child (``python -m bench.targets.floor_app``), which reads frames and
  answers each with one byte, and the reply is sent once that byte is back. No parsing, no
  scoring: the floor of any server that, like ours, sends each item out of its own process
  to be scored, with one event-loop wake-up for the child's answer.

``python -m uvicorn bench.targets.floor_app:app`` (or ``:relay``).
"""

from __future__ import annotations

import asyncio
import collections
import os
import struct
import subprocess
import sys
from typing import Any

REPLY = b'{"rewards":[1.0],"scores":[1.0],"extra_logs":{}}'
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(REPLY)).encode())]
_LEN = struct.Struct("<I")


async def _body(receive: Any) -> bytes:
    parts = []
    more = True
    while more:
        msg = await receive()
        parts.append(msg.get("body", b""))
        more = msg.get("more_body", False)
    return b"".join(parts)


async def _answer(send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
    await send({"type": "http.response.body", "body": REPLY})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    more = True
    while more:  # read, not kept: the baseline as it was before the relay app came
        more = (await receive()).get("more_body", False)
    await _answer(send)


class _Echo:
    """The echo child and the requests waiting on it, answered in order (one byte each)."""

    def __init__(self) -> None:
        # the child exits on EOF, when this server's end of its stdin closes with the server
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.targets.floor_app"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.out = self.proc.stdin.fileno()
        self.inp = self.proc.stdout.fileno()
        os.set_blocking(self.inp, False)
        self.waiting: collections.deque[asyncio.Future[None]] = collections.deque()
        asyncio.get_running_loop().add_reader(self.inp, self._readable)

    def _readable(self) -> None:
        answers = os.read(self.inp, 65536)
        if not answers:  # the child is gone: fail what waits, stop watching a closed pipe
            asyncio.get_running_loop().remove_reader(self.inp)
            while self.waiting:
                fut = self.waiting.popleft()
                if not fut.done():
                    fut.set_exception(RuntimeError("the echo process exited"))
            return
        for _ in answers:
            fut = self.waiting.popleft()
            if not fut.done():
                fut.set_result(None)

    def close(self) -> None:
        asyncio.get_running_loop().remove_reader(self.inp)
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # EOF: the child exits
        self.proc.wait(timeout=10)

    async def trip(self, body: bytes) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.waiting.append(fut)
        os.write(self.out, _LEN.pack(len(body)) + body)  # small frames: the pipe has room
        await fut


_echo: _Echo | None = None


async def relay(scope: dict[str, Any], receive: Any, send: Any) -> None:
    global _echo
    if scope["type"] == "lifespan":  # the child starts with the server, before any request
        while (await receive())["type"] != "lifespan.shutdown":
            _echo = _Echo()
            await send({"type": "lifespan.startup.complete"})
        if _echo is not None:
            _echo.close()
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["type"] != "http":
        return
    body = await _body(receive)
    assert _echo is not None
    await _echo.trip(body)
    await _answer(send)


def _echo_main() -> None:
    """The child: read length-prefixed frames from stdin, answer each with one byte."""
    buf = b""
    while chunk := os.read(0, 1 << 20):
        buf += chunk
        n = 0
        while len(buf) >= 4 and len(buf) >= 4 + (size := _LEN.unpack_from(buf)[0]):
            buf = buf[4 + size:]
            n += 1
        if n:
            os.write(1, b"k" * n)


if __name__ == "__main__":
    _echo_main()
