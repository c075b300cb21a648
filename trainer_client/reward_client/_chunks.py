"""Cutting a call's items into requests by item count and body bytes, each encoded once."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from trainer_client.reward_client._models import ScoreItem

#: Bytes of a body that are not items: the envelope and ``timeout_s``.
ENVELOPE_BYTES = 64


def encode(item: Any) -> bytes:
    """One item's JSON: orjson (a third of the standard library's time); the standard library
    for what orjson refuses (lone surrogates, huge integers), so that the service answers with
    a 422 naming the field instead of this process raising TypeError."""
    try:
        return orjson.dumps(item)
    except TypeError:
        return json.dumps(item).encode()


def as_items(items: Iterable[ScoreItem | dict[str, Any]]) -> list[dict[str, Any]]:
    return [it.to_json() if isinstance(it, ScoreItem) else dict(it) for it in items]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One request's worth of items, already encoded (encoded once, however often sent)."""

    pieces: list[bytes]  # one JSON object per item
    timeout_s: float | None

    @property
    def body(self) -> bytes:
        tail = b"]}" if self.timeout_s is None else b'],"timeout_s":%s}' % encode(self.timeout_s)
        return b'{"items":[' + b",".join(self.pieces) + tail

    def halves(self) -> tuple[Chunk, Chunk] | None:
        """The two halves to resend when the service answers 413; None for one item."""
        if len(self.pieces) < 2:
            return None
        mid = len(self.pieces) // 2
        return Chunk(self.pieces[:mid], self.timeout_s), Chunk(self.pieces[mid:], self.timeout_s)


def pack(pieces: list[bytes], timeout_s: float | None, max_items: int,
         max_bytes: int) -> list[Chunk]:
    """Cut encoded items into chunks of at most ``max_items`` items and ``max_bytes`` body
    bytes (an item larger than ``max_bytes`` goes alone; the service answers it 413)."""
    budget = max_bytes - ENVELOPE_BYTES
    chunks: list[Chunk] = []
    current: list[bytes] = []
    size = 0
    for piece in pieces:
        if current and (len(current) >= max_items or size + len(piece) + 1 > budget):
            chunks.append(Chunk(current, timeout_s))
            current, size = [], 0
        current.append(piece)
        size += len(piece) + 1
    if current:
        chunks.append(Chunk(current, timeout_s))
    return chunks
