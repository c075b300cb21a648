"""Fixtures for the trainer tests: the real reward service on a loopback port."""

from __future__ import annotations

from collections.abc import Callable, Iterator

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


@pytest.fixture(scope="session")
def tiny64(tmp_path_factory) -> Callable[[int], str]:
    """``tiny64(seed)``: the path of the tiny model with head_dim 64 (hidden 128, 2 heads, 1
    KV head; vLLM's CPU attention refuses the default 16), built once per seed per session.
    Tests that compare two code paths on it take their own seed, so each file's weights
    stay what its figures were measured on."""
    from trainer_client.model.tiny_model import TinyModelSettings, build_tiny_model

    built: dict[int, str] = {}

    def get(seed: int) -> str:
        if seed not in built:
            settings = TinyModelSettings(hidden_size=128, num_heads=2, num_kv_heads=1,
                                         intermediate_size=256, seed=seed)
            built[seed] = str(build_tiny_model(settings,
                                               tmp_path_factory.mktemp(f"tiny64-{seed}") / "m"))
        return built[seed]

    return get
