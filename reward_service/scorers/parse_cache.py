"""A larger memo for math-verify's two parse caches.

math-verify memoises ``parse_latex_cached`` (LaTeX → sympy through ANTLR, the most expensive
step) and ``parse_expr_cached`` with ``lru_cache(maxsize=20)``: enough for one GRPO group,
too small for a worker that sees the same final answers ("\\frac{1}{2}", "18") across many
problems and requests. Both are pure functions of their string argument (their configuration
is fixed inside; exceptions are not cached), so a bigger memo returns what the library would
have computed: verdicts are unchanged, which ``tests/test_parity.py`` and ``make bench`` check
against stock math-verify. Strings longer than ``MAX_KEY_CHARS`` are not memoised, so hostile
megabyte answers cannot fill memory.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import math_verify.parser as _mv_parser

__all__ = ["MAX_KEY_CHARS", "install"]

MAX_KEY_CHARS = 2000
ENTRIES = 8192


def _bounded(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    memo = lru_cache(maxsize=ENTRIES)(fn)

    def cached(text: str) -> Any:
        return memo(text) if len(text) <= MAX_KEY_CHARS else fn(text)

    cached.cache_info = memo.cache_info  # type: ignore[attr-defined]
    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached


def install() -> None:
    """Replace the two 20-entry caches (once per process)."""
    for name in ("parse_latex_cached", "parse_expr_cached"):
        current = getattr(_mv_parser, name)
        if getattr(current, "cache_info", None) and current.cache_info().maxsize == ENTRIES:
            continue  # already installed
        setattr(_mv_parser, name, _bounded(current.__wrapped__))
