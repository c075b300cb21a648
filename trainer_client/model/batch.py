"""Turn sampled completions and their advantages into padded training tensors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainer_client.model.rollout import Completion

__all__ = ["TrainBatch", "make_train_batch"]


@dataclass(frozen=True)
class TrainBatch:
    """Right-padded ``prompt + completion`` rows; ``B`` sequences of length ``L``."""

    input_ids: torch.Tensor  # [B, L] long
    attention_mask: torch.Tensor  # [B, L] long, 1 on real tokens
    completion_mask: torch.Tensor  # [B, L] float, 1 on completion tokens of usable rows
    advantages: torch.Tensor  # [B] float
    #: [B, L] float: the rollout engine's log-probability of the token at each position
    #: (NaN on prompt and padding positions and where the engine gave none)
    rollout_logprobs: torch.Tensor | None = None
    #: [B] long: each row's prompt tokens (its first ones); None where the batch was built
    #: without them (then nothing can share a prompt's forward: ``policy.share_prompt``)
    prompt_lengths: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, rows: slice | torch.Tensor) -> TrainBatch:
        return TrainBatch(self.input_ids[rows], self.attention_mask[rows],
                          self.completion_mask[rows], self.advantages[rows],
                          None if self.rollout_logprobs is None
                          else self.rollout_logprobs[rows],
                          None if self.prompt_lengths is None else self.prompt_lengths[rows])

    def trimmed(self) -> TrainBatch:
        """The same rows without the padding columns they all end with (rows are
        right-padded): a micro-batch of short rows costs only its own length."""
        length = int(self.input_ids.shape[1])
        used = int(self.attention_mask.sum(dim=1).max()) if len(self) else length
        if used >= length:
            return self
        cols = slice(0, max(used, 2))  # a next-token position needs two columns
        return TrainBatch(self.input_ids[:, cols], self.attention_mask[:, cols],
                          self.completion_mask[:, cols], self.advantages,
                          None if self.rollout_logprobs is None
                          else self.rollout_logprobs[:, cols], self.prompt_lengths)

    def lengths(self) -> torch.Tensor:
        """``[B]`` real tokens per row."""
        return self.attention_mask.sum(dim=1)


def make_train_batch(completions: Sequence[Completion], advantages: torch.Tensor,
                     valid: torch.Tensor, *, pad_id: int) -> TrainBatch:
    """Pack completions (flattened, group after group) with their advantages ``[B]``.

    Rows whose reward was unavailable (``valid`` False) keep their tokens but get an all-zero
    ``completion_mask``: they contribute nothing to the loss.
    """
    if len(completions) != advantages.numel() or len(completions) != valid.numel():
        raise ValueError("completions, advantages and valid differ in length")
    rows = [c.prompt_ids + c.completion_ids for c in completions]
    length = max(len(r) for r in rows)
    b = len(rows)
    input_ids = torch.full((b, length), pad_id, dtype=torch.long)
    attention = torch.zeros((b, length), dtype=torch.long)
    cmask = torch.zeros((b, length), dtype=torch.float32)
    with_lp = all(c.logprobs is not None for c in completions)
    rollout_lp = torch.full((b, length), float("nan")) if with_lp else None
    for i, (c, r) in enumerate(zip(completions, rows, strict=True)):
        input_ids[i, : len(r)] = torch.tensor(r, dtype=torch.long)
        attention[i, : len(r)] = 1
        if bool(valid[i]):
            cmask[i, len(c.prompt_ids): len(r)] = 1.0
        if rollout_lp is not None and c.logprobs:
            if len(c.logprobs) != len(c.completion_ids):
                raise ValueError("a completion's logprobs and token ids differ in length")
            rollout_lp[i, len(c.prompt_ids): len(r)] = torch.tensor(c.logprobs,
                                                                    dtype=torch.float32)
    plen = torch.tensor([len(c.prompt_ids) for c in completions], dtype=torch.long)
    return TrainBatch(input_ids, attention, cmask, advantages.to(torch.float32), rollout_lp,
                      plen)
