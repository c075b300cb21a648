"""math-verify's extraction regexes with a one-character guard in front: same matches, less
work at the positions where no match can start.

``parse`` runs a dozen large patterns (3-4 kB each) over the whole response and sorts all
their matches. CPython's ``re`` skips ahead to a possible match start only when a pattern
begins with a literal or a character class; these begin with lookbehinds (``(?<!\\\\)\\$``)
and ``(?:^|\\s|=)``, so the engine enters the whole pattern, a branch of a dozen
alternatives, at every position of the text. On long responses that scan, not the parse, is
most of the cost.

:func:`start_class` walks the pattern's parse tree (the ``re`` module's own parser) for the
characters a match can begin with: a literal or class contributes itself, an optional or
zero-width item (lookaround, ``\\b``) lets what follows contribute as well, and a ``^``
(without MULTILINE) restricts its branch to position 0. :func:`guarded` then compiles
``(?:^|(?=[F]))(?:P)`` (or ``(?=[F])(?:P)`` when no branch needs position 0): the guard is
zero-width and adds no group, so at a position where ``P`` can match it changes nothing,
and elsewhere ``P`` could not have matched. Same matches, same spans, same groups, in the
same order; ``tests/test_fast_regex.py`` also checks this on every text we have. A pattern
whose start set cannot be derived (a match could start with any character, or be empty,
scoped flags at its start) is returned unchanged.
"""

from __future__ import annotations

import re
from functools import lru_cache
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

import math_verify.parser as _mv_parser
from math_verify.parser import LatexExtractionConfig

__all__ = ["guarded", "install", "library_patterns", "start_class"]


class _Anywhere(Exception):
    """A match could start with any character: no useful start set."""


_CATEGORIES = {C.CATEGORY_DIGIT: r"\d", C.CATEGORY_NOT_DIGIT: r"\D",
               C.CATEGORY_SPACE: r"\s", C.CATEGORY_NOT_SPACE: r"\S",
               C.CATEGORY_WORD: r"\w", C.CATEGORY_NOT_WORD: r"\W"}
