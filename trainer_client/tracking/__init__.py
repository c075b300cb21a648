"""What a run shows while it trains, besides ``metrics.jsonl`` and the reward-curve PNG:

- :mod:`~trainer_client.tracking.rollout_log`: ``rollouts/step_<N>.jsonl``, every sampled
  completion with its reward, the service's status, reason and extracted answer, and its
  advantage (:mod:`~trainer_client.tracking.records`, the same format as ``eval/``);
- :mod:`~trainer_client.tracking.backends`: TensorBoard (default), W&B and MLflow;
- :mod:`~trainer_client.tracking.files`: writes that a full disk cannot leave half done;
- :mod:`~trainer_client.tracking.tracker`: the one object the training loop calls.
"""

from trainer_client.tracking.backends import TrackingConfigError
from trainer_client.tracking.files import DiskFullError
from trainer_client.tracking.records import generation_records
from trainer_client.tracking.settings import LOGGERS, LogSettings
from trainer_client.tracking.tracker import RunTracker, preflight

__all__ = ["LOGGERS", "DiskFullError", "LogSettings", "RunTracker", "TrackingConfigError",
           "generation_records", "preflight"]
