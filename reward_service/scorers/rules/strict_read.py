"""Reading a response for the ``math`` profile: where its final answer is, and its boxes.

:func:`extract` is the library's ``parse()`` that also says where the answer was found (the
match rules 1, 5 and 7 read); :func:`parse_boxed` parses a boxed answer (cached: a GRPO group
repeats them); :func:`boxed_answers` lists every ``\\boxed{}`` with its span. Pure: no state
beyond the parse cache.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import math_verify.parser as _mv_parser
from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

from reward_service.scorers.patches import Scan, extract_with_match, prefiltered, scans

__all__ = ["BOX", "SPACES", "boxed_answers", "extract", "parse_boxed"]

_CONFIGS = (LatexExtractionConfig(), ExprExtractionConfig())
# [the library's get_extraction_regexes as last seen, its targets (kept alive), the groups]
_GROUPS: list[Any] = [None, None, []]


def _pattern_groups() -> list[list[tuple[Scan, Any]]]:
    """The extraction patterns as :mod:`tail_scan` scans, by priority, highest first, as
    ``extract_target_from_pred`` groups them. Looked up through the library's module, so a
    worker gets the patterns its speed patches installed (``fast_regex``'s start guard, the
    needle prefilter) whenever they were installed; built again only when that function is
    replaced (the patterns it returns for one configuration are the same, memoised)."""
    fn = _mv_parser.get_extraction_regexes
    if _GROUPS[0] is not fn:
        targets = fn(list(_CONFIGS))
        groups = scans(prefiltered(targets))  # no-op on wrapped ones
        _GROUPS[:] = [fn, targets, groups]
    groups_now: list[list[tuple[Scan, Any]]] = _GROUPS[2]
    return groups_now


# --- extraction: the library's parse(), also returning where the answer was found ----------


def extract(text: str) -> tuple[list[Any], re.Match[str] | None]:
    """``parse(text)`` with default configs, plus the regex match that produced the answer.

    ``math_verify.parser.extract_target_from_pred`` (0.9.0, ``any_match``, ``first_match``
    fallback) as :func:`tail_scan.extract` runs it, keeping the match;
    ``tests/test_corpus_agreement.py`` checks it against ``parse`` on corpus rows.

    ``parse()`` returns [] on any error, and so do we, except for the resource errors
    (``MemoryError``, ``RecursionError``): those propagate, so the item is ``error`` with a
    reason (as under ``math_verify``, whose log tap sees them), never a silent ``no_answer``."""
    try:
        return extract_with_match(text, _pattern_groups())
    except (MemoryError, RecursionError):
        raise
    except Exception:
        return [], None


# --- boxes, and answers as written ------------------------------------------------------------

BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
# what a comparison of answers as written ignores: spaces, LaTeX spacing, \left / \right
SPACES = re.compile(r"\s+|\\[,;:!]|\\left|\\right")


def boxed_answers(text: str) -> list[tuple[int, int, str]]:
    """Every ``\\boxed{...}`` / ``\\fbox{...}`` in ``text``: (start, end, content), braces
    balanced; nested boxes count once (the outer one)."""
    out: list[tuple[int, int, str]] = []
    pos = 0
    while True:
        m = BOX.search(text, pos)
        if m is None:
            return out
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        if depth:  # unclosed: the rest of the text
            return out
        out.append((m.start(), i, text[m.end() : i - 1]))
        pos = i


def parse_boxed(contents: tuple[str, ...]) -> list[Any]:
    """``parse`` of a boxed answer; short ones cached (a GRPO group repeats them)."""
    if sum(map(len, contents)) > 500:
        return _parse_boxed_uncached(contents)
    return _parse_boxed_cached(contents)


def _parse_boxed_uncached(contents: tuple[str, ...]) -> list[Any]:
    return parse("\\boxed{" + ", ".join(contents) + "}", parsing_timeout=None)  # type: ignore[arg-type]


_parse_boxed_cached = lru_cache(maxsize=256)(_parse_boxed_uncached)
