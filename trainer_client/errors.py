"""Exceptions raised by the reward client.

A failure of one *item* is never an exception: it is a ``status`` in its
:class:`~trainer_client.reward_client.ScoreResult`. These are for the request as a whole::

    RewardClientError
    ├── RewardRequestError          the service rejected the request (4xx); never retried
    │   ├── RewardAuthError         401/403: missing or wrong bearer token
    │   ├── RewardPayloadTooLarge   413: batch or item over the service's limits
    │   └── RewardValidationError   422: malformed body
    ├── RewardProtocolError         an unexpected reply (other status, bad JSON, wrong
    │                               number of results); not retried
    └── RewardServiceUnavailable    gave up: connect errors / 502 / 503 / transport errors
                                    on every URL until the retry budget or deadline ran out
"""

from __future__ import annotations

__all__ = [
    "RewardAuthError",
    "RewardClientError",
    "RewardPayloadTooLarge",
    "RewardProtocolError",
    "RewardRequestError",
    "RewardServiceUnavailable",
    "RewardValidationError",
]


class RewardClientError(Exception):
    """Base class of every error raised by the reward client."""


class RewardRequestError(RewardClientError):
    """The service answered 4xx: the request itself is wrong; retrying will not help."""

    def __init__(self, message: str, *, status_code: int, body: str = "") -> None:
        super().__init__(f"{message} (HTTP {status_code}): {body[:500]}")
        self.status_code = status_code
        self.body = body


class RewardAuthError(RewardRequestError):
    """401/403: the bearer token is missing or wrong."""


class RewardPayloadTooLarge(RewardRequestError):
    """413: reduce ``chunk_size`` or the response length."""


class RewardValidationError(RewardRequestError):
    """422: the body did not match the API contract."""


class RewardProtocolError(RewardClientError):
    """The reply did not follow the contract (unexpected status, JSON, or result count)."""


class RewardServiceUnavailable(RewardClientError):
    """No URL answered usefully before the attempts or the deadline ran out."""

    def __init__(self, message: str, *, attempts: int, last_error: str) -> None:
        super().__init__(f"{message} after {attempts} attempts; last error: {last_error}")
        self.attempts = attempts
        self.last_error = last_error
