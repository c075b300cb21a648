"""The run's observability, in one object the training loop calls twice a step:

    preflight(cfg.log, out)                       # before the model loads: clear errors
    tracker = RunTracker(cfg.log, out, start_step=S, resumed=..., config=...)
    tracker.log_rollouts(step, records)           # after the step's advantages
    tracker.log_metrics(row)                      # with each metrics.jsonl line
    tracker.close(ok)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer_client.tracking.backends import (
    MetricLogger,
    TrackingConfigError,
    check_packages,
    open_logger,
    pick_samples,
    scalars_of,
)
from trainer_client.tracking.rollout_log import RolloutLog, set_aside_steps_after
from trainer_client.tracking.settings import LogSettings

__all__ = ["RunTracker", "check_output_dir", "preflight"]

logger = logging.getLogger(__name__)


def check_output_dir(out: Path) -> None:
    """Create ``out`` and write (then remove) a probe file in it: an output directory the
    run cannot write is a clear error naming ``run.output_dir``, not a failure hours later."""
    probe = out / f".write-probe-{os.getpid()}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        with probe.open("w") as fh:
            fh.write("probe\n")
        probe.unlink()
    except OSError as e:
        raise TrackingConfigError(f"config.run.output_dir (--output-dir): cannot write to "
                                  f"{out}: {e.strerror or e}") from e


def preflight(settings: LogSettings, out: Path) -> None:
    """Checks that need no model: the output directory is writable, and every requested
    logger's package is installed."""
    check_output_dir(out)
    check_packages(settings)


class RunTracker:
    """The rollout log and the metric loggers of one run."""

    def __init__(self, settings: LogSettings, out: Path, *, start_step: int,
                 resumed: bool, config: Mapping[str, Any]) -> None:
        """``start_step``: the step the run starts after (its checkpoint's, 0 when fresh);
        ``resumed``: it continues an earlier run in ``out`` (its steps up to ``start_step``
        are kept; a fresh run sets aside every earlier step file of ``rollouts/`` and
        ``eval/``)."""
        self.settings = settings
        keep = start_step if resumed else -1
        self.rollouts = (RolloutLog(out / "rollouts", every=settings.rollouts_every,
                                    max_bytes=settings.rollouts_max_bytes, keep_through=keep)
                         if settings.rollouts_every else None)
        if self.rollouts is None:  # the log is off now: an earlier run's files still go
            set_aside_steps_after(out / "rollouts", keep)
        set_aside_steps_after(out / "eval", keep)
        self._samples_every = settings.rollouts_every or 1
        self.loggers: list[MetricLogger] = []
        try:
            for name in settings.loggers:
                self.loggers.append(open_logger(
                    name, out, settings, config=dict(config), start_step=start_step,
                    resumed_from=start_step if resumed else None))
        except BaseException:
            self.close(ok=False)
            raise

    def wants_records(self, step: int) -> bool:
        """Whether :meth:`log_rollouts` would use the step's records (build them only then)."""
        return ((self.rollouts is not None and self.rollouts.wants(step))
                or (bool(self.loggers) and self.settings.text_samples > 0
                    and step % self._samples_every == 0))

    def log_rollouts(self, step: int, records: Sequence[dict[str, Any]]) -> None:
        if self.rollouts is not None and self.rollouts.wants(step):
            self.rollouts.write(step, records)
        if self.settings.text_samples and step % self._samples_every == 0:
            picked = pick_samples(records, self.settings.text_samples)
            for lg in self.loggers:
                lg.log_samples(step, picked)

    def log_metrics(self, row: Mapping[str, Any]) -> None:
        scalars = scalars_of(row)
        for lg in self.loggers:
            lg.log_scalars(int(row["step"]), scalars)

    def close(self, ok: bool = True) -> None:
        """Close every logger. After a failure (``ok`` False: the disk may be full) a logger
        that fails to close is logged, not raised, so the first error is the one reported."""
        loggers, self.loggers = self.loggers, []
        first: BaseException | None = None
        for lg in loggers:
            try:
                lg.close(ok)
            except Exception as e:
                logger.warning("closing a metric logger failed",
                               extra={"logger": lg.name, "error": str(e)[:300]})
                first = first or e
        if ok and first is not None:
            raise first
