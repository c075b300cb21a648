"""Log-probabilities of the sampled tokens, in fp32, without a full-vocabulary fp32 tensor.

:func:`token_logprobs` is what the policy scores a batch with (old log-probs, the training
forward, the reference); :func:`first_completion_position` is where a micro-batch's logits
start to matter.
"""

from __future__ import annotations

import torch
import torch.utils.checkpoint

from trainer_client.model.grpo import token_entropy

__all__ = ["LOGPROB_CHUNK", "first_completion_position", "token_logprobs"]

#: sequence positions per chunk of the fp32 log-softmax (see :func:`token_logprobs`)
LOGPROB_CHUNK = 128


def _scaled(logits: torch.Tensor, temperature: float,
            blocked: torch.Tensor | None) -> torch.Tensor:
    """``logits / temperature`` in fp32, blocked tokens at -1e9: the sampler's distribution."""
    x = logits.float() / temperature
    if blocked is not None:
        x = x.masked_fill(blocked[: x.shape[-1]].to(x.device), -1e9)
    return x


def _chunk_logprobs(logits: torch.Tensor, target: torch.Tensor, temperature: float,
                    blocked: torch.Tensor | None) -> torch.Tensor:
    """``[b, t]`` log-probabilities of ``target`` under ``logits [b, t, V] / temperature``,
    computed in fp32 whatever the logits' dtype."""
    x = _scaled(logits, temperature, blocked)
    return torch.log_softmax(x, dim=-1).gather(-1, target.unsqueeze(-1)).squeeze(-1)


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor, *, temperature: float = 1.0,
                   blocked: torch.Tensor | None = None, first: int = 0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of each next token ``[B, L-1]`` (and, with ``with_entropy``, the
    per-token entropy ``[B, L-1]``, no grad), in fp32.

    Only the sampled tokens' log-probabilities are formed: the model returns logits for the
    positions from ``first`` on (``logits_to_keep``; earlier positions get 0), in its compute
    dtype; the fp32 ``log_softmax`` runs over chunks of :data:`LOGPROB_CHUNK` positions, each
    under activation checkpointing, so no ``[B, L, V]`` fp32 tensor is ever held and backward
    keeps only the (bf16) logits. ``blocked`` ``[V]`` bool marks tokens the sampler could not
    produce; they get -1e9, so log-probs are those of the restricted distribution.
    """
    length = input_ids.shape[1]
    first = max(0, min(first, length - 1))
    keep = length - first  # positions first .. L-1; the last predicts nothing
    # use_cache=False: a model whose config says use_cache (SmolLM2's does) otherwise builds
    # a K/V cache in every scoring and training forward and returns it with the logits
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                   logits_to_keep=keep).logits[:, :-1]  # [B, keep-1, V]
    target = input_ids[:, first + 1:]  # [B, keep-1]
    parts, ents = [], []
    for a in range(0, logits.shape[1], LOGPROB_CHUNK):
        lg, tg = logits[:, a:a + LOGPROB_CHUNK], target[:, a:a + LOGPROB_CHUNK]
        if torch.is_grad_enabled() and lg.requires_grad:
            parts.append(torch.utils.checkpoint.checkpoint(
                _chunk_logprobs, lg, tg, temperature, blocked, use_reentrant=False))
        else:
            parts.append(_chunk_logprobs(lg, tg, temperature, blocked))
        if with_entropy:
            with torch.no_grad():
                ents.append(token_entropy(_scaled(lg.detach(), temperature, blocked)))
    pad = (first, 0)
    lp = torch.nn.functional.pad(torch.cat(parts, dim=1), pad)  # [B, L-1]
    ent = torch.nn.functional.pad(torch.cat(ents, dim=1), pad) if with_entropy else None
    return lp, ent


def first_completion_position(completion_mask: torch.Tensor) -> int:
    """The first next-token position ``[L-1]`` that predicts a completion token of any row
    (0 when no row has one)."""
    rows = completion_mask.bool().any(dim=1)
    if not bool(rows.any()):
        return 0
    return max(0, int(completion_mask[rows].argmax(dim=1).min()) - 1)
