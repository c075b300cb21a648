"""Think blocks (``math``, ``gsm8k``, ``choice``, ``numeric``): only the answer is judged.

Reasoning models write ``<think>...</think>`` and then answer (R1-style templates, Qwen3,
DAPO recipes). ``</think>`` is a hard boundary (issue 26):

* **Closed**: the response is judged on what follows the *last* ``</think>``; nothing before
  it (the thinking, and any text between several think blocks) is ever a candidate or the
  final answer. ``<think>Maybe 5. Or 6.</think> The answer is \\boxed{6}.`` is one answer, 6.
  Nothing after it is ``no_answer``: an answer stated only while thinking was never given.
* **Opened by the prompt**: no ``<think>`` and one or more ``</think>`` (the template put
  ``<think>`` in the prompt): the same, what follows the last ``</think>``.
* **Unclosed**: a ``<think>`` after the last ``</think>`` (or with none at all), a response
  cut mid-thought at the length limit: ``no_answer``, reason ``unclosed_think: ...`` (a rule
  label, counted in ``reward_rule_overrides_total``). verifiers' ``verify_boxed_math_answer``
  gives 0 for it; ROLL rejects it.
* No tag at all: the response as it is.

Tags are matched exactly as the templates write them (lowercase ``<think>``, ``</think>``);
``<thinking>`` and other spellings are plain text. Turned off per item with
``extra: {"think": false}`` (default on); ``math_verify`` never reads tags (stock parity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reward_service.scorers.base import Verdict
from reward_service.scorers.rule_labels import rule_reason
from reward_service.scorers.rules.text_forms import join_digit_groups, plain_text, symbols_as_words

__all__ = ["CLOSE", "OPEN", "answer_part", "judged_text", "think_enabled", "unclosed"]

OPEN, CLOSE = "<think>", "</think>"


def think_enabled(params: Mapping[str, Any]) -> bool:
    """``extra.think``: True (default) or False; anything else is a ``ValueError``."""
    value = params.get("think", True)
    if not isinstance(value, bool):
        raise ValueError("extra.think must be true or false")
    return value


def answer_part(text: str) -> str | None:
    """What is judged of ``text``: after the last ``</think>``; the whole text when it has no
    tag; None when a think block is left open."""
    if "<" not in text:
        return text
    close = text.rfind(CLOSE)
    if close >= 0:
        text = text[close + len(CLOSE):]
    return None if OPEN in text else text


def unclosed(extracted_gold: str | None) -> Verdict:
    return Verdict("no_answer", extracted_gold=extracted_gold, reason=rule_reason(
        "unclosed_think", "the response opens <think> and never closes it (cut while "
        "thinking?): no answer was given"))


def judged_text(response: str, params: Mapping[str, Any], forms: bool = True) -> str | None:
    """The response as the rules read it (``text_forms.py``: invisible characters removed,
    digits as ASCII), cut to its answer part when think handling is on (``extra.think``);
    then, with ``forms``, digit groups joined and disjunction symbols as words (the ``math``
    profile does that only where its answer needs it: ``text_forms.answer_needs_forms``).
    None: an unclosed think block. ``ValueError`` for a bad ``extra.think``."""
    if not forms and not params and "<" not in response and response.isascii():
        return response  # most items: no options, no tag, nothing to remove (as below)
    text = plain_text(response)
    if think_enabled(params):
        answer = answer_part(text)
        if answer is None:
            return None
        text = answer
    return symbols_as_words(join_digit_groups(text)) if forms else text
