"""Rule 8 of the ``math`` profile (issue 36): a letter right after a number in the gold is a
variable, not a unit (``variable``; decides both ways).

The library's LaTeX normaliser deletes a trailing unit from every answer and gold, and its
unit list holds single letters (``t``, ``h``, ``c``, ``l``, ``s``, ``g``, ``m``, ``d``, ``o``):
the gold ``4t`` ("Simplify 3t+4-6t+7t-4", a MATH row of ``corpus.jsonl``) is read as ``4``, so
the answer ``4`` is paid and ``t \\cdot 4`` is not. Found by the disagreement audit
(docs/CORRECTNESS.md): the library, both profiles and the corpus label agree on that row;
only reading the extracted answer beside the gold shows the dropped ``t``.

Here, when the gold ends in such a letter written right after a digit or a ``}`` (``4t``,
``\\frac{1}{2}h``: how a gold writes a product, not a unit, which MATH writes as
``\\text{ cm}``), the gold and the final answer as written (its box, or the text the library
matched) are parsed again with the unit deletion off, and that verdict stands, with the reason
``variable: ...`` where it differs from the library's. Golds with a unit in ``\\text{}`` or
after a space (``10\\text{ m}``, ``5 cm``) are left to the library and rule 5.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from latex2sympy2_extended.math_normalization import NormalizationConfig, units_regex
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

from reward_service.scorers.math_verify_scorer import verify_default
from reward_service.scorers.rule_labels import rule_reason

__all__ = ["letter_gold", "variable_verdict"]

# a single letter right after a digit or "}", at the end of the gold
_TRAILING_LETTER = re.compile(r"(?<=[\d}])([a-zA-Z])\s*\$?\s*$")
_NO_UNITS = (
    LatexExtractionConfig(normalization_config=NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all",
        equations=False)),
    ExprExtractionConfig(),
)


_MAX_CHARS = 500  # longer answers or golds are left to the library (parsed again here)


@lru_cache(maxsize=1024)
def letter_gold(gold: str) -> str | None:
    """The letter the library would delete from ``gold`` as a unit, when the gold writes it as
    a factor (right after a digit or ``}``); else None."""
    m = _TRAILING_LETTER.search(gold)
    if m is None or units_regex.search(gold.rstrip("$ ")) is None:
        return None
    return m.group(1)


@lru_cache(maxsize=1024)
def _parse_kept(text: str) -> tuple[Any, ...]:
    return tuple(parse(text, extraction_config=list(_NO_UNITS), parsing_timeout=None))  # type: ignore[arg-type]


def variable_verdict(gold_text: str, letter: str, answer: str | None) -> tuple[bool, str] | None:
    """(verdict, reason) with the gold's trailing ``letter`` kept as a variable (the answer,
    as written, parsed the same way); None when either side does not parse so."""
    if answer is None or len(answer) > _MAX_CHARS or len(gold_text) > _MAX_CHARS:
        return None  # the library's verdict stands
    gold = _parse_kept(gold_text)
    if not gold:
        return None
    pred = _parse_kept("\\boxed{" + answer + "}")
    if not pred:
        return None
    ok = bool(verify_default(list(gold), list(pred)))
    return ok, rule_reason(
        "variable", f"the gold's {letter} is a variable (the library deletes it as a unit): "
        f"answer {'matches' if ok else 'does not match'} the gold with it kept")
