"""``reward_service/scorers/patches/tail_scan.py`` tries the library's matches in the library's order
while scanning long responses from the end: the derivation of each pattern's scan, then the
whole ordered list of matches, group by group, against the library's own on every text we
have, with windows small enough that short texts exercise them; hand-made texts where a
window must not be trusted (an open display, a ``$$``, a percent or a connector on the next
line), with the control that a plain window from the same place gets them wrong; the
library's ``extract_match`` on a match whose ``groupdict`` is built once (``Groups``) against
the match itself; ``parse`` results against stock math-verify in a fresh interpreter on long
responses."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from itertools import groupby
from typing import Any

import math_verify.parser as mv_parser
import pytest
from math_verify import ExprExtractionConfig, LatexExtractionConfig

from bench.long import rows as long_set
from reward_service.scorers.patches import fast_regex, install_patches, regex_tree, tail_scan
from tests.helpers import read_jsonl
from tests.test_fast_regex import _texts

CONFIGS = (LatexExtractionConfig(), ExprExtractionConfig())


def _installed_groups() -> list[list[tuple[tail_scan.Scan, Any]]]:
    install_patches()
    return tail_scan.scans(mv_parser.get_extraction_regexes(list(CONFIGS)))


def _stock_order(text: str) -> list[list[tuple[Any, ...]]]:
    """The library's ``extract_target_from_pred`` candidate order, with its unpatched
    patterns: per priority group, every match sorted by end (rightmost first), then start."""
    flat = sorted(((p, t, pri) for t in CONFIGS for p, pri in fast_regex.library_patterns(t)),
                  key=lambda x: x[2])
    out = []
    for _, group in groupby(flat, key=lambda x: x[2]):
        ms = sorted(((m, m.start(), m.end(), i) for i, (p, _, _) in enumerate(group)
                     for m in p.finditer(text)), key=lambda x: (x[2], -x[1]), reverse=True)
        out.append([(m.span(), m.groupdict(), i) for m, _, _, i in ms])
    return out


def _our_order(groups: list[list[tuple[tail_scan.Scan, Any]]], text: str,
               tail: int) -> list[list[tuple[Any, ...]]]:
    out = []
    for group in groups:
        index = {id(scan): i for i, (scan, _) in enumerate(group)}
        order = []
        for m, _ in tail_scan.ranked(group, text, tail):
            scan = next(s for s, _ in group if s.pattern is m.re)
            order.append((m.span(), m.groupdict(), index[id(scan)]))
        out.append(order)
    return out


def test_each_library_pattern_gets_the_scan_its_tree_allows() -> None:
    kinds = [[scan.kind for scan, _ in g] for g in _installed_groups()]
    flat = [k for g in kinds for k in g]
    # live: the answer-phrase patterns are led by their literal, the plain-number and
    # expression patterns have barriers, the plain LaTeX pattern has line-start barriers
    assert flat.count("led") >= 8 and flat.count("barrier") == 2
    assert kinds[-1] == ["latex", "barrier", "barrier"]


@pytest.mark.parametrize(("pattern", "kind"), [
    (r"(?i:final answer)\s*\d+", "led"),
    (r"(?=[f])(?:final\s\d)", "led"),
    (r"(?:^|\s)\d+(?:\.\d+)?", "barrier"),
    (r"(?s:.)+\d", "full"),          # consumes anything
    (r"\d*", "full"),                # can be empty
    (r"(a)\1", "full"),              # a back reference: not reasoned about
])
def test_scan_kinds_on_hand_made_patterns(pattern: str, kind: str) -> None:
    assert tail_scan.Scan(re.compile(pattern)).kind == kind


def test_a_barrier_class_holds_no_character_a_match_can_consume() -> None:
    cls = regex_tree.barrier_class(re.compile(r"(?i:pct)\s*\d+"))
    assert cls is not None
    for ch in "pPcCtT 0123456789\n":
        assert cls.fullmatch(ch) is None
    assert cls.fullmatch("x") and cls.fullmatch("(")


# texts where the last line start before a window is no barrier; the scan must look further
TRICKY = [
    # a \[ display open across line starts that begin with a letter, math inside it
    "Intro $1$ here.\n\\[\n" + "Big line $b$ of text\n" * 40 + "x = 5\n\\]\nThen 3.\n",
    # a $$ display open across line starts: no line start after the first $$ is a barrier
    "Intro.\n$$\n" + "Line $c$ one\n" * 40 + "7$$ done\nSo 8.\n",
    # a percent, a connector and another environment on the next line
    "Value $4$\n" + "% of it, $2$\n" * 30 + "Maybe $5$\nand $6$\nok",
    "Value $4$\n" + "percent $3$\n" * 30 + "The $x$\n, or\n\\(9\\)\nEnd",
    # inline brackets at line starts
    "Start\n" + " [3] \n[4] \nNext\n" * 30 + "Last 12 \n",
    # numbers across line starts and barriers inside a number's alphabet
    "Total\n" + "1,234\n 5 percent\n" * 50 + "= 42 pct\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_windows_that_must_not_be_trusted_are_not(text: str) -> None:
    groups = _installed_groups()
    stock = _stock_order(text)
    for tail in (4, 8, 16, 64, 256):
        assert _our_order(groups, text, tail) == stock, tail


def test_control_a_plain_window_gets_the_tricky_texts_wrong() -> None:
    """Without the barrier analysis, scanning the plain LaTeX pattern from a line start
    finds matches inside a display, or loses the one that runs onto that line: each of
    these texts has a line start where that happens, so they test something."""
    plain = next(p for p, pri in fast_regex.library_patterns(CONFIGS[0]) if pri == 300)
    for text in TRICKY[:4]:
        full = [m.span() for m in plain.finditer(text)]
        starts = [m.end() for m in re.finditer("\n", text)]
        # wrong: other matches than the full scan's after q, or a match of the full scan
        # running across q (the window would rank below it what ranks above it)
        assert any([m.span() for m in plain.finditer(text, q)] != [s for s in full if s[0] >= q]
                   or any(a < q < b for a, b in full) for q in starts), text[:40]


@pytest.mark.needs_data
@pytest.mark.timeout(1200)
def test_same_candidates_in_the_same_order_on_every_text() -> None:
    groups = _installed_groups()
    texts = _texts()
    assert len(texts) > 7000
    random.Random(0).shuffle(texts)
    for n, text in enumerate(texts):
        stock = _stock_order(text)
        # tiny windows on every text; the production window on the long ones
        tails = (8, 64) if n % 2 else (16, 512)
        for tail in (*tails, tail_scan.TAIL):
            assert _our_order(groups, text, tail) == stock, (tail, text[:200])


@pytest.mark.needs_data
@pytest.mark.timeout(600)
def test_a_match_whose_groupdict_is_built_once_extracts_the_same() -> None:
    """``extract_match`` (its ``extract_latex`` reads ``groupdict()`` seven times per match)
    gives the same value and text from :class:`tail_scan.Groups` as from the match itself, on
    the first candidate of every group of every corpus response (the one a scorer tries)."""
    groups = _installed_groups()
    checked = 0
    for text in (r["response"] for r in read_jsonl("corpus.jsonl")):
        for group in groups:
            for m, target in tail_scan.ranked(group, text):
                ours = mv_parser.extract_match(tail_scan.Groups(m), target)
                lib = mv_parser.extract_match(m, target)
                assert (type(ours[0]), ours) == (type(lib[0]), lib), text[:200]
                checked += 1
                break
    assert checked > 8_000
    once = tail_scan.Groups(re.match(r"(?P<a>x)(?P<b>y)?", "x"))  # type: ignore[arg-type]
    assert once.groupdict() == {"a": "x", "b": None} and once.groupdict() is once.groupdict()
    assert once.span() == (0, 1) and once.group("a") == "x"


_STOCK_PARSE = r"""
import json, sys
from math_verify import parse
import math_verify.parser as p
assert p.extract_target_from_pred.__module__ == "math_verify.parser", "patched"
print(json.dumps([[str(x) for x in parse(t, parsing_timeout=None)] for t in json.load(sys.stdin)]))
"""


@pytest.mark.needs_data
@pytest.mark.timeout(600)
def test_parse_equals_stock_on_long_responses() -> None:
    rows = read_jsonl("corpus.jsonl")
    texts = [x["response"] for x in long_set.build(rows, 48, seed=5, lo_kb=8, hi_kb=32)]
    texts += TRICKY
    stock = json.loads(subprocess.run([sys.executable, "-c", _STOCK_PARSE], check=True,
                                      input=json.dumps(texts), capture_output=True,
                                      text=True).stdout)
    install_patches()
    from math_verify import parse

    assert mv_parser.extract_target_from_pred.tail_scan  # type: ignore[attr-defined]
    ours = [[str(x) for x in parse(t, parsing_timeout=None)] for t in texts]  # type: ignore[arg-type]
    assert ours == stock
    assert sum(bool(x) for x in ours) > len(texts) // 2
