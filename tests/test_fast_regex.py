"""The start guard on math-verify's extraction regexes (``reward_service/scorers/patches/fast_regex.py``)
finds the same matches: the derivation on hand-made patterns, then every guarded pattern
against the library's own on every text we have (corpus, long responses, OlympiadBench, the
golden suite, the adversarial set)."""

from __future__ import annotations

import json
import random
import re

import math_verify.parser as mv_parser
import pytest
from math_verify import ExprExtractionConfig, LatexExtractionConfig

from bench.long import rows as long_set
from reward_service.scorers.patches import fast_regex
from tests.helpers import ROOT, read_jsonl


@pytest.mark.parametrize(("pattern", "chars", "at0"), [
    (r"(?<!\\)\$x|\s\[y", {"$", " ", "\n"}, False),
    (r"(?:^|\s|=)(?:\*\*)?\d+", {" ", "="}, True),
    (r"(?<!\d)-?\\frac", {"-", "\\"}, False),
    (r"(?=a)ab|c+", {"a", "c"}, False),
])
def test_start_class_covers_every_start(pattern: str, chars: set[str], at0: bool) -> None:
    found = fast_regex.start_class(re.compile(pattern))
    assert found is not None
    cls, got0 = found
    assert got0 == at0
    assert all(re.fullmatch(cls, c) for c in chars)
    assert re.fullmatch(cls, "q") is None


@pytest.mark.parametrize("pattern", [r".x", r"a?", r"(?i:answer)\d", r"[^a]b", r"(?s:a)b", r"\b"])
def test_no_start_class_where_a_match_could_start_anywhere_or_be_empty(pattern: str) -> None:
    assert fast_regex.start_class(re.compile(pattern)) is None


def test_guard_leaves_fast_starting_patterns_alone() -> None:
    for pattern in (r"\\boxed{.+}", r"(?:^|\s|\=)\d", r"[ab]c"):
        compiled = re.compile(pattern)
        assert fast_regex.guarded(compiled) is compiled
    slow = re.compile(r"(?<!\\)\$(?P<x>[^$]+)\$")
    fast = fast_regex.guarded(slow)
    assert fast is not slow and fast.groupindex == slow.groupindex
    text = "a $b$ \\$c$ $d$ \\$e$"
    assert [m.span() for m in fast.finditer(text)] == [m.span() for m in slow.finditer(text)]
    assert len(list(fast.finditer(text))) >= 2


def _texts() -> list[str]:
    rows = read_jsonl("corpus.jsonl")
    texts = [r["response"] for r in rows]
    texts += [x["response"] for x in long_set.build(rows, 48, seed=3)]
    texts += [r["solution"][0] for r in read_jsonl("qwen25math_olympiadbench_test.jsonl")]
    # the adversarial set's 100 KB ``\\[ x \\[ x ...`` takes minutes in the library's own
    # plain-LaTeX pattern (each ``\\[`` scans to the end): the service's deadline is for that
    texts += [r["response"] for r in read_jsonl("adversarial.jsonl")
              if isinstance(r.get("response"), str) and len(r["response"]) <= 20_000]
    for name in ("cases.jsonl", "math_verify_cases.jsonl"):
        with open(ROOT / "tests" / "golden" / name) as fh:
            for line in fh:
                r = json.loads(line)
                texts += [r.get("response") or r.get("pred") or "", r["gold"]]
    return texts


@pytest.mark.needs_data
@pytest.mark.timeout(1200)
def test_guarded_patterns_find_the_librarys_matches_on_every_text() -> None:
    configs = (LatexExtractionConfig(), ExprExtractionConfig())
    library = [p for cfg in configs for p, _ in fast_regex.library_patterns(cfg)]
    pairs = [(p, fast_regex.guarded(p)) for p in library]
    pairs = [(p, g) for p, g in pairs if g is not p]
    assert len(pairs) >= 2  # live: the plain-LaTeX and the boxed-environment patterns
    texts = _texts()
    random.Random(0).shuffle(texts)
    assert len(texts) > 7000
    for pattern, guarded in pairs:
        for text in texts:
            ours = [(m.span(), m.groupdict()) for m in guarded.finditer(text)]
            theirs = [(m.span(), m.groupdict()) for m in pattern.finditer(text)]
            assert ours == theirs, (pattern.pattern[:80], text[:200])


def test_install_guards_what_the_library_builds() -> None:
    fast_regex.install()
    cfg = LatexExtractionConfig()
    installed = mv_parser.lazy_latex_regex(cfg)
    original = fast_regex.library_patterns(cfg)
    assert [pri for _, pri in installed] == [pri for _, pri in original]
    assert sum(a is not b for (a, _), (b, _) in zip(installed, original, strict=True)) >= 2
    assert mv_parser.lazy_latex_regex(cfg) is installed  # memoised, as the library's
