"""The training run's configuration: one YAML file, one typed object.

    cfg = load_config("configs/tiny-cpu.yaml", overrides={"run": {"steps": 50}})

Sections map to the settings object of each component (``data`` → :class:`DataSettings`,
``optim`` → :class:`OptimSettings`, ``log`` → :class:`LogSettings`, ...). Unknown keys are an error, not silently ignored.
Every field is documented where it is defined; ``docs/trainer.md`` lists them all.
Reading a config needs no torch (the settings live in :mod:`trainer_client.settings`).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from trainer_client.data import DataSettings
from trainer_client.settings import (
    DType,
    EngineSettings,
    GRPOSettings,
    OptimSettings,
    TinyModelSettings,
    check_dtypes,
    check_share_prompt,
)
from trainer_client.tracking.settings import LogSettings

__all__ = [
    "CheckpointSection",
    "EvalSection",
    "ModelSection",
    "PolicySection",
    "RayConfig",
    "RewardSection",
    "RolloutSection",
    "RunSection",
    "TrainConfig",
    "load_config",
]


@dataclass(frozen=True, kw_only=True)
class RunSection:
    steps: int = 200  # training steps (one batch of prompts each)
    prompts_per_step: int = 16  # prompts per step; sequences = prompts_per_step * rollout.n
    seed: int = 0  # data order, sampling and tiny-model init
    backend: Literal["ray", "local"] = "ray"  # local: everything in this process (tests, debug)
    output_dir: str = "runs/default"  # metrics.jsonl, reward_curve.png, checkpoints/
    log_every: int = 1  # write a metrics line every N steps (eval/checkpoint steps always)
    time_limit_s: float | None = None  # end (final eval + checkpoint) after the step during
    #                                    which this much training time has passed
    rollout_prompts: int = 0  # prompts rolled out per step; 0: prompts_per_step. More: DAPO's
    #   dynamic sampling: the step trains on the first prompts_per_step groups that have a
    #   reward spread (the others would add no gradient, only cost)


@dataclass(frozen=True, kw_only=True)
class ModelSection:
    path: str | None = None  # HF model dir or hub id (or the dir of `gguf_file`); ignored
    #                          when `tiny` is set
    package: str | None = None  # installed Python package whose dir holds `gguf_file`
    gguf_file: str | None = None  # GGUF file: de-quantized once into <output_dir>/base_model
    tiny: TinyModelSettings | None = None  # build a tiny random model locally at start
    dtype: DType = "float32"

    def __post_init__(self) -> None:
        check_dtypes(self, "dtype")


@dataclass(frozen=True, kw_only=True)
class RolloutSection:
    engine: EngineSettings = field(default_factory=EngineSettings)
    n: int = 8  # samples per prompt (GRPO group size)
    max_new_tokens: int = 4
    temperature: float = 1.0
    top_p: float = 1.0
    allowed_chars: str | None = None  # restrict completions to these characters (+ EOS)
    chunks: int = 2  # rollout split in chunks; rewards of chunk k overlap generation of k+1
    num_gpus: float = 0.0  # GPUs of the rollout actor (Ray)
    timeout_s: float = 600.0  # wait for one rollout chunk at most this long


@dataclass(frozen=True, kw_only=True)
class PolicySection:
    world_size: int = 1  # FSDP2 ranks (Ray actors, one GPU each on GPU)
    device: str = "cpu"  # "cpu" (gloo) or "cuda" (nccl)
    fsdp: bool = True  # wrap with fully_shard even at world size 1
    micro_batch_size: int = 64  # sequences per forward/backward per rank
    compute_dtype: DType = "float32"  # "bfloat16": mixed precision (fp32 master weights,
    #                                  fp32 gradient reduction, fp32 log-probabilities)
    gradient_checkpointing: bool = False
    attn_implementation: str | None = None  # "sdpa" | "eager"; None: transformers' default
    share_prompt: bool = False  # each distinct prompt of a micro-batch through the model once
    #                             (a group's rows attend to its cached keys and values)
    num_threads: int = 0  # torch threads per rank; 0: torch's default (1 in a 1-CPU Ray actor)
    timeout_s: float = 900.0  # wait for one train step / weight gather at most this long

    def __post_init__(self) -> None:
        check_dtypes(self, "compute_dtype")
        check_share_prompt(self)


@dataclass(frozen=True, kw_only=True)
class RewardSection:
    urls: tuple[str, ...] = ("http://127.0.0.1:8000",)  # reward service base URLs (failover)
    chunk_size: int = 256  # items per HTTP request
    max_concurrency: int = 4  # requests in flight per scoring call
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 120.0  # one request, scoring included
    item_timeout_s: float | None = None  # per-item deadline sent to the service
    max_attempts: int = 8  # client attempts per request (connect errors / 502 / 503)
    request_deadline_s: float = 30.0  # client gives up on a request after this long
    ready_timeout_s: float = 60.0  # wait for /readyz at start
    step_max_wait_s: float = 300.0  # a step waits this long for the service, then goes on
    step_retry_backoff_s: float = 2.0  # pause between a step's scoring attempts
    extra: dict[str, Any] | None = None  # the `extra` of every item, e.g. {format_score: 0.1}
    #                                      (gsm8k: the score of a wrong answer after '####')


@dataclass(frozen=True, kw_only=True)
class CheckpointSection:
    every: int = 50  # save every N steps (and at the end); 0: only at the end
    every_s: float = 0.0  # also save after the step during which k * every_s seconds of
    #                       training have passed (k = 1, 2, ...); 0: off
    keep_last: int = 2  # keep the newest k checkpoints; 0 keeps all


@dataclass(frozen=True, kw_only=True)
class EvalSection:
    every: int = 25  # greedy eval on the held-out problems every N steps; 0 disables
    max_problems: int = 200  # cap on eval problems
    at_start: bool = False  # also evaluate the starting model (logged as step 0)


@dataclass(frozen=True, kw_only=True)
class RayConfig:
    address: str | None = None  # None: start a local Ray; "auto": join a cluster
    num_cpus: int | None = 2  # CPUs of a local Ray (None: all)
    include_dashboard: bool = False


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    run: RunSection = field(default_factory=RunSection)
    model: ModelSection = field(default_factory=ModelSection)
    data: DataSettings = field(default_factory=DataSettings)
    rollout: RolloutSection = field(default_factory=RolloutSection)
    policy: PolicySection = field(default_factory=PolicySection)
    optim: OptimSettings = field(default_factory=OptimSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    reward: RewardSection = field(default_factory=RewardSection)
    checkpoint: CheckpointSection = field(default_factory=CheckpointSection)
    eval: EvalSection = field(default_factory=EvalSection)
    ray: RayConfig = field(default_factory=RayConfig)
    log: LogSettings = field(default_factory=LogSettings)  # rollout log, metric loggers


def _dataclass_of(tp: Any) -> type | None:
    if dataclasses.is_dataclass(tp):
        return tp  # type: ignore[return-value]
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        for a in typing.get_args(tp):
            if dataclasses.is_dataclass(a):
                return a  # type: ignore[return-value]
    return None


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(names)}")
    kwargs: dict[str, Any] = {}
    for k, v in data.items():
        sub = _dataclass_of(hints[k])
        if sub is not None and isinstance(v, dict):
            kwargs[k] = _build(sub, v, f"{where}.{k}")
        elif isinstance(v, list):
            kwargs[k] = tuple(v)
        else:
            kwargs[k] = v
    return cls(**kwargs)


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            else v
    return out


def load_config(path: str | Path | None, *,
                overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read YAML at ``path`` (None: defaults), apply nested ``overrides``, validate."""
    raw: dict[str, Any] = {}
    if path is not None:
        raw = yaml.safe_load(Path(path).read_text()) or {}
    cfg: TrainConfig = _build(TrainConfig, _merge(raw, overrides or {}), "config")
    m = cfg.model
    if m.tiny is None and not m.path and not (m.package and m.gguf_file):
        raise ValueError("config.model: set `path`, `tiny`, or `package` and `gguf_file`")
    if cfg.run.prompts_per_step * cfg.rollout.n % cfg.policy.world_size:
        raise ValueError("prompts_per_step * rollout.n must divide by policy.world_size")
    if cfg.run.rollout_prompts and cfg.run.rollout_prompts < cfg.run.prompts_per_step:
        raise ValueError("config.run.rollout_prompts must be 0 or >= run.prompts_per_step")
    if cfg.reward.extra is not None and not isinstance(cfg.reward.extra, dict):
        raise ValueError("config.reward.extra must be a mapping (the `extra` of each item)")
    return cfg
