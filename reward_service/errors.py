"""Errors of the service, as a tree. A failing *item* is never an exception: it is a status.

::

    RewardServiceError
    ├── PoolError
    │   ├── PoolStartError      workers could not be started (e.g. strict sandbox refused)
    │   ├── OverloadedError     the queue is full → HTTP 503 + Retry-After
    │   └── DrainingError       shutting down, no new work → HTTP 503 + Retry-After
    └── RequestTooLargeError    a request exceeds a limit → HTTP 413
"""

from __future__ import annotations

__all__ = [
    "DrainingError",
    "OverloadedError",
    "PoolError",
    "PoolStartError",
    "RequestTooLargeError",
    "RewardServiceError",
]


class RewardServiceError(Exception):
    """Base of every error this package raises."""


class PoolError(RewardServiceError):
    """The worker pool cannot take the work."""


class PoolStartError(PoolError):
    """Workers could not be started."""


class OverloadedError(PoolError):
    """The queue is full."""


class DrainingError(PoolError):
    """The pool is shutting down."""


class RequestTooLargeError(RewardServiceError):
    """A request exceeds one of the configured limits."""
