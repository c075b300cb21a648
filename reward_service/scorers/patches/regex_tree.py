"""What a regex's parse tree (the ``re`` module's own parser) says about its matches, for
:mod:`tail_scan`: the characters no match can contain (:func:`barrier_class`) and a literal
every match begins with (:func:`lead_probe`). Where the tree holds an item this module does
not reason about, or a match could be empty, each answers ``None``. Character questions are
put to the engine itself (each consuming item compiled alone, with the flags in force at
it), so case folding and classes mean what ``re`` makes them mean.
"""

from __future__ import annotations

import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser as P  # type: ignore[attr-defined]
from typing import Any

from reward_service.scorers.patches.fast_regex import (  # one definition of each
    _CATEGORIES,
    _REPEATS,
)

__all__ = ["barrier_class", "lead_probe"]

_MIN_LEAD = 3
_ENGINE_FLAGS = re.IGNORECASE | re.DOTALL | re.ASCII | re.UNICODE


class _Opaque(Exception):
    """An item this module does not reason about: the pattern gets the full scan."""


# --- what a pattern can consume --------------------------------------------------------------


def _class_source(items: Any) -> str:
    out = []
    for op, av in items:
        if op is C.NEGATE:
            out.append("^")
        elif op is C.LITERAL:
            out.append(re.escape(chr(av)))
        elif op is C.RANGE:
            out.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op is C.CATEGORY and av in _CATEGORIES:
            out.append(_CATEGORIES[av])
        else:
            raise _Opaque
    return "[" + "".join(out) + "]"


def _atoms(items: Any, flags: int, out: list[re.Pattern[str]]) -> None:
    """Each consuming item of ``items`` (outside lookarounds) as a one-character pattern
    compiled with the flags in force there."""
    for op, av in items:
        if op is C.LITERAL:
            src = re.escape(chr(av))
        elif op is C.NOT_LITERAL:
            src = f"[^{re.escape(chr(av))}]"
        elif op is C.ANY:
            src = "."
        elif op is C.IN:
            src = _class_source(av)
        elif op is C.SUBPATTERN:
            _, add, delete, sub = av
            _atoms(sub, (flags | add) & ~delete, out)
            continue
        elif op is C.BRANCH:
            for alt in av[1]:
                _atoms(alt, flags, out)
            continue
        elif op in _REPEATS:
            _atoms(av[2], flags, out)
            continue
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue  # zero width: consumes nothing
        else:  # group references, conditionals, ...
            raise _Opaque
        out.append(re.compile(src, flags & _ENGINE_FLAGS))


def barrier_class(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """A class of ASCII characters no match of ``pattern`` can contain, or ``None`` (none, or
    the pattern could match the empty string, or has items we do not reason about)."""
    if not isinstance(pattern.pattern, str) or pattern.flags & re.VERBOSE:
        return None
    tree = P.parse(pattern.pattern, pattern.flags)
    if tree.getwidth()[0] == 0:
        return None
    atoms: list[re.Pattern[str]] = []
    try:
        _atoms(tree, pattern.flags, atoms)
    except _Opaque:
        return None
    free = [ch for ch in map(chr, range(128)) if not any(a.fullmatch(ch) for a in atoms)]
    if not free:
        return None
    return re.compile("[" + "".join(re.escape(ch) for ch in free) + "]")


# --- a literal every match begins with ------------------------------------------------------


def _zero_width(op: Any, av: Any) -> bool:
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return True
    if op is C.SUBPATTERN:
        return all(_zero_width(o, a) for o, a in av[3])
    if op is C.BRANCH:
        return all(all(_zero_width(o, a) for o, a in alt) for alt in av[1])
    return False


def _lead(items: Any, flags: int) -> tuple[str, int] | None:
    """The literal run that every match of ``items`` begins with (after zero-width items)."""
    items = list(items)
    for i, (op, av) in enumerate(items):
        if _zero_width(op, av):
            continue
        if op is C.SUBPATTERN:
            _, add, delete, sub = av
            return _lead(sub, (flags | add) & ~delete)
        run = []
        for op2, av2 in items[i:]:
            if op2 is not C.LITERAL:
                break
            run.append(chr(av2))
        return ("".join(run), flags) if len(run) >= _MIN_LEAD else None
    return None


def lead_probe(pattern: re.Pattern[str]) -> tuple[str, re.Pattern[str]] | None:
    """The literal that every match of ``pattern`` begins with, at the match's start, and
    that literal compiled with its own flags; or ``None``."""
    if not isinstance(pattern.pattern, str) or pattern.flags & re.VERBOSE:
        return None
    tree = P.parse(pattern.pattern, pattern.flags)
    if tree.getwidth()[0] == 0:
        return None
    found = _lead(list(tree), pattern.flags)
    if found is None:
        return None
    return found[0], re.compile(re.escape(found[0]), found[1] & _ENGINE_FLAGS)