_REPEATS = (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", C.MAX_REPEAT))
_ZERO_WIDTH_AT = (C.AT_BOUNDARY, C.AT_NON_BOUNDARY, C.AT_END, C.AT_END_STRING,
                  C.AT_END_LINE, C.AT_BEGINNING_LINE)


def _char(code: int) -> str:
    return re.escape(chr(code))


def _class_items(items: Any, out: list[str]) -> None:
    for op, av in items:
        if op is C.LITERAL:
            out.append(_char(av))
        elif op is C.RANGE:
            out.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is C.CATEGORY and av in _CATEGORIES:
            out.append(_CATEGORIES[av])
        else:  # NEGATE, unusual categories
            raise _Anywhere


def _seq(items: Any, flags: int, out: list[str]) -> tuple[bool, bool]:
    """Adds to ``out`` the classes a match of ``items`` can begin with. Returns (nullable:
    it can match without consuming a character, at0: some path through it needs position
    0)."""
    at0 = False
    for op, av in items:
        nullable, here0 = _op(op, av, flags, out)
        at0 |= here0
        if not nullable:
            return False, at0
    return True, at0


def _op(op: Any, av: Any, flags: int, out: list[str]) -> tuple[bool, bool]:
    if op is C.LITERAL:
        out.append(_char(av))
        return False, False
    if op is C.IN:
        _class_items(av, out)
        return False, False
    if op is C.SUBPATTERN:
        _, add, delete, sub = av
        if (flags | add) & ~delete != flags:
            raise _Anywhere  # a scoped flag (e.g. (?i:...)) where a match starts
        return _seq(sub, flags, out)
    if op is C.BRANCH:
        nullable = at0 = False
        for alt in av[1]:
            n, a = _seq(alt, flags, out)
            nullable |= n
            at0 |= a
        return nullable, at0
    if op in _REPEATS:
        low, _, sub = av
        n, a = _seq(sub, flags, out)
        return n or low == 0, a
    if op is C.AT:
        if av is C.AT_BEGINNING or av is C.AT_BEGINNING_STRING:
            return False, True  # this path matches only at position 0
        if av in _ZERO_WIDTH_AT:
            return True, False
        raise _Anywhere
    if op in (C.ASSERT, C.ASSERT_NOT):
        return True, False  # zero width: what follows decides
    raise _Anywhere  # ANY, NOT_LITERAL, group references, ...


def start_class(pattern: re.Pattern[str]) -> tuple[str, bool] | None:
    """A character class (source text) matching every character a match of ``pattern`` can
    start with, and whether a match can also start at position 0 whatever the character;
    ``None`` when there is no such class or a match could be empty."""
    if not isinstance(pattern.pattern, str) or pattern.flags & (re.MULTILINE | re.VERBOSE):
        return None
    classes: list[str] = []
    try:
        tree = P.parse(pattern.pattern, pattern.flags)
        nullable, at0 = _seq(tree, pattern.flags, classes)
    except _Anywhere:
        return None
    if nullable or not classes or tree.getwidth()[0] == 0:
        return None
    return "[" + "".join(dict.fromkeys(classes)) + "]", at0


def _starts_with_assertion(items: Any) -> bool:
    """Whether the engine meets a lookaround first (directly or in an alternative): the case
    the guard speeds up. A pattern that starts with a literal or a class is already skipped
    through quickly by ``re``, and one that starts with ``(?:^|\\s|=)`` fails as fast as the
    guard would."""
    if not items:
        return False
    op, av = items[0]
    if op is C.SUBPATTERN:
        return _starts_with_assertion(av[3])
    if op is C.BRANCH:
        return any(_starts_with_assertion(alt) for alt in av[1])
    return op in (C.ASSERT, C.ASSERT_NOT)


def guarded(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` behind the zero-width guard of its start class (see the module doc), or
    ``pattern`` itself when there is none or the guard would not help."""
    if not isinstance(pattern.pattern, str):
        return pattern
    if not _starts_with_assertion(P.parse(pattern.pattern, pattern.flags)):
        return pattern
    found = start_class(pattern)
    if found is None:
        return pattern
    cls, at0 = found
    guard = f"(?:^|(?={cls}))" if at0 else f"(?={cls})"
    try:
        out = re.compile(f"{guard}(?:{pattern.pattern})", pattern.flags)
    except re.error:
        return pattern
    if out.groupindex != pattern.groupindex or out.groups != pattern.groups:
        return pattern
    return out


_NAMES = {"latex": "lazy_latex_regex", "expr": "lazy_expr_regex"}
#: the library's own pattern builders, as imported (before any install)
_LIBRARY = {name: getattr(_mv_parser, name) for name in _NAMES.values()}


def library_patterns(config: Any) -> list[tuple[re.Pattern[str], int]]:
    """The library's unguarded patterns for an extraction config (Latex or Expr)."""
    kind = "latex" if isinstance(config, LatexExtractionConfig) else "expr"
    out: list[tuple[re.Pattern[str], int]] = _LIBRARY[_NAMES[kind]](config)
    return out


def install() -> None:
    """Guard the patterns math-verify builds (``lazy_latex_regex``, ``lazy_expr_regex``, each
    memoised per configuration as the library memoises them); once per process. Whatever
    wraps ``get_extraction_regexes`` (the needle prefilter) sees the guarded patterns."""
    for name, original in _LIBRARY.items():
        if getattr(getattr(_mv_parser, name), "guarded", False):
            continue

        def build(config: Any, _original: Any = original) -> list[tuple[re.Pattern[str], int]]:
            return [(guarded(p), priority) for p, priority in _original(config)]

        memo = lru_cache(maxsize=8)(build)
        memo.guarded = True  # type: ignore[attr-defined]
        setattr(_mv_parser, name, memo)
