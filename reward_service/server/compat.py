"""Framework reward protocols → scoring items. Pure functions; the routes in ``app.py`` are thin.

Two wire protocols are translated here, each matched to the upstream code that speaks it:

* **OpenRLHF** ``--remote_rm_url http://HOST:PORT/get_reward``. OpenRLHF ≤ 0.9.0
  (``openrlhf/utils/remote_rm_utils.py: request_api_wrapper``) posts whole batches; ≥ 0.9.1
  (``openrlhf/utils/agent.py: SingleTurnAgentExecutor``) posts one sample per request, each
  on a new aiohttp session, and turns any failure into a ``None`` reward. Both send
  ``{"query": [...], "prompts": [...], "labels": [...]}``, where ``query[i]`` is prompt +
  response decoded with special tokens kept (the chat template, its special tokens, the
  end-of-turn token and, in older versions, left padding), ``prompts[i]`` the templated prompt
  (≥ 0.9.1 cuts a long prompt *from the left* before generating, so the query holds only its
  end), ``labels[i]`` the ``--label_key`` column (``""`` without the flag). The trainer reads
  ``rewards`` (and ``scores``, ``extra_logs``, each a list of numbers, one per item) with
  ``torch.as_tensor``: every value must be a number.
* **slime** ``--rm-type remote_rm --rm-url URL``. Upstream (``slime/rollout/rm_hub/__init__.py``:
  ``remote_rm``) posts ``{"prompt": sample.prompt, "response": sample.response, "label":
  sample.label}`` once per sample and uses the JSON reply *as the reward*
  (``Sample.get_reward_value``: the bare value, or ``reward[args.reward_key]`` when
  ``--reward-key`` is set).

How the response is located in OpenRLHF's ``query`` (``Extracted.how`` says which step found it):

1. ``prompt``: strip the prompt (exactly, then after leading BOS/padding tokens, then at its
   first occurrence in the query);
2. ``prompt_suffix``: OpenRLHF ≥ 0.9.1 cuts a prompt that is too long *from the left*
   (``prompt_token_ids[-max_prompt_length:]``), so the query starts with a suffix of the
   prompt: the longest such suffix is found and stripped;
3. ``assistant_marker``: the text after the last assistant-turn marker of a known template;
4. ``whole_query``: failing all three, the whole query is scored (the response is at its
   end, and scorers read the final answer); the item says so in its ``reason``.

Trailing end-of-turn/EOS/padding tokens are then removed. Every item gets a reward: only a
request that cannot be right as a whole (lengths that differ, ``labels`` missing, or every
label ``""``, which is what OpenRLHF sends without ``--label_key``) is refused, with a
:class:`CompatError` whose ``reason`` names the misconfiguration.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from reward_service.errors import InvalidRequestError

__all__ = [
    "ASSISTANT_MARKERS",
    "END_TOKENS",
    "LEADING_TOKENS",
    "LOCATED_BY",
    "CompatError",
    "Extracted",
    "extract_response",
    "label_text",
    "locate_response",
    "number_text",
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
    """The request as a whole does not follow the framework's protocol (→ HTTP 422).

    ``reason`` is a short code for logs and metrics: ``labels_missing``, ``labels_empty``,
    ``label_missing`` (slime), ``length_mismatch``."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = self.kind = reason


#: How a response was located in its query (``Extracted.how``); ``""``: not scored.
LOCATED_BY = ("prompt", "prompt_suffix", "assistant_marker", "whole_query")


@dataclass(frozen=True, slots=True)
class Extracted:
    """One item of a framework request, ready to score (or why it cannot be)."""

    response: str | None  # None: the item cannot be scored; ``reason`` says why
    ground_truth: str
    reason: str | None = None  # why it cannot be scored, or how it was located when unusual
    how: str = "prompt"  # one of LOCATED_BY, or "" when response is None


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


#: Characters at the start of a query that may be a garbled token (a byte-level BPE token cut
#: in the middle of a character decodes to U+FFFD): the suffix match starts after them.
_SKIP = 8
_NEEDLE = 16  # characters of the query searched for in the prompt
_MAX_CANDIDATES = 64  # occurrences of the needle tried (each check is linear)


def _after_prompt_suffix(query: str, prompt: str) -> str | None:
    """The query minus the longest suffix of ``prompt`` it starts with (ignoring its first
    ``_SKIP`` characters); ``None`` when it starts with less than ``_SKIP + _NEEDLE``
    characters of the prompt. Linear: at most ``_MAX_CANDIDATES`` checks."""
    needle = query[_SKIP:_SKIP + _NEEDLE]
    if len(needle) < _NEEDLE:
        return None
    j = prompt.find(needle)
    for _ in range(_MAX_CANDIDATES):
        if j < 0:
            return None
        if query.startswith(prompt[j:], _SKIP):  # the prompt's tail from j opens the query
            return query[_SKIP + len(prompt) - j:]
        j = prompt.find(needle, j + 1)
    return None


