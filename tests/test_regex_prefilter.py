"""The extraction-regex prefilter (``reward_service/scorers/patches/regex_prefilter.py``) is exact:
a pattern never matches a text that lacks its needle."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig, get_extraction_regexes

from reward_service.scorers.patches.regex_prefilter import Prefiltered, needle, wrap
from tests.helpers import read_jsonl

MV_CASES_PATH = Path(__file__).with_name("golden") / "math_verify_cases.jsonl"
TARGETS = wrap(get_extraction_regexes([LatexExtractionConfig(), ExprExtractionConfig()]))
WRAPPED = [p for group, _ in TARGETS for p, _ in group if isinstance(p, Prefiltered)]


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"abc|abd", None),  # no common run of 3
        (r"(?:xabcx|yabcy)", None),  # "abc" is in both, but not as a whole run: conservative
        (r"(?:zz\\boxed{|\\boxed{)x", None),
        (r"(?:foo)?barbaz", ("barbaz", 32)),  # the optional part requires nothing
        (r"(?:foo)*bar", ("bar", 32)),
        (r"(?:fooo)+bar", ("fooo", 32)),  # repeated at least once: required
        (r"(?=later)\d+", None),  # lookaheads are not counted
        (r"(?i:Hello)\d", ("Hello", 34)),  # found with the flags of its scope
        (r"(?i:Hello) world", (" world", 32)),  # case-sensitive preferred
        (r"x(?:ab|abc)y", ("xab", 32)),  # sre factors the common prefix out: still exact
        (r"\\boxed{(?:a|b)}", ("\\boxed{", 32)),
    ],
)
def test_needle_derivation(pattern: str, expected: tuple[str, int] | None) -> None:
    assert needle(re.compile(pattern)) == expected


def test_the_library_patterns_that_get_a_needle() -> None:
    needles = sorted({(p.pattern.pattern[:20], needle(p.pattern)) for p in WRAPPED}, key=str)
    texts = {n[1][0] for n in needles if n[1] is not None}
    assert {"\\boxed{", "final answer", "answer", "I hope"} <= texts, needles
    assert len(WRAPPED) >= 9


def _texts() -> list[str]:
    out = []
    for row in read_jsonl("corpus.jsonl"):
        out += [row["response"], "\\boxed{" + row["gold"] + "}"]
    out += [r["response"][:20_000] for r in read_jsonl("adversarial.jsonl")]
    for line in MV_CASES_PATH.open():
        case = json.loads(line)
        out += [case["gold"], case["pred"]]
    return out


@pytest.mark.needs_data
def test_no_match_without_the_needle_on_every_text_we_have() -> None:
    texts = _texts()
    assert len(texts) > 13_000
    skipped = 0
    for p in WRAPPED:
        for text in texts:
            if not p._present(text):
                skipped += 1
                assert p.pattern.search(text) is None, (p.pattern.pattern[:60], text[:200])
    assert skipped > len(texts)  # the prefilter does skip work on real text


_FRAGMENTS = st.sampled_from([
    "final answer", "FINAL ANSWER", "Final Answer is", "ſ", "İ", "K", "answer:", "ANSWER",  # noqa: RUF001
    "\\boxed{", "\\boxed{1}", "}", "$", "$$", "\\[", "\\]", "\\(", "\\)", " ", "\n", "is",
    "I hope", "I hope it is correct", "42", "-3.5", "\\frac{1}{2}", "x", ".", ",", "%",
])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(st.one_of(_FRAGMENTS, st.text(max_size=3)), max_size=25))
def test_no_match_without_the_needle_on_generated_text(parts: list[str]) -> None:
    text = "".join(parts)
    for p in WRAPPED:
        if not p._present(text):
            assert p.pattern.search(text) is None, (p.pattern.pattern[:60], text)
