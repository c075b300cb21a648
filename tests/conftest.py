from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import DATA, Service, alive

# The zygote's parser warm-up (scorers/patches/warmup.py, on by default) adds ~4 s to every pool
# start and changes no verdict (tests/test_fast_parse.py compares trees cold and warm); the
# suite starts dozens of pools, so they skip it unless a test asks. The shared service below
# and tests/test_warmup.py run it as production does.
os.environ.setdefault("REWARD_WARM_PARSER", "false")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not DATA.exists():
        skip = pytest.mark.skip(reason=f"shared data not found at {DATA}")
        for item in items:
            if "needs_data" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def svc() -> Iterator[Service]:
    """One real service (2 workers, 1 spare, strict sandbox) shared by the API tests."""
    with Service(REWARD_LOG_LEVEL="info", REWARD_WARM_PARSER="true") as s:
        workers = s.worker_pids()
        yield s
    # SIGTERM: a graceful stop (uvicorn re-raises the signal after shutting down) and no worker left
    assert s.proc is not None and s.proc.returncode in (0, -signal.SIGTERM), s.log()
    assert "pool stopped" in s.log()
    assert not [pid for pid in workers if alive(pid)]


@pytest.fixture
def client(svc: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=svc.url, timeout=60.0) as c:
        yield c
