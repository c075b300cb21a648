"""math-verify's extraction without scanning all of a long response: the same matches, tried
in the same order, found from the end of the text.

``extract_target_from_pred`` runs every pattern of a priority group over the whole response,
sorts all the matches by end (rightmost first) and tries them in that order until one
parses. On a 32 KB chain of thought that is ~1,400 matches of the plain-number, expression
and LaTeX patterns, of which the first one tried almost always parses: the scan, not the
parse, is most of the cost, and it grows with the text.

Each pattern gets one of three scans (:class:`Scan`), each exact:

* **led**: every match begins with a literal of three or more characters (``answer``,
  ``final answer``, after zero-width items such as ``fast_regex``'s guard). The literal's
  occurrences are found with the engine itself (same flags, so case folding is the
  engine's), and the pattern is tried only there, at each occurrence not inside the previous
  match: that is what ``finditer`` does, minus the positions where no match can begin.
* **barrier**: the characters a match can consume are a strict subset of ASCII (the number
  and expression patterns consume digits, operators, spaces and a few letters of
  ``percent``). A character outside that set is a *barrier*: no match contains it, so the
  full scan's cursor passes it, and ``finditer(text, q + 1)`` from a barrier ``q`` yields
  exactly the full scan's matches that start after ``q``, while every match that starts
  before it also ends before it. Lookbehinds see the real text (``pos``, not a slice), and
  ``^`` matches only at the real start either way.
* **latex**: the library's plain LaTeX-environment pattern (priority 300: ``$$..$$``,
  ``\\[..\\]``, ``$..$``, ``\\(..\\)``, `` [..] ``, ``\\frac{a}{b}``, a percent, up to five
  joined by "and"/"or"/","), whose display contents can hold any character. A match can
  cross a line break only inside a display content or in a run of spaces before a percent,
  a connector or the next environment. So at a line start ``q`` whose first character can
  begin none of those (a letter other than ``a o p P``, or a digit), no match crosses
  ``q - 1`` unless a display is open there, and that is excluded exactly: a ``\\[..\\]``
  content never holds ``\\]`` (so none is open at ``q`` when the last ``\\]`` before it is
  after the last ``\\[``), and a ``$$..$$`` content never holds ``$$`` (so none is open when
  no ``$$`` comes before ``q``). From such a ``q`` the full scan's cursor passes ``q``, and
  ``finditer(text, q)`` is the full scan from there. With no such line start, the full scan.
* **full**: anything else: ``finditer`` over the whole text, as the library does.

:func:`ranked` starts with a window over the last :data:`TAIL` characters: each barrier
pattern scans from its last barrier before the window, the others as above. The matches
that end after every such barrier (``cut``) rank above every match not yet seen, so they are
the head of the library's order exactly (the sort key and its stable tie-break by pattern
order are the library's); they are tried first, and only when none parses is the window
widened (x8, then the whole text) and the next part of the same order tried. What a
consumer sees is the library's ordered list, lazily. ``tests/test_tail_scan.py`` compares
that list, match by match, with the library's on every text we have and with tiny windows,
and ``parse`` results with stock.

Each candidate reaches the library's ``extract_match`` as :class:`Groups`, the match with its
``groupdict()`` built once (``extract_latex`` asks for it seven times and only reads it);
``tests/test_tail_scan.py`` compares what ``extract_match`` makes of both on every text.

Which scan each pattern gets is derived from its parse tree (the ``re`` module's own
parser) and tested with the engine; a pattern that could match the empty string, or whose
tree has an item this module does not know, gets the full scan.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

from math_verify.parser import extract_match

from reward_service.scorers.patches.regex_prefilter import Prefiltered
from reward_service.scorers.patches.regex_tree import barrier_class, lead_probe

__all__ = ["TAIL", "Groups", "Scan", "extract", "install", "ranked", "scans"]

#: First window. The answer is almost always the text's last few characters ("#### 18",
#: "= 42."), and the lowest-priority group (a bare LaTeX environment, the two number patterns)
#: is the one most responses reach: with 2048 a text under 4 KB (nearly every one) was
#: scanned whole by all three, with 16 it is scanned from its last barrier before its last 16
#: characters (on corpus.jsonl 54 of 6,526 texts widen once, 3 twice; docs/PERFORMANCE.md).
TAIL = 16
_WIDEN = 8
_LINE_STARTS = 64  # line starts tried as a latex barrier before giving up (full scan)
# first characters of a line after which no latex-environment match continues (see above)
_LATEX_SAFE = frozenset("bcdefghijklmnqrstuvwxyzABCDEFGHIJKLMNOQRSTUVWXYZ0123456789")


# --- the scans -------------------------------------------------------------------------------


class Scan:
    """How one pattern's matches are found (see the module doc)."""

    __slots__ = ("barrier", "fold", "kind", "latex", "lead", "pattern", "present", "probe")

    def __init__(self, pattern: Any) -> None:
        self.present = pattern._present if isinstance(pattern, Prefiltered) else None
        inner = pattern.pattern if isinstance(pattern, Prefiltered) else pattern
        self.pattern: re.Pattern[str] = inner
        led = lead_probe(inner) if isinstance(inner, re.Pattern) else None
        self.lead = led[0] if led else ""
        self.probe: re.Pattern[str] | None = led[1] if led else None
        # the literal in lower case when it is case-insensitive and ASCII (_occurrences)
        self.fold = (self.lead.lower() if self.probe is not None and self.lead.isascii()
                     and self.probe.flags & re.IGNORECASE else None)
        self.barrier: re.Pattern[str] | None = None
        if self.probe is None and isinstance(inner, re.Pattern):
            self.barrier = barrier_class(inner)
        self.latex = self.probe is None and self.barrier is None and _is_latex_env(inner)
        self.kind = ("led" if self.probe else "barrier" if self.barrier
                     else "latex" if self.latex else "full")

    def matches(self, text: str, window: int, memo: dict[Any, Any],
                ) -> tuple[list[re.Match[str]], int]:
        """(the full scan's matches that start after ``q``, ``q``) for a window over the last
        ``window`` characters (0: the whole text): every match not returned ends at or before
        ``q``; ``q`` is -1 when all are returned."""
        if self.probe is not None:  # (an absent literal is the prefilter's answer too)
            return self._led(text, memo), -1
        if self.present is not None and not self.present(text):
            return [], -1
        if self.latex and 0 < window < len(text):
            q = _latex_barrier(text, len(text) - window)
            if q > 0:
                return list(self.pattern.finditer(text, q)), q
            return list(self.pattern.finditer(text)), -1
        q = -1
        if self.barrier is not None and 0 < window < len(text):
            # the last barrier before the window: text index q is index len - 1 - q reversed
            rev = memo.get("rev")
            if rev is None:
                rev = memo["rev"] = text[::-1]
            hit = self.barrier.search(rev, window)
            q = len(text) - 1 - hit.start() if hit else -1
        return list(self.pattern.finditer(text, q + 1)), q

    def _led(self, text: str, memo: dict[Any, Any]) -> list[re.Match[str]]:
        """``finditer``: the pattern tried at each occurrence of its literal (overlapping
        ones too; found once per text and literal) that is not inside the previous match."""
        probe = self.probe
        assert probe is not None
        starts = memo.get(probe)
        if starts is None:
            starts = memo[probe] = _occurrences(probe, self.fold, text, memo)
        out: list[re.Match[str]] = []
        match, cursor = self.pattern.match, 0
        for at in starts:
            if at >= cursor:
                m = match(text, at)
                if m is not None:
                    out.append(m)
                    cursor = m.end()
        return out


