"""Collects each reliability test's figures; ``make soak`` writes them to docs/RELIABILITY.md."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_FIGURES: dict[str, Any] = {}


@pytest.fixture
def record(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    figures: dict[str, Any] = {}
    yield figures
    _FIGURES[request.node.name] = figures


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("RELIABILITY_REPORT")
    if path and _FIGURES:
        Path(path).write_text(json.dumps({"exitstatus": int(exitstatus), "tests": _FIGURES},
                                         indent=2, default=str))
