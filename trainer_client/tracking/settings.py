"""The ``log:`` section of a training config: the rollout log and the metric loggers.

Torch-free (read by :mod:`trainer_client.config` before anything heavy is imported). Names
are checked here, at load time; whether a requested logger's package is installed is
checked by :func:`trainer_client.tracking.preflight`, still before the model loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["LOGGERS", "LogSettings"]

#: metric loggers a run can write to, besides its own ``metrics.jsonl``
LOGGERS: tuple[str, ...] = ("tensorboard", "wandb", "mlflow")


@dataclass(frozen=True, kw_only=True)
class LogSettings:
    """Where a run's metrics and samples go (``metrics.jsonl`` and the PNG always)."""

    rollouts_every: int = 1  # write rollouts/step_<N>.jsonl every N steps; 0: off
    rollouts_max_bytes: int = 4_000_000  # per step file: past it, prompt and response
    #   texts are clipped (head and tail kept, an equal share each); every completion
    #   still has its line
    loggers: tuple[str, ...] = ("tensorboard",)  # any of tensorboard, wandb, mlflow
    text_samples: int = 4  # completions (reward, status, reason) shown as text per
    #   logged rollout step in TensorBoard / W&B / MLflow; 0: none
    wandb_project: str = "grpo"
    wandb_mode: Literal["offline", "online"] = "offline"  # offline: <output_dir>/wandb/
    mlflow_tracking_uri: str | None = None  # None: sqlite:///<output_dir>/mlflow.db
    #   (artifacts in <output_dir>/mlartifacts)
    mlflow_experiment: str = "grpo"

    def __post_init__(self) -> None:
        if isinstance(self.loggers, str):
            raise ValueError(f"config.log.loggers: expected a list of names, got "
                             f"{self.loggers!r}; e.g. [tensorboard, wandb]")
        unknown = [name for name in self.loggers if name not in LOGGERS]
        if unknown:
            raise ValueError(f"config.log.loggers: unknown logger {unknown[0]!r}; "
                             f"known: {', '.join(LOGGERS)}")
        if len(set(self.loggers)) != len(self.loggers):
            raise ValueError(f"config.log.loggers: a logger is named twice: {self.loggers!r}")
        for name in ("rollouts_every", "rollouts_max_bytes", "text_samples"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"config.log.{name}: expected an integer >= 0, got {value!r}")
        if self.wandb_mode not in ("offline", "online"):
            raise ValueError(f"config.log.wandb_mode: 'offline' or 'online', got "
                             f"{self.wandb_mode!r}")
