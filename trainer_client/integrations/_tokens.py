"""End-of-turn tokens and their removal, for adapters that get a decoded response (slime).

The client's own copy of ``reward_service.server.compat.END_TOKENS`` / ``strip_trailing_tokens``, so
that the client and its adapters never import the service package (they install with httpx
alone). ``tests/integrations/test_client_standalone.py`` checks that the two copies agree.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["END_TOKENS", "strip_trailing_tokens"]

#: Tokens that end a turn or a sequence, or pad it on the right (checked in this order, and
#: repeatedly: ``<|im_end|>\n<|endoftext|><|endoftext|>`` is stripped whole).
END_TOKENS: tuple[str, ...] = (
    "<|im_end|>",  # Qwen / ChatML end of turn
    "<|endoftext|>",  # Qwen EOS and pad, GPT-2
    "<|eot_id|>",  # Llama-3 end of turn
    "<|eom_id|>",  # Llama-3.1 end of message (tool call)
    "<|end_of_text|>",  # Llama-3 EOS
    "<|finetune_right_pad_id|>",  # Llama-3.1 pad
    "</s>",  # Llama-2, Mistral
    "<｜end▁of▁sentence｜>",  # DeepSeek-V3 / R1 (full-width bars)  # noqa: RUF001
    "<|end▁of▁sentence|>",  # DeepSeek (ASCII bars)
    "<end_of_turn>",  # Gemma
    "<eos>",  # Gemma
    "<|end|>",  # Phi-3
    "<|return|>",  # gpt-oss
    "<pad>",
    "<|pad|>",
    "[PAD]",
)


@functools.lru_cache(maxsize=8)
def _trailing_run(tokens: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(t[::-1]) for t in tokens if t)
    return re.compile(rf"(?:\s|{alternatives})*+" if alternatives else r"\s*")


def strip_trailing_tokens(text: str, tokens: Sequence[str] = END_TOKENS) -> str:
    """Remove trailing end-of-turn/EOS/pad tokens and whitespace (one linear pass)."""
    n = _trailing_run(tuple(tokens)).match(text[::-1]).end()  # type: ignore[union-attr]
    return text[: len(text) - n] if n else text
