"""Framework reward protocols → scoring items. Pure functions; the routes in ``app.py`` are thin.

Two wire protocols are translated here, each matched to the upstream code that speaks it:

* **OpenRLHF** ``--remote_rm_url http://HOST:PORT/get_reward``. Upstream
  (``openrlhf/utils/remote_rm_utils.py``: ``remote_rm_fn_ray`` → ``request_api_wrapper``) posts
  ``{"query": [...], "prompts": [...], "labels": [...]}``, where ``query[i]`` is
  ``tokenizer.batch_decode(sequences, skip_special_tokens=False)`` of prompt + response
  (``openrlhf/trainer/ppo_utils/experience_maker.py``): the chat template, its special tokens, the
  end-of-turn token and, in older versions, left/right padding are all in it. ``prompts[i]`` is
  the templated prompt string, ``labels[i]`` the ``--label_key`` column. The trainer reads
  ``rewards`` (and ``scores``, ``extra_logs``, each a list of numbers, one per item) with
  ``torch.as_tensor``: every value must be a number.
* **slime** ``--rm-type remote_rm --rm-url URL``. Upstream (``slime/rollout/rm_hub/__init__.py``:
  ``remote_rm``) posts ``{"prompt": sample.prompt, "response": sample.response, "label":
  sample.label}`` once per sample and uses the JSON reply *as the reward*
  (``Sample.get_reward_value``: the bare value, or ``reward[args.reward_key]`` when
  ``--reward-key`` is set).

What is covered: the response is found by stripping the prompt (exactly, then after leading
BOS/padding tokens, then wherever the prompt occurs); failing that, by the last assistant-turn
marker of common templates; trailing end-of-turn/EOS/padding tokens of common templates are
removed. What is not: a prompt that the tokenizer round trip changed *and* a template with no
marker we know. Such an item is reported as ``error`` with a reason, never guessed at.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from reward_service.errors import InvalidRequestError

__all__ = [
    "ASSISTANT_MARKERS",
    "END_TOKENS",
    "LEADING_TOKENS",
    "CompatError",
    "Extracted",
    "extract_response",
    "label_text",
    "openrlhf_items",
    "slime_item",
    "strip_leading_tokens",
    "strip_trailing_tokens",
]

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

#: Tokens that may precede the decoded prompt: BOS and left padding.
LEADING_TOKENS: tuple[str, ...] = (
    "<|begin_of_text|>",  # Llama-3
    "<s>",  # Llama-2, Mistral
    "<bos>",  # Gemma
    "<｜begin▁of▁sentence｜>",  # DeepSeek  # noqa: RUF001
    "<|begin▁of▁sentence|>",
    "<|endoftext|>",  # Qwen left padding
    "<|finetune_right_pad_id|>",
    "<pad>",
    "<|pad|>",
    "[PAD]",
)

#: Where the assistant's turn starts, for queries whose prompt cannot be located. The response
#: is what follows the *last* occurrence of the first marker found in this order.
ASSISTANT_MARKERS: tuple[str, ...] = (
    "<|im_start|>assistant\n",  # Qwen / ChatML
    "<|im_start|>assistant",
    "<|start_header_id|>assistant<|end_header_id|>\n\n",  # Llama-3
    "<|start_header_id|>assistant<|end_header_id|>",
    "<start_of_turn>model\n",  # Gemma
    "<｜Assistant｜>",  # DeepSeek-R1  # noqa: RUF001
    "<|Assistant|>",
    "<|assistant|>\n",  # Phi-3, Zephyr
    "<|assistant|>",
    "[/INST]",  # Llama-2, Mistral
    "Assistant:",  # OpenRLHF's plain "Human: ... Assistant:" format
)


class CompatError(InvalidRequestError, ValueError):
    """The request as a whole does not follow the framework's protocol (→ HTTP 422)."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """One item of a framework request, ready to score (or why it cannot be)."""

    response: str | None  # None: the response could not be located; ``reason`` says why
    ground_truth: str
    reason: str | None = None


@functools.lru_cache(maxsize=32)
def _trailing_run(tokens: tuple[str, ...]) -> re.Pattern[str]:
    """Whitespace and ``tokens``, any number, at the *start* of the reversed text."""
    alternatives = "|".join(re.escape(t[::-1]) for t in tokens if t)
    return re.compile(rf"(?:\s|{alternatives})*+" if alternatives else r"\s*")


@functools.lru_cache(maxsize=32)
def _leading_run(tokens: tuple[str, ...]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(t) for t in tokens if t)
    return re.compile(rf"(?:{alternatives})*+" if alternatives else "")


