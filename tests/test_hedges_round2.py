"""Issue 26: conditional and worded alternatives, invisible characters, think blocks, digit
forms, scientific-notation golds and JSON number labels.

Every example of the issue runs through the real scorer (in-process, the table the workers
build), a few also through the live service (``client``); the generated round-2 corpus
(``tests/golden/hedge_corpus_r2.py``) is checked per class and fold.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections import Counter, defaultdict

import httpx
import pytest

from reward_service.scorers import rule_of
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.patches import install_patches
from reward_service.scorers.rules.number_words import word_value
from reward_service.scorers.rules.text_forms import IGNORABLE, join_digit_groups, plain_text
from reward_service.server.compat import label_text
from tests.golden.hedge_corpus import generate
from tests.helpers import read_jsonl
from trainer_client.integrations._common import ground_truth_text

install_patches()
S = build_scorers()

REFUSED_HEDGES = [  # (scorer, response, gold): paid by the rules of main before issue 26
    ("math", "Final answer: $5$, unless the ordering matters, in which case $6$.", "5"),
    ("math", "The answer is 5 (6 if we count the start).", "5"),
    ("math", "The answer is 5 or six.", "5"),
    ("math", "The answer is 5 \u2228 6.", "5"),
    ("math", "The answer is 5 | 6.", "5"),
    ("math", "The answer is 5 \\text{ or } 6.", "5"),
    ("math", "The answer is 30 or thirty-one.", "30"),
    ("math", "The answer is 5 or one half.", "5"),
    ("math", "The answer is 5 \u200dor\u200d 6.", "5"),  # ZWJ
    ("math", "The answer is 5 \u200bor\u200b 6.", "5"),  # ZWSP
    ("math", "The answer is 5 \u2060or\u2060 6.", "5"),  # WORD JOINER
    ("math", "The answer is 5 o\u00adr 6.", "5"),  # soft hyphen inside "or"
    ("math", "The answer is 5 or \uff16.", "5"),  # full-width 6
    ("math", "Assuming repetition is allowed, the answer is 7; without repetition, the answer "
             "is 5.", "5"),
    ("math", "The final answer is $190$; under the other reading of the problem it is $97$.",
     "190"),
    ("math", "<think>ok</think> The answer is 5. Or maybe 6.", "5"),
    ("gsm8k", "#### 5 \u200dor\u200d 6", "5"),
    ("gsm8k", "#### 5\n(6 if she keeps one)", "5"),
    ("gsm8k", "She has 5 left.\n#### 5 or six", "5"),
    ("choice", "The answer is (B) \u200dor\u200d (C).", "B"),
    ("choice", "The answer is (B), unless it is directed, in which case (C).", "B"),
]

PAID = [  # (scorer, response, gold): one committed answer, the gold
    ("math", "<think>Maybe 5. Or 6.</think> The answer is \\boxed{6}.", "6"),
    ("math", "Maybe 5? Or 6.\n</think>\nThe answer is $\\boxed{6}$.", "6"),  # prompt-opened
    ("math", "The answer is 6 (that is, six).", "6"),
    ("math", "The answer is 31 or thirty-one.", "31"),
    ("math", "If $x = 6$ the constraint fails; if $x = 5$ it holds. So the answer is $5$.", "5"),
    ("math", "The answer is 5; the other root, 6, is rejected.", "5"),
    ("math", "The answer is 5 or 6, and 6 fails the check. The answer is 5.", "5"),
    ("math", "The answer is 7. Wait, I dropped a term: 3 + 5 = 8. So the answer is 8.", "8"),
    ("math", "If we count the start, the answer is 5.", "5"),
    ("math", "The answer is 12, since 3 boxes hold 4 each.", "12"),
    ("math", "\\boxed{0.00001}", "1e-5"),
    ("math", "\\boxed{100000000000000000000}", "1e20"),
    ("math", "\\boxed{0.0000025}", "2.5e-06"),
    ("math", "\\boxed{0.00001}", "1E-5"),
    ("math", "\\boxed{15000000000}", "1.5e+10"),
    ("math", "\\boxed{1 000}", "1000"),
    ("math", "\\boxed{1\u2009000}", "1000"),
    ("math", "\\boxed{1\\,000}", "1000"),
    ("math", "\\boxed{1{,}000}", "1000"),
    ("math", "The answer is 12\u202f345\u202f678.", "12345678"),
    ("math", "The answer is \\boxed{\uff15}.", "5"),
    ("math", "The answer is \u0665.", "5"),  # Arabic-Indic five
    ("gsm8k", "<think>Maybe 20. Or 24.</think>\n#### 24", "24"),
    ("gsm8k", "#### 1 000", "1000"),
    ("gsm8k", "#### \uff15", "5"),
    ("choice", "<think>Maybe (B). Or (C).</think> The answer is (C).", "C"),
    ("numeric", "<think>Maybe 2.5.</think> \\boxed{3.0}", "3"),
]

WRONG = [  # (scorer, response, gold): a value read wrongly before issue 26, now refused
    # inside math a disjunction symbol becomes "or", which the library reads as the set {5, 6}
    # (as it reads $5 \text{ or } 6$): incorrect for gold 5, as the hedge rule's own $5$ or $6$
    ("math", "The answer is $5 \\lor 6$.", "5", "correct"),  # (..., stock math-verify's verdict)
    ("math", "The answer is $\\boxed{5 \\vee 6}$.", "5", "incorrect"),
    ("math", "\\boxed{1 000}", "0", "correct"),
    ("math", "\\boxed{1\u2009000}", "0", "correct"),
    ("math", "\\boxed{1 200}", "201", "correct"),
    ("math", "\\boxed{2 500}", "502", "correct"),
]


@pytest.mark.parametrize(("scorer", "response", "gold"), REFUSED_HEDGES)
def test_hedge_refused(scorer: str, response: str, gold: str) -> None:
    v = S[scorer](response, gold, {})
    assert (v.status, rule_of(v.reason)) == ("incorrect", "hedged"), v


@pytest.mark.parametrize(("scorer", "response", "gold"), PAID)
def test_one_answer_paid(scorer: str, response: str, gold: str) -> None:
    v = S[scorer](response, gold, {})
    assert v.status == "correct", v


@pytest.mark.parametrize(("scorer", "response", "gold", "stock"), WRONG)
def test_values_read_as_written(scorer: str, response: str, gold: str, stock: str) -> None:
    assert S[scorer](response, gold, {}).status == "incorrect"
    assert S["math_verify"](response, gold, {}).status == stock


@pytest.mark.parametrize("scorer", ["math", "gsm8k", "choice", "numeric"])
def test_unclosed_think_is_no_answer(scorer: str) -> None:
    gold = "B" if scorer == "choice" else "6"
    response = ("<think>\nThe answer is (B).\nSo" if scorer == "choice"
                else "<think>\nLet me compute 3+3. It is 6.\nSo the answer is")
    v = S[scorer](response, gold, {})
    assert (v.status, rule_of(v.reason)) == ("no_answer", "unclosed_think"), v
    assert S[scorer](response, gold, {"think": False}).status == "correct"  # option off
    if scorer != "choice":
        assert S["math_verify"](response, "6", {}).status == "correct"  # stock: untouched


def test_think_option() -> None:
    near = "<think>Maybe 5. Or 6.</think> The answer is \\boxed{6}."
    assert S["math"](near, "6", {"think": True}).status == "correct"
    off = S["math"](near, "6", {"think": False})  # the thinking is read as the answer part
    assert (off.status, rule_of(off.reason)) == ("incorrect", "hedged")
    bad = S["math"](near, "6", {"think": "yes"})
    assert bad.status == "error" and "extra.think" in (bad.reason or "")
    # after the last </think> only; nothing there is no answer, even if the thinking had one
    assert S["math"]("<think>The answer is 6.</think>", "6", {}).status == "no_answer"
    assert S["gsm8k"]("<think>#### 6</think>\n#### 7", "7", {}).status == "correct"


def test_ignorable_characters_are_category_cf_and_default_ignorables() -> None:
    cf = {chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"}
    listed = {c for c in map(chr, range(sys.maxunicode + 1)) if re.fullmatch(f"[{IGNORABLE}]", c)}
    assert cf <= listed
    assert {unicodedata.category(c) for c in listed - cf} <= {"Mn", "Lo"}  # selectors, fillers


def test_text_forms() -> None:
    assert plain_text("x\u00b2 + \u00bd, \uff15\uff10 \u0665 o\u00adr") == "x\u00b2 + \u00bd, 50 5 or"
    assert join_digit_groups("1 000 and 12 345 678; 3.141 592; 3 2026; 1 00") == \
        "1000 and 12345678; 3.141 592; 3 2026; 1 00"
    assert join_digit_groups("1\\,000\\,000 vs 1 000\u2009000") == "1000000 vs 1000\u2009000"
    assert [word_value(w) for w in ("six", "thirty-one", "one half", "two thirds")] == [
        6, 31, 0.5, pytest.approx(2 / 3)]
    # the letters IGNORECASE folds to ASCII ones (long s, dotted and dotless i, Kelvin): WORDS
    # matches them, so they have the word's value (a KeyError in the worker before)
    folded = {chr(c) for c in range(128, sys.maxunicode + 1) if re.fullmatch("(?i:[a-z])", chr(c))}
    assert folded == {"\u017f", "\u0130", "\u0131", "\u212a"}
    assert [word_value(w) for w in ("\u017fix", "FIVE", "n\u0131ne", "\u0130")] == [6, 5, 9, None]
    assert S["math"]("The answer is $5$ or \u017fix.", "5", {}).status == "incorrect"


def test_json_number_labels_are_positional_decimals() -> None:
    for label, text in [(1e-05, "0.00001"), (1e20, "100000000000000000000"),
                        (2.5e-06, "0.0000025"), (1.5e10, "15000000000.0"), (0.1, "0.1"),
                        (5.0, "5.0"), (18, "18")]:
        assert label_text(label, "l") == text
        assert ground_truth_text(label, "gt") == text


def _per_class(fold: str) -> dict[tuple[str, str], Counter[str]]:
    out: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in generate():
        if "class" not in r or r["fold"] != fold:
            continue
        v = S[r["scorer"]](r["response"], r["gold"], {})
        c = out[(r["class"], r["kind"])]
        c["rows"] += 1
        c["refused" if v.status != "correct" else "paid"] += 1
        if r["kind"] == "near_miss" and v.status != "correct" and (
                r["scorer"] != "math"
                or S["math_verify"](r["response"], r["gold"], {}).status == "correct"):
            c["lost"] += 1  # refused where the library pays it (any refusal, light scorers)
    return out


@pytest.mark.needs_data
@pytest.mark.parametrize("fold", ["dev", "held_out"])
def test_round2_corpus_per_class(fold: str) -> None:
    table = _per_class(fold)
    assert {c for c, _ in table} >= {"conditional", "parenthetical", "number_words", "symbols",
                                     "invisible", "think_exploration", "unclosed_think",
                                     "digit_groups", "scientific_gold", "restated_words"}
    for (cls, kind), c in sorted(table.items()):
        print(f"{fold:9} {cls:22} {kind:9} rows {c['rows']:4} refused {c['refused']:4} "
              f"paid {c['paid']:4} lost {c['lost']}")
        if kind == "hedge":
            assert c["paid"] <= 0.01 * c["rows"], (cls, c)
        else:
            assert c["lost"] == 0, (cls, c)


def test_through_the_service(client: httpx.Client) -> None:
    """The rules in the workers, the option through ``extra``, the ``unclosed_think`` label in
    ``reward_rule_overrides_total``, float labels at ``/get_reward`` and ``/slime/reward``."""
    def unclosed_count() -> float:
        m = re.search(r'reward_rule_overrides_total\{rule="unclosed_think",scorer="math"\} '
                      r"([0-9.e+]+)", client.get("/metrics").text)
        return float(m.group(1)) if m else 0.0

    before = unclosed_count()
    near = "<think>Maybe 5. Or 6.</think> The answer is \\boxed{6}."
    items = [
        {"response": near, "ground_truth": "6"},
        {"response": near, "ground_truth": "6", "extra": {"think": False}},
        {"response": "<think>\nIt is 6.\nSo the answer is", "ground_truth": "6"},
        {"response": "The answer is 5 (6 if we count the start).", "ground_truth": "5"},
        {"response": "\\boxed{0.00001}", "ground_truth": "1e-5"},
        {"response": "#### 5 \u200dor\u200d 6", "ground_truth": "5", "scorer": "gsm8k"},
        {"response": "\\boxed{1 200}", "ground_truth": "201"},
    ]
    r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
    assert r.status_code == 200, r.text
    got = [(x["status"], rule_of(x["reason"])) for x in r.json()["results"]]
    assert got == [("correct", None), ("incorrect", "hedged"), ("no_answer", "unclosed_think"),
                   ("incorrect", "hedged"), ("correct", None), ("incorrect", "hedged"),
                   ("incorrect", None)]
    assert unclosed_count() >= before + 1

    body = {"query": ["\\boxed{0.00001}"], "prompts": [""], "labels": [1e-05]}
    r = client.post("/get_reward", json=body)
    assert r.status_code == 200 and r.json()["rewards"] == [1.0], r.text
    r = client.post("/slime/reward", json={"prompt": "", "response": "\\boxed{100000000000000000000}",
                                           "label": 1e20})
    assert r.status_code == 200 and r.json() == 1.0, r.text


def test_the_discard_prefilter_answers_as_the_pattern() -> None:
    """``hedge._discarded`` (a stem test before the regex) equals ``_DISCARDED.match`` at every
    tried position of corpus responses and of hand-made clauses (newline inside the words,
    upper case, a non-ASCII clause)."""
    from reward_service.scorers.rules.hedge import _DISCARDED, _discarded

    hand = ["x = 6 is\nrejected.", "6 does not work", "6 ; fails", "6, which is wrong",
            "6 IS RULED OUT", "6 is    \n  extraneous", "6 doesn't hold", "6 is not a solution",
            "6 was wrong", "6 is\u00a0rejected", "6 \u0130s wrong", "6 fa\u0131ls"]
    texts = [r["response"] for r in read_jsonl("corpus.jsonl")[::7]]
    checked = 0
    for t in texts + hand:
        step = 1 if t in hand else max(1, len(t) // 30)
        for pos in range(0, len(t), step):
            assert (_DISCARDED.match(t, pos) is not None) == _discarded(t, pos), (t, pos)
            checked += 1
    assert checked > 10_000
