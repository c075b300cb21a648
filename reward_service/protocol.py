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
     "extracted_gold": str|None, "reason": str|None, "elapsed_s": float, "credit": float}
"""

from __future__ import annotations

import math
import os
import struct
from dataclasses import dataclass
from typing import Any

import orjson

from reward_service.errors import RewardServiceError
from reward_service.scorers.base import STATUSES, Status, clip

__all__ = [
    "Fatal",
    "FrameDecoder",
    "Phase",
    "ProtocolError",
    "Ready",
    "Result",
    "WorkerMessage",
    "encode",
    "parse_worker_message",
    "read_frame",
    "write_all",
]

_HEADER = struct.Struct("!I")
MAX_FRAME = 512 * 1024 * 1024  # supervisor → worker: a chunk of long responses


class ProtocolError(RewardServiceError):
    """A peer sent bytes that are not a valid frame, or a frame that is not a valid message."""


_TEXT = 1000  # characters kept of any string a worker sends (scorers clip theirs to 200)


@dataclass(frozen=True, slots=True)
class Result:
    """A worker's answer for one item."""

    seq: int
    status: Status
    extracted: str | None
    extracted_gold: str | None
    reason: str | None
    elapsed_s: float
    credit: float  # the score of a verdict that is not correct (0, or a format score)


@dataclass(frozen=True, slots=True)
class Ready:
    """A worker applied its sandbox and takes work; ``sandbox``: layer → status and detail."""

    sandbox: dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class Fatal:
    """A worker refuses to run (strict sandbox missing a layer)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Phase:
    """The worker starts (``gold``) or ends (not ``gold``) parsing the ground truth of its
    current item ``seq``, one it has not parsed before: a deadline that passes in between is
    the ground truth's fault, not the response's."""

    seq: int
    gold: bool


WorkerMessage = Result | Ready | Fatal | Phase
_KEYS = {
    "phase": {"op", "seq", "phase"},
    "result": {"op", "seq", "status", "extracted", "extracted_gold", "reason", "elapsed_s", "credit"},
    "ready": {"op", "pid", "sandbox"},
    "fatal": {"op", "reason"},
}


_STATUS_SET = frozenset(STATUSES)


def _int(value: Any, name: str) -> int:
    if type(value) is not int:  # orjson gives exact types; a bool is not a number here
        raise ProtocolError(f"{name} is not an integer")
    return value


def _text(value: Any, name: str, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if type(value) is not str:
        raise ProtocolError(f"{name} is not a string")
    return value if len(value) <= _TEXT else clip(value, _TEXT)


def _sandbox(value: Any) -> dict[str, dict[str, str]]:
    if type(value) is not dict or len(value) > 32:
        raise ProtocolError("sandbox is not a small object")
    out: dict[str, dict[str, str]] = {}
    for layer, info in value.items():
        if type(info) is not dict or info.keys() != {"status", "detail"}:
            raise ProtocolError("sandbox layer is not {status, detail}")
        out[clip(layer, 50)] = {k: _text(v, f"sandbox.{k}", optional=False) or "" for k, v in info.items()}
    return out


def _result(raw: dict[str, Any]) -> Result:
    """The hot path: one per scored item."""
    status, elapsed = raw["status"], raw["elapsed_s"]
    if type(status) is not str or status not in _STATUS_SET:
        raise ProtocolError(f"status {clip(status, 40)!r} is not one of {', '.join(STATUSES)}")
    if type(elapsed) is not float and type(elapsed) is not int:
        raise ProtocolError("elapsed_s is not a number")
    if not 0 <= elapsed < math.inf:  # also false for NaN
        raise ProtocolError(f"elapsed_s is {elapsed!r}")
    credit = raw["credit"]
    if type(credit) is not float and type(credit) is not int:
        raise ProtocolError("credit is not a number")
    if not 0 <= credit <= 1:  # also false for NaN
        raise ProtocolError(f"credit is {credit!r}, not in [0, 1]")
    return Result(
        _int(raw["seq"], "seq"),
        status,  # type: ignore[arg-type]  # checked against STATUSES above
        _text(raw["extracted"], "extracted"),
        _text(raw["extracted_gold"], "extracted_gold"),
        _text(raw["reason"], "reason"),
        float(elapsed),
        float(credit),
    )


def parse_worker_message(raw: Any) -> WorkerMessage:
    """Check a decoded frame from a worker, which is untrusted: exact keys, types, a known
    status, a finite elapsed time ≥ 0; strings clipped. Raises :class:`ProtocolError`."""
    op = raw.get("op") if type(raw) is dict else None
    keys = _KEYS.get(op) if type(op) is str else None
    if keys is None:
        raise ProtocolError("not a worker message")
    if raw.keys() != keys:
        raise ProtocolError(f"{op}: unexpected or missing keys")
    if op == "result":
        return _result(raw)
    if op == "phase":
        phase = raw["phase"]
        if phase != "gold" and phase != "item":
            raise ProtocolError("phase is not gold or item")
        return Phase(_int(raw["seq"], "seq"), phase == "gold")
    if op == "ready":
        _int(raw["pid"], "pid")
        return Ready(_sandbox(raw["sandbox"]))
    return Fatal(_text(raw["reason"], "reason", optional=False) or "")


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
