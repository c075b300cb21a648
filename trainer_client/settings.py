"""Settings objects of the trainer's components, torch-free.

:mod:`trainer_client.config` builds these from YAML without importing torch or
transformers; the modules that use them (``policy``, ``rollout``, ``tiny_model``) re-export
them under their old names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DTYPES",
    "Aggregation",
    "DType",
    "EngineSettings",
    "GRPOSettings",
    "OptimSettings",
    "PolicySettings",
    "SamplingSettings",
    "TinyModelSettings",
    "Truncated",
    "check_dtypes",
    "check_share_prompt",
]

#: the dtypes a model may be held in: parameters, compute, the rollout engine
DType = Literal["float32", "bfloat16", "float16"]
DTYPES: tuple[DType, ...] = ("float32", "bfloat16", "float16")


def check_dtypes(settings: object, *names: str) -> None:
    """A clear error for a dtype the trainer does not hold a model in (a config's
    ``dtype: float64`` would otherwise fail deep inside a Ray actor)."""
    for name in names:
        value = getattr(settings, name)
        if value not in DTYPES:
            raise ValueError(f"{name} must be one of {', '.join(DTYPES)}; got {value!r}")


def check_share_prompt(settings: object) -> None:
    """``share_prompt`` needs the prompt's cached keys and values in the completions' forward,
    and transformers' gradient checkpointing drops a layer's cache (it would recompute it):
    the two together are refused."""
    if getattr(settings, "share_prompt", False) and getattr(settings, "gradient_checkpointing",
                                                             False):
        raise ValueError("policy.share_prompt and policy.gradient_checkpointing cannot be "
                         "combined: checkpointed layers drop the shared prompt's K/V cache")


#: loss reduction: "token" (DAPO: sum over the mini-batch's tokens / their count, across
#: micro-batches and ranks) or "sequence" (the GRPO paper: per-sequence token mean, then the
#: mean over the mini-batch's sequences)
Aggregation = Literal["token", "sequence"]

#: what a completion cut at ``max_new_tokens`` (no EOS) does: "keep" its score as is;
#: "mask" it (DAPO's overlong filtering: its reward is left out of its group and its tokens
#: out of the loss); "zero" its reward (scored as wrong, trained on like any other)
Truncated = Literal["keep", "mask", "zero"]

#: where pi_old (the sampling policy's log-probabilities, the ratio's denominator) comes from:
#: "auto": when each rollout gets exactly one optimizer step (``ppo_epochs`` 1, one
#: mini-batch) the policy is still pi_old during its one forward, so that forward's own
#: log-probabilities, detached, are pi_old (ratio 1, gradient A * grad log pi) and no
#: separate scoring forward is run; otherwise a no-grad forward before the update.
#: "forward": always that separate forward (the same update, ~1/3 more compute).
OldLogprobs = Literal["auto", "forward"]


@dataclass(frozen=True, kw_only=True)
class OptimSettings:
    """AdamW and gradient clipping."""

    lr: float = 1e-3  # learning rate (constant after warmup)
    warmup_steps: int = 0  # linear warmup over this many optimizer steps
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.99
    eps: float = 1e-8  # AdamW epsilon
    grad_clip: float = 1.0  # max global grad norm; 0 disables


@dataclass(frozen=True, kw_only=True)
class GRPOSettings:
    """The GRPO objective (see :mod:`trainer_client.model.grpo`)."""

    kl_coef: float = 0.0  # weight of k3 KL to the reference; 0: no reference model
    clip_eps_low: float = 0.2  # ratio clipped to [1 - low, 1 + high]
    clip_eps_high: float = 0.2  # > low: DAPO clip-higher
    aggregation: Aggregation = "sequence"  # "sequence" (paper) or "token" (DAPO), exact
    scale_rewards: bool = True  # divide advantages by the group std
    ppo_epochs: int = 1  # passes over each batch; > 1 makes the clip matter
    mini_batch_size: int = 0  # sequences per optimizer step (all ranks); 0: whole batch
    truncated: Truncated = "mask"  # completions cut at max_new_tokens: keep | mask | zero
    skip_no_signal: bool = False  # no update when every advantage is 0 (and kl_coef 0):
    #   saves the forward/backward; not a no-op otherwise (AdamW moves on momentum)
    old_logprobs: OldLogprobs = "auto"  # pi_old from the training forward when it can be
    tis_cap: float | None = None  # token-level truncated importance sampling: weight each
    #   token's loss by min(pi_policy / pi_rollout, tis_cap) when the rollout engine reports
    #   log-probabilities; None: off (the mismatch is still measured and logged)


@dataclass(frozen=True, kw_only=True)
class PolicySettings:
    """Everything a policy rank needs."""

    model_path: str  # HF dir (or hub id on machines with a hub) to start from
    ref_model_path: str | None = None  # reference for KL; None: model_path
    dtype: DType = "float32"  # parameter (master weight, optimizer state) dtype
    compute_dtype: DType = "float32"  # forward/backward dtype: "bfloat16" is mixed precision
    #   (FSDP2 MixedPrecisionPolicy: bf16 params in compute, fp32 master weights and fp32
    #   gradient reduction; log-probabilities always in fp32)
    device: str = "cpu"  # "cpu" (gloo) or "cuda" (nccl)
    fsdp: bool = True  # wrap with fully_shard (always on at world size > 1)
    hold_params: bool = True  # world size 1: cast the parameters once per update, not per
    #   micro-batch's forward and backward (model/sharding.py)
    micro_batch_size: int = 64  # sequences per forward/backward on one rank
    temperature: float = 1.0  # logits are divided by the sampling temperature
    allowed_token_ids: tuple[int, ...] | None = None  # same restriction as the sampler
    gradient_checkpointing: bool = False
    attn_implementation: str | None = None  # transformers' attention kernel ("sdpa",
    #   "eager"); None: transformers' default
    share_prompt: bool = False  # run each distinct prompt of a micro-batch through the model
    #   once, its group's rows attending to its cached keys and values (model/logprobs.py:
    #   shared_prompt_logprobs); micro-batches then keep the batch's order (groups adjacent)
    optim: OptimSettings = field(default_factory=OptimSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    dist_timeout_s: float = 600.0  # timeout of collectives
    num_threads: int = 0  # torch intra-op threads in this rank; 0: torch's default

    def __post_init__(self) -> None:
        check_dtypes(self, "dtype", "compute_dtype")
        check_share_prompt(self)


@dataclass(frozen=True, kw_only=True)
class SamplingSettings:
    """How completions are drawn. Every engine passes all of these explicitly: a model's
    ``generation_config.json`` never changes what is sampled."""

    n: int = 8  # completions per prompt (the GRPO group size)
    max_new_tokens: int = 4  # completion length cap
    temperature: float = 1.0  # the policy scores tokens with logits / temperature too
    top_p: float = 1.0  # 1.0 samples from the full distribution (needed for on-policy GRPO)
    allowed_token_ids: tuple[int, ...] | None = None  # restrict sampling to these ids
    greedy: bool = False  # argmax decoding, n forced to 1 (evaluation)


@dataclass(frozen=True, kw_only=True)
class EngineSettings:
    """Which engine and how it holds the model."""

    kind: Literal["auto", "hf", "vllm"] = "auto"  # auto: vllm if importable, else hf
    dtype: DType = "float32"
    device: str = "cpu"  # HF engine device ("cpu", "cuda")
    seed: int = 0  # sampling seed (each call derives its own from it)
    gpu_memory_utilization: float = 0.3  # vLLM: share of GPU memory it may take
    # vLLM: the KV cache's size in GiB; None: gpu_memory_utilization's share of the device
    # (on CPU, of host RAM, less the engine's own: ~7 GiB on a 24 GiB machine)
    kv_cache_gb: float | None = None
    max_model_len: int = 1024  # vLLM: prompt + completion tokens
    enforce_eager: bool = True  # vLLM: skip CUDA-graph capture (fast start)
    num_threads: int = 0  # torch intra-op threads of the HF engine; 0: torch's default

    def __post_init__(self) -> None:
        check_dtypes(self, "dtype")
        if self.kv_cache_gb is not None and not self.kv_cache_gb > 0:
            raise ValueError(f"rollout.engine.kv_cache_gb must be > 0 GiB, got {self.kv_cache_gb}")


@dataclass(frozen=True, kw_only=True)
class TinyModelSettings:
    """Shape of the tiny model (defaults: ~100k parameters, trains in seconds on CPU)."""

    arch: Literal["qwen2", "llama"] = "qwen2"
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 256
    max_position_embeddings: int = 256
    seed: int = 0  # initial weights are a function of this seed
