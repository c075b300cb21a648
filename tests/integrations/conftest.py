from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import Service, free_port
from trainer_client.integrations import _common


@pytest.fixture
def service_env(svc: Service, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``REWARD_SERVICE_URL`` pointing at the session's real service, as a user would set it."""
    monkeypatch.setenv(_common.ENV_URL, svc.url)
    monkeypatch.delenv(_common.ENV_TOKEN, raising=False)
    yield svc.url
    _common.close_clients()


@pytest.fixture
def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused at once)."""
    return f"http://127.0.0.1:{free_port()}"
