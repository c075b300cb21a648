"""Skip math-verify's extraction regexes on texts they cannot match.

``parse`` runs a dozen large regexes (3-4k characters each) over the whole response, and on
warm workers that scan is about a quarter of the time. Most of those patterns can only match
text that contains a fixed string: ``\\boxed{`` for the boxed-answer pattern, "final answer"
or "answer" (any case) for the phrase patterns. :func:`needle` finds such a string by walking
the pattern's parse tree (a literal run that every alternative must contain, outside any
optional part); :class:`Prefiltered` then looks for it first (``in`` for a case-sensitive
string; for a ``(?i:...)`` one, a search of that literal with the very flags it has inside
the pattern) and returns no matches without running the pattern when it is absent.

That is exact, not a heuristic: a match of the pattern contains a match of the needle, so no
needle means no match. ``tests/test_regex_prefilter.py`` checks the derivation on hand-made
patterns and, on every text we have, that the pattern never matches where its needle is absent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

__all__ = ["Prefiltered", "install", "needle", "wrap"]

_MIN_NEEDLE = 3  # a shorter required string would skip almost nothing
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT,
            getattr(sre_constants, "POSSESSIVE_REPEAT", sre_constants.MAX_REPEAT))


def _required(items: Any, flags: int) -> set[tuple[str, int]]:
    """(literal, flags) pairs every match of the sequence ``items`` contains."""
    out: set[tuple[str, int]] = set()
    run: list[str] = []

    def flush() -> None:
        if len(run) >= _MIN_NEEDLE:
            out.add(("".join(run), flags))
        run.clear()

    for op, av in items:
        if op is sre_constants.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is sre_constants.SUBPATTERN:
            _, add_flags, del_flags, sub = av
            out |= _required(sub, (flags | add_flags) & ~del_flags)
        elif op is sre_constants.BRANCH:
            alternatives = [_required(alt, flags) for alt in av[1]]
            if alternatives:
                out |= set.intersection(*alternatives)
        elif op in _REPEATS:
            low, _, sub = av
            if low >= 1:
                out |= _required(sub, flags)
        # anything else (classes, ANY, anchors, lookarounds, backrefs) requires no literal
    flush()
    return out


def needle(pattern: re.Pattern[str]) -> tuple[str, int] | None:
    """A string (and the flags it is matched with) contained in every match of ``pattern``,
    or ``None``. Case-sensitive strings are preferred, then the longest."""
    if pattern.flags & re.VERBOSE:
        return None  # the parse below does not need it, but keep to the patterns we vetted
    tree = sre_parse.parse(pattern.pattern, pattern.flags)
    found = _required(tree, pattern.flags)
    if not found:
        return None
    return max(found, key=lambda x: (not x[1] & re.IGNORECASE, len(x[0])))


class Prefiltered:
    """``pattern`` behind its needle; exposes what math-verify uses (``finditer``, ``search``)
    and everything else of the compiled pattern unchanged."""

    __slots__ = ("_present", "pattern")

    def __init__(self, pattern: re.Pattern[str], found: tuple[str, int]) -> None:
        self.pattern = pattern
        text, flags = found
        if flags & re.IGNORECASE:
            probe = re.compile(re.escape(text), flags & ~re.VERBOSE)
            self._present = lambda s: probe.search(s) is not None
        else:
            self._present = lambda s: text in s

    def finditer(self, string: str, *args: Any) -> Iterator[re.Match[str]]:
        if args or self._present(string):
            return self.pattern.finditer(string, *args)
        return iter(())

    def search(self, string: str, *args: Any) -> re.Match[str] | None:
        if args or self._present(string):
            return self.pattern.search(string, *args)
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pattern, name)


def wrap(targets: Sequence[tuple[Sequence[tuple[Any, int]], Any]]) -> list[Any]:
    """``get_extraction_regexes``' structure with each pattern that has a needle wrapped."""
    out = []
    for patterns, target in targets:
        wrapped = []
        for pattern, priority in patterns:
            if isinstance(pattern, re.Pattern):
                found = needle(pattern)
                if found is not None:
                    pattern = Prefiltered(pattern, found)
            wrapped.append((pattern, priority))
        out.append((wrapped, target))
    return out


def install() -> None:
    """Route ``math_verify.parser.get_extraction_regexes`` through :func:`wrap` (memoised per
    configuration, as the library memoises the patterns themselves). Once per process."""
    import math_verify.parser as mv_parser

    original = mv_parser.get_extraction_regexes
    if getattr(original, "prefiltered", False):
        return
    # keyed on the identity of the library's (lru-cached) patterns and configs; each entry
    # keeps those objects alive, so an id in a key cannot be reused by another object
    memo: dict[tuple[int, ...], tuple[Any, list[Any]]] = {}

    def get_extraction_regexes(*args: Any, **kwargs: Any) -> list[Any]:
        targets = original(*args, **kwargs)
        key = tuple(i for group, target in targets
                    for i in (id(target), *(id(p) for p, _ in group)))
        hit = memo.get(key)
        if hit is None:
            if len(memo) >= 32:
                memo.clear()
            hit = memo[key] = (targets, wrap(targets))
        return hit[1]

    get_extraction_regexes.prefiltered = True  # type: ignore[attr-defined]
    mv_parser.get_extraction_regexes = get_extraction_regexes