def strip_trailing_tokens(text: str, tokens: Sequence[str] = END_TOKENS) -> str:
    """Remove trailing end-of-turn/EOS/pad tokens (and whitespace between them), repeatedly.

    Linear in ``len(text)``: one anchored regex match over the reversed text (C speed), then
    one slice. Removing a token at a time copied the string once per token, which made a
    1.9 MB response of ``</s>`` tokens take 15 s on the event loop.
    """
    if not text:
        return text
    backwards = text[::-1]
    n = _trailing_run(tuple(tokens)).match(backwards).end()  # type: ignore[union-attr]
    return text[: len(text) - n] if n else text


def strip_leading_tokens(text: str, tokens: Sequence[str] = LEADING_TOKENS) -> str:
    """Remove leading BOS/pad tokens, repeatedly (whitespace is kept: templates start exactly).

    Linear in ``len(text)``: one anchored regex match, then one slice.
    """
    n = _leading_run(tuple(tokens)).match(text).end()  # type: ignore[union-attr]
    return text[n:] if n else text


def _after_marker(query: str) -> str | None:
    for marker in ASSISTANT_MARKERS:
        idx = query.rfind(marker)
        if idx >= 0:
            return query[idx + len(marker):]
    return None


def extract_response(query: str, prompt: str | None) -> tuple[str | None, str | None]:
    """``(response, None)`` from a decoded prompt + response, or ``(None, reason)``.

    The prompt is stripped exactly when the query starts with it; else after leading BOS/pad
    tokens of both; else at its first occurrence; else (or with no prompt) the text after the
    last assistant-turn marker is taken. Trailing end-of-turn/EOS/pad tokens are removed.
    """
    response: str | None = None
    if prompt:
        if query.startswith(prompt):
            response = query[len(prompt):]
        else:
            bare_prompt = strip_leading_tokens(prompt)
            bare_query = strip_leading_tokens(query)
            if bare_prompt and bare_query.startswith(bare_prompt):
                response = bare_query[len(bare_prompt):]
            elif bare_prompt and (idx := query.find(bare_prompt)) >= 0:
                response = query[idx + len(bare_prompt):]
    if response is None:
        response = _after_marker(query)
    if response is None:
        why = "the prompt does not occur in the query" if prompt else "no prompt was given"
        return None, f"{why}, and the query has no assistant-turn marker of a known chat template"
    return strip_trailing_tokens(response), None


def label_text(label: object, where: str) -> str:
    """A label as the ground-truth string; ``None`` becomes ``""`` (→ ``bad_ground_truth``)."""
    if label is None:
        return ""
    if isinstance(label, bool):
        raise CompatError(f"{where} is a boolean; expected a string or a number")
    if isinstance(label, str):
        return label
    if isinstance(label, int | float):
        return repr(label) if isinstance(label, float) else str(label)
    raise CompatError(f"{where} is a {type(label).__name__}; expected a string or a number")


def openrlhf_items(
    queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[object] | None
) -> list[Extracted]:
    """OpenRLHF's ``{"query", "prompts", "labels"}`` as items, in order.

    Raises :class:`CompatError` for a request no item of which can be scored meaningfully:
    lengths that differ, labels missing or all empty (OpenRLHF sends them only with
    ``--label_key``), or no response found in any query.
    """
    n = len(queries)
    if labels is None:
        raise CompatError(
            "'labels' is missing: start OpenRLHF with --label_key <column holding the answer>"
        )
    if len(labels) != n:
        raise CompatError(f"'labels' has {len(labels)} entries but 'query' has {n}")
    if prompts is not None and len(prompts) != n:
        raise CompatError(f"'prompts' has {len(prompts)} entries but 'query' has {n}")
    golds = [label_text(label, f"labels[{i}]") for i, label in enumerate(labels)]
    if n and not any(g.strip() for g in golds):
        raise CompatError(
            "every label is empty: start OpenRLHF with --label_key <column holding the answer>"
        )
    out: list[Extracted] = []
    for i, query in enumerate(queries):
        prompt = prompts[i] if prompts is not None else None
        response, reason = extract_response(query, prompt)
        out.append(Extracted(response, golds[i], reason))
    if n and all(e.response is None for e in out):
        raise CompatError(f"no response could be located in any query: {out[0].reason}")
    return out


def slime_item(response: str, label: object) -> Extracted:
    """slime's ``{"prompt", "response", "label"}``: ``response`` is already the response alone."""
    if label is None:
        raise CompatError(
            "'label' is missing or null: start slime with --label-key <column holding the answer>"
        )
    return Extracted(strip_trailing_tokens(response), label_text(label, "label"))