def locate_response(query: str, prompt: str | None) -> tuple[str, str]:
    """``(response, how)`` from a decoded prompt + response; ``how`` is one of
    :data:`LOCATED_BY` (see the module docstring for the order)."""
    response: str | None = None
    if prompt:
        if query.startswith(prompt):
            return strip_trailing_tokens(query[len(prompt):]), "prompt"
        bare_prompt = strip_leading_tokens(prompt)
        bare_query = strip_leading_tokens(query)
        if bare_prompt and bare_query.startswith(bare_prompt):
            response = bare_query[len(bare_prompt):]
        elif bare_prompt and (idx := query.find(bare_prompt)) >= 0:
            response = query[idx + len(bare_prompt):]
        if response is not None:
            return strip_trailing_tokens(response), "prompt"
        response = _after_prompt_suffix(bare_query, bare_prompt)
        if response is not None:
            return strip_trailing_tokens(response), "prompt_suffix"
    response = _after_marker(query)
    if response is not None:
        return strip_trailing_tokens(response), "assistant_marker"
    return strip_trailing_tokens(strip_leading_tokens(query)), "whole_query"


_HOW_REASON = {
    "prompt_suffix": "the prompt was cut from the left: the response follows its surviving end",
    "assistant_marker": "the prompt was not found in the query: the response is what follows "
                        "the last assistant-turn marker",
    "whole_query": "neither the prompt nor an assistant-turn marker was found in the query: "
                   "the whole query was scored",
}


def extract_response(query: str, prompt: str | None) -> tuple[str, str | None]:
    """``(response, note)``: :func:`locate_response`, with a note when the prompt itself did
    not locate the response (``None`` when it did)."""
    response, how = locate_response(query, prompt)
    return response, _HOW_REASON.get(how)


def number_text(value: int | float) -> str:
    """A JSON number as the gold's text: an integer as written, a float as its exact positional
    decimal (``1e-05`` → ``0.00001``, ``1e+20`` → ``100000000000000000000``, ``0.1`` → ``0.1``):
    ``repr``'s exponent form would be a scientific-notation gold (issue 26)."""
    if isinstance(value, float) and math.isfinite(value):
        return format(Decimal(repr(value)), "f")
    return str(value)


def label_text(label: object, where: str) -> str:
    """A label as the ground-truth string; ``None`` becomes ``""`` (→ ``bad_ground_truth``)."""
    if label is None:
        return ""
    if isinstance(label, bool):
        raise CompatError(f"{where} is a boolean; expected a string or a number",
                          reason="bad_label")
    if isinstance(label, str):
        return label
    if isinstance(label, int | float):
        return number_text(label)
    raise CompatError(f"{where} is a {type(label).__name__}; expected a string or a number",
                      reason="bad_label")


def openrlhf_items(
    queries: Sequence[str], prompts: Sequence[str] | None, labels: Sequence[object] | None
) -> list[Extracted]:
    """OpenRLHF's ``{"query", "prompts", "labels"}`` as items, in order; every item is scored.

    Raises :class:`CompatError` only for a request that cannot be right as a whole: lengths
    that differ, ``labels`` missing, or every label ``""`` (OpenRLHF without ``--label_key``).
    A label that is null, a list or a dict fails its own item (``bad_ground_truth`` or
    ``error``), never the request: OpenRLHF ≥ 0.9.1 sends one sample per request, and a
    refused request is a ``None`` reward that fails the training step.
    """
    n = len(queries)
    hint = "start OpenRLHF with --label_key <column holding the answer>"
    if labels is None:
        raise CompatError(f"'labels' is missing: {hint}", reason="labels_missing")
    if len(labels) != n:
        raise CompatError(f"'labels' has {len(labels)} entries but 'query' has {n}",
                          reason="length_mismatch")
    if prompts is not None and len(prompts) != n:
        raise CompatError(f"'prompts' has {len(prompts)} entries but 'query' has {n}",
                          reason="length_mismatch")
    if n and all(label == "" for label in labels):
        raise CompatError(f"every label is empty: {hint}", reason="labels_empty")
    out: list[Extracted] = []
    for i, query in enumerate(queries):
        try:
            gold = label_text(labels[i], f"labels[{i}]")
        except CompatError as exc:
            out.append(Extracted(None, "", str(exc), ""))
            continue
        response, how = locate_response(query, prompts[i] if prompts is not None else None)
        out.append(Extracted(response, gold, _HOW_REASON.get(how), how))
    return out


def slime_item(response: str, label: object) -> Extracted:
    """slime's ``{"prompt", "response", "label"}``: ``response`` is already the response alone."""
    if label is None:
        raise CompatError(
            "'label' is missing or null: start slime with --label-key <column holding the answer>",
            reason="label_missing")
    return Extracted(strip_trailing_tokens(response), label_text(label, "label"))
