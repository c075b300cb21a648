"""The supervisor ↔ zygote control protocol: tiny typed records, one JSON object per packet.

Both ends import this module (``pool/zygote_link.py`` on the server, ``zygote.py`` in the
zygote), so the message names and fields exist in one place. The socket is SOCK_SEQPACKET:
a packet is a whole message; file descriptors travel beside it by SCM_RIGHTS.

    server → zygote  Spawn(id)      + SCM_RIGHTS [task_read_fd, result_write_fd]
                     Ping(n)        (liveness: answered at once with Pong(n))
    zygote → server  Ready(warmup_s, dfa_states)
                     Pong(n)
                     Spawned(id, pid) | SpawnFailed(id, reason)
                     Exited(pid, returncode)      (negative returncode: killed by a signal)

``decode`` never trusts a packet: anything that is not one of these records, field types
included, raises :class:`ControlError`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import orjson

from reward_service.protocol import ProtocolError

__all__ = [
    "MAX_PACKET",
    "ControlError",
    "Exited",
    "Message",
    "Ping",
    "Pong",
    "Ready",
    "Spawn",
    "SpawnFailed",
    "Spawned",
    "decode",
    "encode",
]

MAX_PACKET = 4096  # every control message is far smaller


class ControlError(ProtocolError):
    """A control packet that is not one of the protocol's records (the error tree's
    ``ProtocolError``: a peer's bytes that are not a valid frame)."""


@dataclass(frozen=True, slots=True)
class Spawn:
    """Fork one worker wired to the two descriptors sent with this message."""

    OP: ClassVar[str] = "spawn"
    id: int


@dataclass(frozen=True, slots=True)
class Ready:
    """The zygote has imported and warmed the scorers; it takes ``Spawn`` now. ``warmup_s``:
    what warming the LaTeX parser took (0 when off); ``dfa_states``: what it has cached."""

    OP: ClassVar[str] = "ready"
    warmup_s: float = 0.0
    dfa_states: int = 0


@dataclass(frozen=True, slots=True)
class Spawned:
    OP: ClassVar[str] = "spawned"
    id: int
    pid: int


@dataclass(frozen=True, slots=True)
class SpawnFailed:
    OP: ClassVar[str] = "spawn_failed"
    id: int
    reason: str


@dataclass(frozen=True, slots=True)
class Exited:
    """The zygote reaped worker ``pid``."""

    OP: ClassVar[str] = "exited"
    pid: int
    returncode: int


@dataclass(frozen=True, slots=True)
class Ping:
    """Are you there? The zygote answers ``Pong(n)`` from its loop, between forks."""

    OP: ClassVar[str] = "ping"
    n: int


@dataclass(frozen=True, slots=True)
class Pong:
    OP: ClassVar[str] = "pong"
    n: int


Message = Spawn | Ready | Spawned | SpawnFailed | Exited | Ping | Pong
_BY_OP: dict[str, type[Message]] = {
    cls.OP: cls for cls in (Spawn, Ready, Spawned, SpawnFailed, Exited, Ping, Pong)
}
_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    "id": int, "n": int, "pid": int, "returncode": int, "reason": str,
    "warmup_s": (int, float), "dfa_states": int,
}


def encode(msg: Message) -> bytes:
    return orjson.dumps({"op": msg.OP, **asdict(msg)})


def decode(data: bytes) -> Message:
    """One packet → its record; :class:`ControlError` for anything else."""
    try:
        raw: Any = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ControlError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ControlError("not an object")
    cls = _BY_OP.get(raw.pop("op", None))  # type: ignore[arg-type]
    if cls is None:
        raise ControlError("unknown op")
    wanted = {f.name for f in fields(cls)}
    if set(raw) != wanted:
        raise ControlError(f"{cls.OP}: fields {sorted(raw)}, expected {sorted(wanted)}")
    for name, value in raw.items():
        kind = _FIELD_TYPES[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ControlError(f"{cls.OP}.{name}: {type(value).__name__}")
    return cls(**raw)