def _latex_barrier(text: str, before: int) -> int:
    """The last line start ``q < before`` from which the latex-environment scan is exact
    (see the module doc), or -1."""
    first_dd = text.find("$$")
    if first_dd >= 0:
        before = min(before, first_dd + 1)  # no ``$$`` may lie wholly before q
    nl = text.rfind("\n", 0, before - 1)
    for _ in range(_LINE_STARTS):
        if nl < 0:
            return -1
        q = nl + 1
        if text[q] in _LATEX_SAFE:
            opened = text.rfind("\\[", 0, q)
            if opened < 0 or opened < text.rfind("\\]", 0, q):
                return q
        nl = text.rfind("\n", 0, nl)
    return -1


def _is_latex_env(pattern: Any) -> bool:
    """Whether ``pattern`` is the library's plain latex-environment pattern (as released, or
    behind ``fast_regex``'s guard), the one :func:`_latex_barrier` reasons about."""
    if not isinstance(pattern, re.Pattern):
        return False
    from math_verify.parser import LatexExtractionConfig

    import reward_service.scorers.patches.fast_regex as fast_regex

    for lib, priority in fast_regex.library_patterns(LatexExtractionConfig()):
        if priority == 300 and pattern.flags == lib.flags and pattern.pattern in (
                lib.pattern, fast_regex.guarded(lib).pattern):
            return True
    return False


