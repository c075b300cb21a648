"""What every client shares: headers, connection limits, chunking, the plan."""

from __future__ import annotations

import random
from collections.abc import Generator

import httpx

from trainer_client.reward_client._chunks import Chunk, pack
from trainer_client.reward_client._models import ScoreResult
from trainer_client.reward_client._retry import (
    LOST_EXC,
    RETRY_EXC,
    Attempts,
    Errors,
    Step,
    score_plan,
)
from trainer_client.reward_client._settings import ClientSettings

#: Headers of a ``POST /v1/score``.
JSON_HEADERS = {"content-type": "application/json"}


class ClientBase:
    #: The transport's errors that the plans resend after (``retryable``), and those after
    #: which the request may still be worked on (``lost``: raised, not resent).
    retryable: Errors = RETRY_EXC
    lost: Errors = LOST_EXC

    def __init__(self, settings: ClientSettings, *, seed: int | None = None) -> None:
        self.settings = settings
        self._preferred = 0  # index of the URL that last answered
        self._rng = random.Random(seed)
        self._headers = {"Authorization": f"Bearer {settings.api_token}"} if settings.api_token \
            else {}
        self._limits = httpx.Limits(max_connections=max(8, 2 * settings.max_concurrency),
                                    max_keepalive_connections=max(4, settings.max_concurrency))

    def _timeout(self, item_timeout_s: float | None) -> float | None:
        return self.settings.item_timeout_s if item_timeout_s is None else item_timeout_s

    def _chunks(self, pieces: list[bytes], timeout_s: float | None) -> list[Chunk]:
        return pack(pieces, timeout_s, self.settings.chunk_size, self.settings.max_request_bytes)

    def _plan(self, chunk: Chunk) -> Generator[Step, httpx.Response | None, list[ScoreResult]]:
        """One chunk's exchange, starting at the URL that answered last (see
        :func:`~._retry.score_plan`); the URL that answers becomes the preferred one."""
        att = Attempts(self.settings, self._preferred, self._rng)
        results = yield from score_plan(att, chunk.body, len(chunk.pieces), self.retryable,
                                        self.lost)
        self._preferred = att.url_idx
        return results
