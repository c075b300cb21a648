"""Messages between the supervisor and a worker: length-prefixed orjson frames on a pipe.

Each worker has its own pair of pipes (no shared queue or lock a dying worker could hold).
JSON, not pickle, travels in both directions: a worker handles untrusted text, and nothing it
sends back may be able to run code in the server.

Supervisor → worker::

    {"op": "score", "items": [[seq, scorer, response, ground_truth, params], ...]}
    EOF on the pipe                      → finish and exit 0

Worker → supervisor::

    {"op": "ready", "pid": int, "sandbox": {layer: {"status": ..., "detail": ...}}}
    {"op": "fatal", "reason": str}       → the worker refuses to run (then exits 3)
    {"op": "result", "seq": int, "status": str, "extracted": str|None,
     "extracted_gold": str|None, "reason": str|None, "elapsed_s": float}
"""

from __future__ import annotations

import os
import struct
from typing import Any

import orjson

__all__ = ["FrameDecoder", "ProtocolError", "encode", "read_frame", "write_all"]

_HEADER = struct.Struct("!I")
MAX_FRAME = 512 * 1024 * 1024  # supervisor → worker: a chunk of long responses


class ProtocolError(Exception):
    """A peer sent bytes that are not a valid frame."""


def encode(msg: Any) -> bytes:
    body = orjson.dumps(msg)
    return _HEADER.pack(len(body)) + body


class FrameDecoder:
    """Incremental decoder for a non-blocking reader (the supervisor side).

    A frame whose header announces more than ``max_frame`` bytes is refused at the header,
    before any of its body is buffered: a worker cannot make the server hold a large frame.
    """

    def __init__(self, max_frame: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self._max = max_frame

    def feed(self, data: bytes) -> list[Any]:
        buf = self._buf
        buf += data
        out = []
        pos, have = 0, len(buf)
        while have - pos >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buf, pos)
            if size > self._max:
                raise ProtocolError(f"frame of {size} bytes (limit {self._max})")
            end = pos + _HEADER.size + size
            if have < end:
                break
            try:
                out.append(orjson.loads(memoryview(buf)[pos + _HEADER.size : end]))
            except orjson.JSONDecodeError as exc:
                raise ProtocolError(str(exc)) from exc
            pos = end
        del buf[:pos]  # once per read, not once per frame
        return out


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def read_frame(fd: int) -> Any | None:
    """Blocking read of one frame (the worker side); None on EOF."""
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    (size,) = _HEADER.unpack(header)
    if size > MAX_FRAME:
        raise ProtocolError(f"frame of {size} bytes")
    body = _read_exact(fd, size)
    if body is None:
        return None
    return orjson.loads(body)


def write_all(fd: int, data: bytes) -> None:
    """Blocking write of all of ``data`` (the worker side)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
