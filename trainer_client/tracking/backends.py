"""Metric loggers behind one interface: TensorBoard, Weights & Biases (offline by default),
MLflow (a local SQLite store by default). Each gets every scalar of a ``metrics.jsonl`` row
under the same name and step, and a few sampled completions (reward, status, reason) as
text or a table, like TRL's ``log_completions``.

The packages are optional: :func:`check_packages` imports the requested ones at start-up
(before the model loads) and names the config key when one is missing; the loggers import
them only when opened.

On resume (from the checkpoint of step S): TensorBoard's writer starts with
``purge_step=S+1``, so TensorBoard drops what an earlier, crashed attempt wrote after the
checkpoint; W&B and MLflow get a new run, tagged ``resumed_from_step``.
"""

from __future__ import annotations

import importlib
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from trainer_client.tracking.files import disk_full_as_error
from trainer_client.tracking.settings import LogSettings

__all__ = ["SAMPLE_COLUMNS", "MLflowLogger", "MetricLogger", "TensorBoardLogger",
           "TrackingConfigError", "WandbLogger", "check_packages", "open_logger",
           "pick_samples", "samples_markdown", "scalars_of"]

logger = logging.getLogger(__name__)

#: what each logger needs importable, and how to install it
_PACKAGES: dict[str, tuple[tuple[str, ...], str]] = {
    "tensorboard": (("tensorboard",), "pip install tensorboard"),
    "wandb": (("wandb",), "pip install wandb"),
    "mlflow": (("mlflow",), "pip install mlflow-skinny sqlalchemy alembic (or mlflow)"),
}
_MLFLOW_SQL = (("sqlalchemy", "alembic"), "pip install sqlalchemy alembic (MLflow's SQL store)")

#: columns of the sampled-completions table
SAMPLE_COLUMNS = ("id", "sample", "reward", "status", "reason", "extracted", "advantage",
                  "response")


class TrackingConfigError(ValueError):
    """The ``log`` section or the output directory cannot work on this machine."""


def check_packages(settings: LogSettings) -> None:
    """Import what each requested logger needs; a clear error naming ``log.loggers``."""
    for name in settings.loggers:
        needs = [_PACKAGES[name]]
        if name == "mlflow" and (settings.mlflow_tracking_uri or "sqlite:").startswith("sqlite:"):
            needs.append(_MLFLOW_SQL)
        for modules, hint in needs:
            for module in modules:
                try:
                    importlib.import_module(module)
                except ImportError as e:
                    raise TrackingConfigError(
                        f"config.log.loggers: {name!r} needs the {module!r} package, which "
                        f"is not installed ({e}); {hint}, or remove {name!r} from "
                        f"log.loggers") from e


def scalars_of(row: Mapping[str, Any]) -> dict[str, float]:
    """The row's numeric, finite values (``step`` aside) as floats: what the loggers get."""
    out = {}
    for k, v in row.items():
        if k == "step" or not isinstance(v, int | float):
            continue
        f = float(v)
        if math.isfinite(f):
            out[k] = f
    return out


