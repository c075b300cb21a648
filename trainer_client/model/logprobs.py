"""Log-probabilities of the sampled tokens, in fp32, without a full-vocabulary fp32 tensor.

:func:`token_logprobs` is what the policy scores a batch with (old log-probs, the training
forward, the reference); :func:`first_completion_position` is where a micro-batch's logits
start to matter. :func:`shared_prompt_logprobs` gives the same log-probabilities with each
distinct prompt of a micro-batch run through the model once (a GRPO group's ``n`` rows share
their prompt): the prompt's keys and values, computed with gradient, are what every row of
its group attends to, so the backward through them sums the group's gradients.
"""

from __future__ import annotations

from typing import Any

import torch

from trainer_client.model.batch import TrainBatch

__all__ = ["LOGPROB_CHUNK", "batch_logprobs", "first_completion_position", "prompt_groups",
           "shared_prompt_logprobs", "token_logprobs"]

#: token positions per chunk of the fp32 log-softmax (:class:`_SampledLogprob`): 64 x
#: SmolLM2's 49,152-wide vocabulary is 12.6 MB in fp32. Chunks of a micro-batch's whole
#: rows (32 rows x 39 positions: 245 MB) made each vocabulary-wide op 3-12x slower per
#: element on this CPU, and slicing them under autograd zero-filled and added a full-size
#: gradient per chunk in the backward
LOGPROB_CHUNK = 64


def _scaled(logits: torch.Tensor, temperature: float,
            blocked: torch.Tensor | None) -> torch.Tensor:
    """``logits / temperature`` in fp32, blocked tokens at -1e9: the sampler's distribution."""
    x = logits.float() / temperature
    if blocked is not None:
        x = x.masked_fill(blocked[: x.shape[-1]].to(x.device), -1e9)
    return x


class _SampledLogprob(torch.autograd.Function):
    """``[N]`` log-probabilities of ``target [N]`` under ``logits [N, V] / temperature``
    (blocked tokens at -1e9) in fp32, and (no grad) each row's entropy, in chunks of
    :data:`LOGPROB_CHUNK` rows forward and backward: no ``[N, V]`` fp32 tensor is formed,
    the forward keeps each row's log-sum-exp, and the backward writes each chunk's gradient
    (``(onehot - softmax) / temperature``) straight into one tensor of the logits' dtype."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor, temperature: float,
                blocked: torch.Tensor | None, with_entropy: bool
                ) -> tuple[torch.Tensor, torch.Tensor]:
        n = logits.shape[0]
        lp = torch.empty(n, dtype=torch.float32, device=logits.device)
        lse = torch.empty_like(lp)
        ent = torch.empty(n if with_entropy else 0, dtype=torch.float32, device=logits.device)
        for a in range(0, n, LOGPROB_CHUNK):
            x = _scaled(logits[a:a + LOGPROB_CHUNK], temperature, blocked)
            m = torch.logsumexp(x, dim=-1)
            lse[a:a + LOGPROB_CHUNK] = m
            lp[a:a + LOGPROB_CHUNK] = x.gather(-1, target[a:a + LOGPROB_CHUNK, None])[:, 0] - m
            if with_entropy:  # H = lse - sum(p x)
                ent[a:a + LOGPROB_CHUNK] = m - (torch.exp(x - m[:, None]) * x).sum(dim=-1)
        ctx.save_for_backward(logits, target, lse)
        ctx.temperature, ctx.blocked = temperature, blocked
        ctx.mark_non_differentiable(ent)
        return lp, ent

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor, _: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        logits, target, lse = ctx.saved_tensors
        grad = torch.empty_like(logits)
        for a in range(0, logits.shape[0], LOGPROB_CHUNK):
            x = _scaled(logits[a:a + LOGPROB_CHUNK], ctx.temperature, ctx.blocked)
            ga = g[a:a + LOGPROB_CHUNK, None].float()
            d = torch.exp(x - lse[a:a + LOGPROB_CHUNK, None]).mul_(-ga)
            d.scatter_add_(-1, target[a:a + LOGPROB_CHUNK, None], ga)
            if ctx.blocked is not None:  # a blocked logit is replaced by a constant
                d.masked_fill_(ctx.blocked[: d.shape[-1]].to(d.device), 0.0)
            grad[a:a + LOGPROB_CHUNK] = d.div_(ctx.temperature)
        return grad, None, None, None, None


def token_logprobs(model: torch.nn.Module, input_ids: torch.Tensor,
                   attention_mask: torch.Tensor, *, temperature: float = 1.0,
                   blocked: torch.Tensor | None = None, first: int = 0,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of each next token ``[B, L-1]`` (and, with ``with_entropy``, the
    per-token entropy ``[B, L-1]``, no grad), in fp32.

    Only the sampled tokens' log-probabilities are formed: the model returns logits for the
    positions from ``first`` on (``logits_to_keep``; earlier positions get 0), in its compute
    dtype; the fp32 log-softmax runs over chunks of :data:`LOGPROB_CHUNK` token positions
    (:class:`_SampledLogprob`), so no ``[B, L, V]`` fp32 tensor is ever held and backward
    keeps only the (bf16) logits and each position's log-sum-exp. ``blocked`` ``[V]`` bool
    marks tokens the sampler could not produce; they get -1e9, so log-probs are those of the
    restricted distribution.
    """
    length = input_ids.shape[1]
    first = max(0, min(first, length - 1))
    # the positions first .. L-2 (the last predicts nothing), as one contiguous tensor;
    # use_cache=False: a model whose config says use_cache (SmolLM2's does) otherwise builds
    # a K/V cache in every scoring and training forward and returns it with the logits
    logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                   logits_to_keep=torch.arange(first, length - 1, device=input_ids.device)
                   ).logits  # [B, keep-1, V]
    lp, ent = _sampled(logits, input_ids[:, first + 1:], temperature, blocked, with_entropy)
    pad = (first, 0)
    return (torch.nn.functional.pad(lp, pad),  # [B, L-1]
            None if ent is None else torch.nn.functional.pad(ent, pad))