def _occurrences(probe: re.Pattern[str], fold: str | None, text: str, memo: dict[Any, Any],
                 ) -> list[int]:
    """Every start of a match of ``probe`` (a literal), overlapping ones too. A
    case-insensitive search is ~17x slower than ``str.find`` in ``re``; on an ASCII text an
    ASCII literal's case-insensitive matches are exactly those of its lower case (``fold``)
    in the lower-cased text (the engine's other case pairs, such as s and the long s, k and
    the Kelvin sign, are not ASCII)."""
    if fold is not None:
        low = memo.get("lower")
        if low is None:
            low = memo["lower"] = text.lower() if text.isascii() else ""
        if low:
            found = []
            at = low.find(fold)
            while at >= 0:
                found.append(at)
                at = low.find(fold, at + 1)
            return found
    out = []
    at = probe.search(text)
    while at is not None:
        out.append(at.start())
        at = probe.search(text, at.start() + 1)
    return out


Group = Sequence[tuple[Scan, Any]]


def ranked(group: Group, text: str, tail: int = TAIL, memo: dict[Any, Any] | None = None,
           ) -> Iterator[tuple[re.Match[str], Any]]:
    """The matches of one priority group in the library's order (end descending, then start
    ascending, then pattern order), with their targets; found lazily from the end. ``memo``
    holds what several groups' scans of one text share (the reversed text, literal
    occurrences)."""
    n = len(text)
    window = tail if n > 2 * tail else 0
    done = 0
    memo = {} if memo is None else memo
    while True:
        found: list[tuple[int, int, int, re.Match[str], Any]] = []
        cut = -1
        for i, (scan, target) in enumerate(group):
            ms, q = scan.matches(text, window, memo)
            if q > cut:
                cut = q
            found.extend((m.end(), -m.start(), -i, m, target) for m in ms)
        # the library's key (end, -start), reversed; -i keeps its stable tie-break (pattern
        # order) and makes every key distinct, so the match objects are never compared
        found.sort(reverse=True)
        exact = found if cut < 0 else [x for x in found if x[0] > cut]
        for x in exact[done:]:
            yield x[3], x[4]
        done = len(exact)
        if cut < 0:
            return
        window = window * _WIDEN if window * _WIDEN * 2 < n else 0  # 0: the whole text


class Groups:
    """A match whose ``groupdict()`` is built once. math-verify's ``extract_latex`` calls
    ``match.groupdict()`` seven times per match (the first LaTeX group, each of the five
    ``next`` groups, the percent flag), each time a new dict of the pattern's ~60 groups, and
    only reads them; on corpus.jsonl that was about half of its time once the parse is
    memoised. Everything else (``group``, ``span``, ...) is the match's own."""

    __slots__ = ("_dict", "match")

    def __init__(self, match: re.Match[str]) -> None:
        self.match = match
        self._dict: dict[str, str | Any] | None = None

    def groupdict(self) -> dict[str, str | Any]:
        if self._dict is None:
            self._dict = self.match.groupdict()
        return self._dict

    def __getattr__(self, name: str) -> Any:
        return getattr(self.match, name)