def pick_samples(records: Sequence[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """``k`` records spread evenly over the step (different groups, different statuses)."""
    if k <= 0 or not records:
        return []
    k = min(k, len(records))
    return [records[i * len(records) // k] for i in range(k)]


def _cell(v: Any, limit: int = 400) -> str:
    if v is None:
        return "-"
    s = f"{v:.3f}" if isinstance(v, float) else str(v)
    if len(s) > limit:
        s = s[:limit] + "\u2026"
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " \u23ce ")


def samples_markdown(step: int, records: Sequence[dict[str, Any]]) -> str:
    """A markdown table of sampled completions (TensorBoard's text plugin renders it)."""
    lines = [f"step {step}: {len(records)} sampled completions", "",
             "| " + " | ".join(SAMPLE_COLUMNS) + " |", "|" + "---|" * len(SAMPLE_COLUMNS)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in SAMPLE_COLUMNS) + " |"
              for r in records]
    return "\n".join(lines)


class MetricLogger(Protocol):
    """One place a run's metrics go besides ``metrics.jsonl``."""

    name: str

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None: ...

    def log_samples(self, step: int, records: Sequence[dict[str, Any]]) -> None: ...

    def close(self, ok: bool) -> None: ...


class TensorBoardLogger:
    """Event files in ``<output_dir>/tensorboard/`` (torch's ``SummaryWriter`` over the
    ``tensorboard`` package's event writer); flushed after every step, so a running
    ``tensorboard --logdir`` sees each step as it ends, and a full disk shows at that step."""

    name = "tensorboard"

    def __init__(self, log_dir: Path, *, purge_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = log_dir
        with disk_full_as_error(log_dir):
            self._w = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step,
                                    flush_secs=30)

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        with disk_full_as_error(self.log_dir):
            for k, v in scalars.items():
                self._w.add_scalar(k, v, global_step=step)
            self._w.flush()

    def log_samples(self, step: int, records: Sequence[dict[str, Any]]) -> None:
        with disk_full_as_error(self.log_dir):
            self._w.add_text("completions", samples_markdown(step, records), global_step=step)

    def close(self, ok: bool) -> None:
        with disk_full_as_error(self.log_dir):
            self._w.close()


class WandbLogger:
    """A W&B run in ``<output_dir>/wandb/`` (``mode: offline`` by default: ``wandb sync``
    uploads it later); samples as a ``wandb.Table`` named ``completions``."""

    name = "wandb"

    def __init__(self, out: Path, settings: LogSettings, *, config: dict[str, Any],
                 resumed_from: int | None) -> None:
        import wandb

        self._wandb = wandb
        with disk_full_as_error(out / "wandb"):
            self._run = wandb.init(
                project=settings.wandb_project, dir=str(out), mode=settings.wandb_mode,
                name=out.name, config=config, reinit="create_new",
                tags=[f"resumed_from_step_{resumed_from}"] if resumed_from is not None else None,
                settings=wandb.Settings(console="off", silent=True, x_disable_stats=True))
        self.run_dir = Path(self._run.dir).parent

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        self._run.log(dict(scalars), step=step)

    def log_samples(self, step: int, records: Sequence[dict[str, Any]]) -> None:
        table = self._wandb.Table(columns=list(SAMPLE_COLUMNS),
                                  data=[[r.get(c) for c in SAMPLE_COLUMNS] for r in records])
        self._run.log({"completions": table}, step=step)

    def close(self, ok: bool) -> None:
        self._run.finish(exit_code=0 if ok else 1)
        self._wandb.teardown()  # the wandb-core process this run started


class MLflowLogger:
    """An MLflow run; by default in ``sqlite:///<output_dir>/mlflow.db`` with artifacts in
    ``<output_dir>/mlartifacts`` (MLflow 3 refuses its old ``./mlruns`` file store unless
    told to). Samples as ``completions/step_<N>.md`` artifacts, the config as
    ``config.json``."""

    name = "mlflow"

    def __init__(self, out: Path, settings: LogSettings, *, config: dict[str, Any],
                 resumed_from: int | None) -> None:
        from mlflow.tracking import MlflowClient

        uri = settings.mlflow_tracking_uri or f"sqlite:///{out.resolve() / 'mlflow.db'}"
        self.tracking_uri = uri
        with disk_full_as_error(out):
            self._client = client = MlflowClient(tracking_uri=uri)
            exp = client.get_experiment_by_name(settings.mlflow_experiment)
            exp_id = exp.experiment_id if exp is not None else client.create_experiment(
                settings.mlflow_experiment,
                artifact_location=None if settings.mlflow_tracking_uri
                else (out.resolve() / "mlartifacts").as_uri())
            tags = {"output_dir": str(out.resolve())}
            if resumed_from is not None:
                tags["resumed_from_step"] = str(resumed_from)
            self.run_id = client.create_run(exp_id, run_name=out.name, tags=tags).info.run_id
            client.log_dict(self.run_id, config, "config.json")

    def log_scalars(self, step: int, scalars: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in scalars.items()]
        for i in range(0, len(metrics), 1000):  # MLflow's limit per batch
            self._client.log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def log_samples(self, step: int, records: Sequence[dict[str, Any]]) -> None:
        self._client.log_text(self.run_id, samples_markdown(step, records),
                              f"completions/step_{step:06d}.md")

    def close(self, ok: bool) -> None:
        self._client.set_terminated(self.run_id, "FINISHED" if ok else "FAILED")


def open_logger(name: str, out: Path, settings: LogSettings, *, config: dict[str, Any],
                start_step: int, resumed_from: int | None) -> MetricLogger:
    """Open the logger ``name`` for a run writing into ``out`` that starts after
    ``start_step`` (0: fresh)."""
    if name == "tensorboard":
        # a fresh run purges from step 0 (an eval at start is step 0), a resumed one after
        # its checkpoint
        return TensorBoardLogger(out / "tensorboard",
                                 purge_step=start_step + 1 if start_step else 0)
    if name == "wandb":
        return WandbLogger(out, settings, config=config, resumed_from=resumed_from)
    if name == "mlflow":
        return MLflowLogger(out, settings, config=config, resumed_from=resumed_from)
    raise TrackingConfigError(f"config.log.loggers: unknown logger {name!r}")