def _sampled(logits: torch.Tensor, target: torch.Tensor, temperature: float,
             blocked: torch.Tensor | None, with_entropy: bool
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``[B, T]`` log-probabilities of ``target`` under ``logits [B, T, V]`` (and entropies,
    no grad), through :class:`_SampledLogprob` over the ``B x T`` positions."""
    b, t, v = logits.shape
    lp, ent = _SampledLogprob.apply(logits.reshape(b * t, v), target.reshape(b * t),
                                    temperature, blocked, with_entropy)
    return lp.view(b, t), ent.view(b, t) if with_entropy else None


def prompt_groups(input_ids: torch.Tensor, prompt_lengths: torch.Tensor
                  ) -> tuple[list[int], torch.Tensor]:
    """The rows that share a prompt: the first row of each distinct prompt (in order), and
    ``[B]`` each row's index into that list."""
    seen: dict[tuple[int, ...], int] = {}
    firsts: list[int] = []
    index = []
    for i, n in enumerate(prompt_lengths.tolist()):
        key = tuple(input_ids[i, :n].tolist())
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(i)
        index.append(seen[key])
    return firsts, torch.tensor(index, dtype=torch.long)


def shared_prompt_logprobs(model: torch.nn.Module, input_ids: torch.Tensor,
                           attention_mask: torch.Tensor, prompt_lengths: torch.Tensor, *,
                           temperature: float = 1.0, blocked: torch.Tensor | None = None,
                           with_entropy: bool = False
                           ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`token_logprobs` of right-padded ``prompt + completion`` rows whose first
    ``prompt_lengths`` ``[B]`` tokens are the prompt, with each distinct prompt run once.

    Two forwards: the distinct prompts, left-padded to a common width ``P`` (positions from
    0 at each prompt's first token), into a K/V cache, and the logits of their last position
    (which predict each row's first completion token); then every row's completion
    (right-padded to ``C``, positions continuing its prompt's) attending to its prompt's cached
    keys and values (the cache's rows selected per row, a differentiable gather) and to its
    own earlier tokens. Values are returned on the positions that predict a completion token
    (``[B, L-1]``, 0 elsewhere: prompt and padding positions, which callers mask out)."""
    b, length = input_ids.shape
    dev = input_ids.device
    plen = prompt_lengths.to(torch.long).cpu()
    clen = attention_mask.sum(dim=1).cpu() - plen
    ids = input_ids.cpu()
    firsts, index = prompt_groups(ids, plen)
    idx = index.to(dev)
    width, cw = int(plen[firsts].max()), max(1, int(clen.max()))
    cols = torch.arange(width)
    starts = (width - plen[firsts])[:, None]  # [k, 1]: left padding of each distinct prompt
    pmask = (cols[None, :] >= starts).long()  # [k, P]
    src = (cols[None, :] - starts).clamp(min=0)
    pids = torch.where(pmask.bool(), ids[firsts].gather(1, src), 0)
    ppos = (cols[None, :] - starts).clamp(min=0)
    out = model(input_ids=pids.to(dev), attention_mask=pmask.to(dev), position_ids=ppos.to(dev),
                use_cache=True, logits_to_keep=1)
    head = out.logits[:, -1:]  # [k, 1, V]: predicts each prompt's first completion token
    cache = out.past_key_values
    cache.batch_select_indices(idx)  # [k, ...] -> [B, ...], differentiable
    ccols = torch.arange(cw)
    cmask = (ccols[None, :] < clen[:, None]).long()  # [B, C]
    cids = torch.where(cmask.bool(), ids.gather(
        1, (plen[:, None] + ccols[None, :]).clamp(max=length - 1)), 0)
    cids = cids.to(dev)
    lps: list[torch.Tensor] = []
    ents: list[torch.Tensor | None] = []
    lp, ent = _sampled(head[idx], cids[:, :1], temperature, blocked, with_entropy)
    lps.append(lp)
    ents.append(ent)
    if cw > 1:  # the completions' positions 0 .. C-2 predict their tokens 1 .. C-1
        cpos = plen[:, None] + ccols[None, :]
        logits = model(input_ids=cids, attention_mask=torch.cat([pmask[index], cmask],
                                                                dim=1).to(dev),
                       position_ids=cpos.to(dev), past_key_values=cache, use_cache=True,
                       logits_to_keep=torch.arange(cw - 1, device=dev)).logits
        lp, ent = _sampled(logits, cids[:, 1:], temperature, blocked, with_entropy)
        lps.append(lp)
        ents.append(ent)
    # completion token j of row i is predicted at next-token position plen_i - 1 + j; the
    # padded j >= clen_i land past the row's last position and are zeroed before the scatter
    at = (plen[:, None] - 1 + ccols[None, :]).to(dev)  # [B, C]
    keep = cmask.to(dev, torch.float32)

    def place(vals: list[torch.Tensor]) -> torch.Tensor:
        full = torch.zeros(b, length - 1 + cw, device=dev, dtype=torch.float32)
        return full.scatter(1, at, torch.cat(vals, dim=1) * keep)[:, :length - 1]

    return place(lps), place([e for e in ents if e is not None]) if with_entropy else None


def first_completion_position(completion_mask: torch.Tensor) -> int:
    """The first next-token position ``[L-1]`` that predicts a completion token of any row
    (0 when no row has one)."""
    rows = completion_mask.bool().any(dim=1)
    if not bool(rows.any()):
        return 0
    return max(0, int(completion_mask[rows].argmax(dim=1).min()) - 1)


def batch_logprobs(model: torch.nn.Module, mb: TrainBatch, device: torch.device, *,
                   temperature: float, blocked: torch.Tensor | None, share_prompt: bool,
                   with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A micro-batch's log-probabilities ``[b, L-1]`` as the policy forms them: with
    ``share_prompt`` (and the batch's prompt lengths known), :func:`shared_prompt_logprobs`;
    else :func:`token_logprobs`, logits only from its first completion position on."""
    ids, attn = mb.input_ids.to(device), mb.attention_mask.to(device)
    if share_prompt and mb.prompt_lengths is not None:
        return shared_prompt_logprobs(model, ids, attn, mb.prompt_lengths,
                                      temperature=temperature, blocked=blocked,
                                      with_entropy=with_entropy)
    return token_logprobs(model, ids, attn, temperature=temperature, blocked=blocked,
                          first=first_completion_position(mb.completion_mask),
                          with_entropy=with_entropy)
