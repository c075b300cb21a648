"""Fixtures for the trainer tests: the real reward service on a loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def reward_service() -> Iterator[object]:
    """``python -m reward_service serve`` (2 workers) on a free port; waits for /readyz,
    yields the ``Service`` (``.url``, ``.stop()``, ``.start()``), SIGTERMs it at the end."""
    from tests.helpers import Service

    with Service(REWARD_LOG_LEVEL="warning") as svc:
        yield svc


@pytest.fixture(scope="session")
def reward_url(reward_service) -> str:
    return reward_service.url
