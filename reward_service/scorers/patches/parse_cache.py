"""Larger memos for math-verify's pure parse steps.

math-verify memoises ``parse_latex_cached`` (LaTeX → sympy through ANTLR, the most expensive
step) and ``parse_expr_cached`` with ``lru_cache(maxsize=20)``: enough for one GRPO group,
too small for a worker that sees the same final answers ("\\frac{1}{2}", "18") across many
problems and requests. It also builds every plain number it extracts with ``Number(text)``,
which sends the string through ``sympify`` and ``parse_expr`` (tokenizer, transformations,
``eval``): about a fifth of a warm worker's time on GSM8K-style rows.

Most of the LaTeX that reaches ANTLR is a plain integer ("374", "-49": 390 of the 460
distinct strings in ``corpus.jsonl``), for which latex2sympy returns ``Integer(int(text))``
after a few milliseconds of parsing. Those are built directly; ``tests/test_parse_cache.py``
compares the shortcut with latex2sympy on every integer shape it takes.

All three are pure functions of their string argument (their configuration is fixed inside;
exceptions are not cached; sympy numbers are immutable), so a memo returns what the library
would have computed: verdicts are unchanged, which ``tests/test_parity.py`` and ``make bench``
check against stock math-verify. Strings longer than ``MAX_KEY_CHARS`` are not memoised, so
hostile megabyte answers cannot fill memory.

What does reach ANTLR is parsed SLL-first (``fast_parse.py``), with the library's parse only
where SLL reports an error: same trees, several times faster on MATH-style LaTeX.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import math_verify.parser as _mv_parser
from sympy import Integer, Number

import reward_service.scorers.patches.fast_parse as fast_parse

__all__ = ["MAX_KEY_CHARS", "install"]

MAX_KEY_CHARS = 2000
ENTRIES = 8192
PLAIN_INTEGER = re.compile(r"-?[0-9]{1,30}", re.ASCII)


def _latex_shortcut(parse_latex: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(latex: str) -> Any:
        if PLAIN_INTEGER.fullmatch(latex):
            return Integer(int(latex))
        return parse_latex(latex)

    return parse


def _bounded(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    memo = lru_cache(maxsize=ENTRIES)(fn)

    def cached(text: str) -> Any:
        return memo(text) if len(text) <= MAX_KEY_CHARS else fn(text)

    cached.cache_info = memo.cache_info  # type: ignore[attr-defined]
    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached


def install() -> None:
    """Replace the two 20-entry caches (the integer shortcut in front of latex2sympy) and
    route ``Number(text)`` through a memo; once per process. ``math_verify.parser`` uses the
    name ``Number`` only to build numbers from the digits it extracted, never in
    ``isinstance``; the grader keeps sympy's class. Also installs the parsing shortcuts of
    :mod:`reward_service.scorers.patches.fast_parse` (two-stage ANTLR parsing)."""
    fast_parse.install()
    latex = _mv_parser.parse_latex_cached
    if not getattr(latex, "installed", False):
        memo = _bounded(_latex_shortcut(latex.__wrapped__))
        memo.installed = True  # type: ignore[attr-defined]
        _mv_parser.parse_latex_cached = memo
    expr = _mv_parser.parse_expr_cached
    if not getattr(expr, "installed", False):
        memo = _bounded(expr.__wrapped__)
        memo.installed = True  # type: ignore[attr-defined]
        _mv_parser.parse_expr_cached = memo
    if _mv_parser.Number is Number:
        _mv_parser.Number = _bounded(Number)  # type: ignore[attr-defined]
