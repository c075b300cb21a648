"""A memo keyed by a compiled pattern's identity (``per_pattern``).

``functools.lru_cache`` keyed on a ``re.Pattern`` hashes the pattern on every call, and
CPython's ``Pattern.__hash__`` hashes its compiled code (a hit then compares the code again):
5.7 us per call for the ``math`` profile's value pattern, a third of rule 1's closing-part
scan (measured on the corpus's 3,063 paid items). The patterns these memos see are few and
long-lived (the rules' module constants, the library's memoised extraction patterns); an
entry holds its pattern, so the pattern's ``id`` cannot be reused while the entry lives, and
a hit is checked by identity."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TypeVar

__all__ = ["per_pattern"]

T = TypeVar("T")
MAX_ENTRIES = 64  # more distinct patterns than this: the memo starts again (never here)


def per_pattern(fn: Callable[[re.Pattern[str]], T]) -> Callable[[re.Pattern[str]], T]:
    """``fn`` memoised on its one argument, a compiled pattern, by identity."""
    memo: dict[int, tuple[re.Pattern[str], T]] = {}

    @functools.wraps(fn)
    def cached(pattern: re.Pattern[str]) -> T:
        hit = memo.get(id(pattern))
        if hit is not None and hit[0] is pattern:
            return hit[1]
        value = fn(pattern)
        if len(memo) >= MAX_ENTRIES:
            memo.clear()
        memo[id(pattern)] = (pattern, value)
        return value

    return cached