def extract(text: str, groups: Sequence[Group], fallback_mode: str = "first_match",
            extraction_mode: str = "any_match", tail: int = TAIL,
            ) -> tuple[list[Any], re.Match[str] | None]:
    """``extract_target_from_pred`` (math-verify 0.9.0) over ``groups`` (highest priority
    first), also returning the match that produced the answer. Each match reaches
    ``extract_match`` as :class:`Groups` (its ``groupdict`` built once)."""
    found: list[Any] = []
    fallbacks: list[str] = []
    where: re.Match[str] | None = None
    match_found = False
    memo: dict[Any, Any] = {}
    for group in groups:
        for m, target in ranked(group, text, tail, memo):
            value, fallback = extract_match(Groups(m), target)
            match_found = True
            if fallback:
                fallbacks.append(fallback)
            if value is not None:
                found.append(value)
                where = m
                break
            if extraction_mode == "first_match":
                break
        if found or (match_found and extraction_mode == "first_match"):
            break
    if fallback_mode == "first_match" and fallbacks:
        found.append(fallbacks[0])
    return found, where


# --- the library's groups, as scans ----------------------------------------------------------

_SCANS: dict[int, tuple[Any, Scan]] = {}


def _scan(pattern: Any) -> Scan:
    hit = _SCANS.get(id(pattern))
    if hit is None or hit[0] is not pattern:
        if len(_SCANS) > 256:
            _SCANS.clear()
        hit = _SCANS[id(pattern)] = (pattern, Scan(pattern))  # keeps the pattern alive
    return hit[1]


_GROUPS: dict[int, tuple[Any, list[list[tuple[Scan, Any]]]]] = {}


def scans(target_res: Sequence[tuple[Sequence[tuple[Any, int]], Any]]) -> list[list[tuple[Scan, Any]]]:
    """``get_extraction_regexes``' result as priority groups of (scan, target), highest
    priority first, in the library's order within a group; memoised on the identity of
    ``target_res`` (the library and the prefilter return the same list for a
    configuration)."""
    hit = _GROUPS.get(id(target_res))
    if hit is not None and hit[0] is target_res:
        return hit[1]
    if len(_GROUPS) > 32:
        _GROUPS.clear()
    groups = _build_groups(target_res)
    _GROUPS[id(target_res)] = (target_res, groups)  # keeps target_res alive: ids stay unique
    return groups


def _build_groups(target_res: Sequence[tuple[Sequence[tuple[Any, int]], Any]],
                  ) -> list[list[tuple[Scan, Any]]]:
    flat = sorted(((pattern, target, priority) for patterns, target in target_res
                   for pattern, priority in patterns), key=lambda x: x[2])  # stable, as the library's
    return [[(_scan(p), t) for p, t, _ in g] for _, g in groupby(flat, key=lambda x: x[2])]


def install() -> None:
    """Replace ``math_verify.parser.extract_target_from_pred`` (what ``parse`` calls) with
    :func:`extract` over the same patterns; once per process."""
    import math_verify.parser as mv_parser

    if getattr(mv_parser.extract_target_from_pred, "tail_scan", False):
        return

    def extract_target_from_pred(pred: str, target_res: Any, fallback_mode: str = "no_fallback",
                                 extraction_mode: str = "any_match") -> list[Any]:
        return extract(pred, scans(target_res), fallback_mode, extraction_mode)[0]

    extract_target_from_pred.tail_scan = True  # type: ignore[attr-defined]
    mv_parser.extract_target_from_pred = extract_target_from_pred
