"""Issue 36: answers per reading (``per_reading``), inequalities against interval golds (rule 4
widened, ``rescued``), and the disagreement audit's finding (rule 8, ``variable``).

Every example runs through the real scorer table the workers build (in-process), a few also
through the live service (``client``); the generated round-3 corpus
(``tests/golden/hedge_corpus_r3.py``) is checked per class and fold. Differential: each
library-facing case also pins stock math-verify's verdict (the ``math_verify`` profile, which
``tests/test_parity.py`` keeps byte-for-byte the library), so a case that stops differing
from the library is noticed.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter

import httpx
import pytest

from reward_service.scorers import rule_of
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.patches import install_patches
from reward_service.scorers.rules.solution_sets import solution_set
from reward_service.scorers.rules.variables import letter_gold
from tests.golden.hedge_corpus_r3 import generate

install_patches()
S = build_scorers()

# class 1: (response, golds); every gold is one reading's value, and each is refused
PER_READING = [
    ("There are 6 arrangements if rotations count as different, 2 if they do not.", ["6", "2"]),
    ("With replacement the probability is 1/4; without replacement it is 1/6.", ["1/4", "1/6"]),
    ("With replacement the probability is $\\frac{1}{4}$; without replacement it is "
     "$\\frac{1}{6}$.", ["\\frac{1}{4}", "\\frac{1}{6}"]),
    ("Assuming integer sides: 12. For real sides: 13.", ["12", "13"]),
    ("Answer: 20 (ordered) / 10 (unordered)", ["20", "10"]),
    ("For ordered pairs the answer is 20; for unordered pairs it is 10.", ["20", "10"]),
    ("If order matters, 20. If not, 10.", ["20", "10"]),
    ("Counting rotations as distinct gives 6; up to rotation there are 2.", ["6", "2"]),
    ("When the coins are distinguishable the answer is 8, and when they are not it is 4.",
     ["8", "4"]),
    ("In the first case the answer is 6, in the second case it is 2.", ["6", "2"]),
    ("If order matters the answer is 20; if not, it is \\boxed{10}.", ["20", "10"]),
]

KEPT = [  # the issue's three near-miss kinds, and a commitment after readings
    ("If x were 3 the sum would be 9, but x = 4, so the sum is 12.", "12"),
    ("In case 1 we get 4, in case 2 we get 6; only case 2 meets the constraint, so the answer "
     "is 6.", "6"),
    ("The answer is 12 whether or not the coins are distinguishable.", "12"),
    ("If order matters, 20. If not, 10. Order matters here, so the answer is 20.", "20"),
    ("For the first seat there are 5 choices, and for the second 4, so the answer is 20.", "20"),
    ("If we count the start, the answer is 5.", "5"),  # one condition, one value (round 2)
]

U = "(-\\infty, 2) \\cup (3, \\infty)"
# class 2: (response, gold, math's verdict, stock math-verify's verdict)
INEQUALITIES = [
    ("So $x < 2$ or $x > 3$.", U, "correct", "incorrect"),
    ("So x < 2 or x > 3.", U, "correct", "incorrect"),
    ("\\boxed{x < 2 \\text{ or } x > 3}", U, "correct", "incorrect"),
    ("\\boxed{x<2 \\lor x>3}", U, "correct", "incorrect"),
    ("\\boxed{x<2, x>3}", U, "correct", "incorrect"),
    ("The answer is $x < 2$ or $x > 3$.", U, "correct", "incorrect"),
    ("$x<2$ or $x>3$", "x \\in " + U, "correct", "incorrect"),
    ("\\boxed{x \\le -1 \\text{ or } x \\ge 4}", "(-\\infty,-1] \\cup [4,\\infty)", "correct",
     "incorrect"),
    ("\\boxed{-1 < x \\le 5}", "(-1, 5]", "correct", "incorrect"),  # chained (round 1)
    ("\\boxed{\\{x \\mid -1 < x \\le 5\\}}", "(-1, 5]", "correct", "incorrect"),
    ("\\boxed{\\{x \\mid x > -1, x \\le 5\\}}", "(-1, 5]", "correct", "incorrect"),
    ("\\boxed{\\{x \\mid x<2 \\text{ or } x>3\\}}", U, "correct", "incorrect"),
    ("\\boxed{\\{x \\in \\mathbb{R} : x<2 \\text{ or } x>3\\}}", U, "correct", "incorrect"),
    ("\\boxed{\\{x : x<2\\}}", "(-\\infty, 2)", "correct", "incorrect"),
    # endpoint controls and other sets: refused
    ("\\boxed{x < 2 \\text{ or } x > 3}", "(-\\infty, 2] \\cup (3, \\infty)", "incorrect",
     "incorrect"),
    ("So x < 2 or x > 3.", "(-\\infty, 2] \\cup (3, \\infty)", "incorrect", "incorrect"),
    ("\\boxed{x < 2 \\text{ or } x > 3}", "(2, 3)", "incorrect", "incorrect"),
    ("\\boxed{x < 2 \\text{ and } x > 3}", U, "incorrect", "incorrect"),
    ("\\boxed{-1 < x < 5}", "(-1, 5]", "incorrect", "incorrect"),
    ("\\boxed{\\{x \\mid -1 < x < 5\\}}", "(-1, 5]", "incorrect", "incorrect"),
    ("\\boxed{\\{x : x\\le 2\\}}", "(-\\infty, 2)", "incorrect", "incorrect"),
    ("\\boxed{x \\le -1 \\text{ or } x > 4}", "(-\\infty,-1] \\cup [4,\\infty)", "incorrect",
     "incorrect"),
    ("\\boxed{\\{y \\mid y<2 \\text{ or } y>3\\}}", "x \\in " + U, "incorrect", "incorrect"),
]

# rule 8: (response, gold, math's verdict, stock math-verify's verdict)
VARIABLES = [
    ("\\boxed{4t}", "4t", "correct", "correct"),
    ("\\boxed{4}", "4t", "incorrect", "correct"),  # the library reads the gold 4t as 4
    ("The answer is 4.", "4t", "incorrect", "correct"),
    ("\\boxed{t \\cdot 4}", "4t", "correct", "incorrect"),
    ("\\boxed{5t}", "4t", "incorrect", "incorrect"),
    ("\\boxed{\\frac{1}{2}h}", "\\frac{1}{2}h", "correct", "correct"),
    ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}h", "incorrect", "correct"),
    ("\\boxed{\\frac{h}{2}}", "\\frac{1}{2}h", "correct", "incorrect"),
    ("\\boxed{10}", "10\\text{ cm}", "correct", "correct"),  # a unit in \text: the library's
    ("\\boxed{10\\text{ cm}}", "10\\text{ cm}", "correct", "correct"),
]


@pytest.mark.parametrize(("response", "golds"), PER_READING)
def test_per_reading_refused_for_every_reading(response: str, golds: list[str]) -> None:
    for gold in golds:
        v = S["math"](response, gold, {})
        assert v.status == "incorrect", (gold, v)
        # the library pays the reading its extraction takes (the last value, or "Answer:")
    assert any(S["math_verify"](response, g, {}).status == "correct" for g in golds)


@pytest.mark.parametrize(("response", "golds"), PER_READING[:2])
def test_per_reading_label(response: str, golds: list[str]) -> None:
    paid_by_library = [g for g in golds if S["math_verify"](response, g, {}).status == "correct"]
    v = S["math"](response, paid_by_library[0], {})
    assert rule_of(v.reason) == "per_reading" and "no commitment" in (v.reason or ""), v


@pytest.mark.parametrize(("response", "gold"), KEPT)
def test_commitments_kept(response: str, gold: str) -> None:
    v = S["math"](response, gold, {})
    assert v.status == "correct", v


@pytest.mark.parametrize(("response", "gold", "ours", "stock"), INEQUALITIES)
def test_inequalities_as_sets(response: str, gold: str, ours: str, stock: str) -> None:
    v = S["math"](response, gold, {})
    assert v.status == ours, v
    if ours == "correct" and stock == "incorrect":
        assert rule_of(v.reason) == "rescued", v
    assert S["math_verify"](response, gold, {}).status == stock


def test_solution_set_reading() -> None:
    assert solution_set("x < 2 or x > 3") is not None
    assert solution_set("x < 2 or y > 3") is None  # two variables
    assert solution_set("x = 2 or x = 3") is None  # equations are the library's
    assert solution_set("2 < 3") is None  # no variable
    assert solution_set("x < 1 or " * 9 + "x > 3") is None  # more than 8 pieces


@pytest.mark.parametrize(("response", "gold", "ours", "stock"), VARIABLES)
def test_gold_letter_is_a_variable(response: str, gold: str, ours: str, stock: str) -> None:
    v = S["math"](response, gold, {})
    assert v.status == ours, v
    if ours != stock:
        assert rule_of(v.reason) == "variable", v
    assert S["math_verify"](response, gold, {}).status == stock


def test_letter_gold_only_for_a_factor() -> None:
    assert letter_gold("4t") == "t"
    assert letter_gold("\\frac{1}{2}h") == "h"
    assert letter_gold("4x") is None  # not in the library's unit list: it keeps it
    assert letter_gold("10\\text{ m}") is None and letter_gold("5 m") is None
    assert letter_gold("12") is None


@pytest.mark.needs_data
@pytest.mark.parametrize("fold", ["dev", "held_out"])
def test_round3_corpus_per_class(fold: str) -> None:
    from bench.correctness.r3 import round3_figures

    table = round3_figures(S, fold)
    assert {cls for cls, _ in table} == {"per_reading", "counterfactual_commit", "case_reject",
                                         "every_reading", "inequality_forms",
                                         "endpoint_controls"}
    for (cls, kind), c in sorted(table.items()):
        print(f"{fold:9} {cls:22} {kind:9} rows {c['rows']:4} refused {c['refused']:4} "
              f"paid {c['paid']:4}")
        if kind == "hedge":
            assert c["paid"] == 0, (cls, c)
        else:
            assert c["refused"] == 0, (cls, c)


@pytest.mark.needs_data
def test_round3_hedges_are_paid_by_the_library() -> None:
    """Without the rules the class is paid: stock math-verify pays one reading of every
    per-reading response (half the rows) and none of the inequality forms."""
    paid = Counter(
        (r["class"], S["math_verify"](r["response"], r["gold"], {}).status == "correct")
        for r in generate() if r["class"] in ("per_reading", "inequality_forms"))
    assert paid[("per_reading", True)] >= 0.45 * (paid[("per_reading", True)]
                                                  + paid[("per_reading", False)])
    assert paid[("inequality_forms", True)] == 0


def test_through_the_service(client: httpx.Client) -> None:
    """The rules in the workers, and their labels in ``reward_rule_overrides_total``."""
    def count(rule: str) -> float:
        m = re.search(r'reward_rule_overrides_total\{rule="' + rule + r'",scorer="math"\} '
                      r"([0-9.e+]+)", client.get("/metrics").text)
        return float(m.group(1)) if m else 0.0

    before = {rule: count(rule) for rule in ("per_reading", "rescued", "variable")}
    items = [
        {"response": "Answer: 20 (ordered) / 10 (unordered)", "ground_truth": "20"},
        {"response": "The answer is 12 whether or not the coins are distinguishable.",
         "ground_truth": "12"},
        {"response": "So $x < 2$ or $x > 3$.", "ground_truth": U},
        {"response": "\\boxed{x < 2 \\text{ or } x > 3}",
         "ground_truth": "(-\\infty, 2] \\cup (3, \\infty)"},
        {"response": "\\boxed{4}", "ground_truth": "4t"},
    ]
    r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
    assert r.status_code == 200, r.text
    got = [(x["status"], rule_of(x["reason"])) for x in r.json()["results"]]
    assert got == [("incorrect", "per_reading"), ("correct", None), ("correct", "rescued"),
                   ("incorrect", None), ("incorrect", "variable")]
    after = {rule: count(rule) for rule in before}
    assert all(after[rule] >= before[rule] + 1 for rule in before), (before, after)


@pytest.mark.needs_data
def test_condition_gate_answers_as_the_pattern() -> None:
    """``readings._may_hold_condition`` (a lower-case stem test, then the pattern on the lower
    case) says what ``_condition`` on the sentence says, on every sentence of corpus responses, the round-3 corpus and
    hand-made ones (upper case, a line break in ``up to``, a non-ASCII sentence)."""
    from reward_service.scorers.rules.readings import _condition, _may_hold_condition
    from tests.helpers import read_jsonl

    hand = ["IF NOT, 10", "Up\nto rotation, 2", "(Ordered) 20", "\u017fuppose it is 5",
            "For real sides: 13", "ways for the committee", "and FOR odd n, 3", "x; for y, 2",
            "the answer is 5 (mean)", "case\t3 gives 4", "Assuming x: 5", "the value is 5"]
    texts = [r["response"] for r in read_jsonl("corpus.jsonl")[::5]]
    texts += [r["response"] for r in generate()] + hand
    checked = 0
    for t in texts:
        cuts = [0, *(m.end() for m in re.finditer(r"[.!?]\s|\n", t)), len(t)]
        for s0, s1 in itertools.pairwise(cuts):
            assert _may_hold_condition(t, s0, s1) == (_condition(t[s0:s1]) is not None), (
                t[s0:s1])
            checked += 1
    assert checked > 10_000


@pytest.mark.needs_data
def test_disagreement_audit_is_all_judged() -> None:
    """The audit of docs/CORRECTNESS.md holds: ``math`` and ``math_verify`` agree on every
    response of ``corpus.jsonl`` and of the Qwen file; the items where a profile and the label
    differ, and the groups the second reading lists, all have a judgement."""
    from bench.correctness import r3 as correctness_r3

    fig = correctness_r3.audit(S)
    assert len(fig["rows"]) == 6526 + 800
    assert fig["profile_diff"] == []
    assert {r["gold"] for r in fig["label_diff"]} == {"10{,}000"}
    lines = correctness_r3.audit_section(fig)
    assert not any("not yet judged" in line for line in lines)
    assert "| library right | 0 |" in lines


def test_round3_rules_are_linear_on_adversarial_text() -> None:
    """Shapes aimed at the new rules' regexes (unclosed ``\\(`` runs for the math mask, long
    condition runs, a huge set-builder answer against a set gold): each well under the bound,
    in CPU time. The bound is the point, with a wide margin (a quadratic shape takes minutes)."""
    import time

    n = 20000
    shapes = [
        ("If not, " + "\\(" * n + " the answer is 5.", "5"),
        ("The answer is 5 if " + "if " * n, "5"),
        ("The answer is 5 if x. " + "(ordered) 6, " * (n // 10), "5"),
        ("If a, 6; if b, " + "x" * n + " 5", "5"),
        ("\\boxed{\\{x \\mid " + "x < 1 or " * n + "x > 3\\}}", U),
        ("So " + "x < 1 or " * n + "x > 3.", U),
        ("\\boxed{4" + "t" * n + "}", "4t"),
    ]
    for response, gold in shapes:
        t = time.process_time()
        S["math"](response, gold, {})
        assert time.process_time() - t < 10.0, response[:30]
