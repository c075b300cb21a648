"""Client side of the reward service: HTTP client, GRPO core and a thin GRPO trainer.

The reward client needs only ``httpx`` (extra ``client``); the trainer needs torch,
transformers and Ray (extra ``trainer``) and is imported lazily, so
``from trainer_client import RewardClient`` works without them.
"""

from typing import TYPE_CHECKING, Any

from trainer_client.errors import (
    RewardAuthError,
    RewardClientError,
    RewardPayloadTooLarge,
    RewardProtocolError,
    RewardRequestError,
    RewardServiceUnavailable,
    RewardValidationError,
)
from trainer_client.reward_client import (
    AsyncRewardClient,
    RetryPolicy,
    RewardClient,
    RewardClientSettings,
    ScoreItem,
    ScoreResult,
    Timeout,
    reward_or_none,
)

if TYPE_CHECKING:
    from trainer_client.config import TrainConfig, load_config
    from trainer_client.trainer import train

__all__ = [
    "AsyncRewardClient",
    "RetryPolicy",
    "RewardAuthError",
    "RewardClient",
    "RewardClientError",
    "RewardClientSettings",
    "RewardPayloadTooLarge",
    "RewardProtocolError",
    "RewardRequestError",
    "RewardServiceUnavailable",
    "RewardValidationError",
    "ScoreItem",
    "ScoreResult",
    "Timeout",
    "TrainConfig",
    "load_config",
    "reward_or_none",
    "train",
]

_LAZY = {"TrainConfig": "trainer_client.config", "load_config": "trainer_client.config",
         "train": "trainer_client.trainer"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
