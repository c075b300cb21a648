"""Scorers as pure functions (no processes), and routing from data_source."""

from __future__ import annotations

import pytest

from reward_service.scorers import SCORERS, UnknownScorerError, resolve_scorer
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.math_verify_scorer import boxed_gold
from reward_service.scorers.numbers import last_boxed, to_fraction

S = build_scorers()


def st(scorer: str, response: str, gold: str, **params: object) -> str:
    return S[scorer](response, gold, params).status


@pytest.mark.parametrize(
    ("response", "gold", "status"),
    [
        ("Janet makes 9 * 2 = $18 a day.\n#### 18", "18", "correct"),
        ("The total is 1,234 dollars.", "1234", "correct"),
        ("#### 18.00", "18", "correct"),
        ("#### 17 ... wait, 18", "18", "incorrect"),  # the marked answer wins over later text
        ("so -5 degrees", "-5", "correct"),
        ("no digits here", "18", "no_answer"),
        ("#### 3", "three", "bad_ground_truth"),
        ("... a long response " * 500 + "#### 42", "#### 42", "correct"),  # no character clip
    ],
)
def test_gsm8k(response: str, gold: str, status: str) -> None:
    assert st("gsm8k", response, gold) == status


@pytest.mark.parametrize(
    ("response", "gold", "params", "status"),
    [
        ("\\boxed{0.3333333}", "1/3", {}, "correct"),
        ("\\boxed{0.333}", "1/3", {}, "incorrect"),
        ("\\boxed{0.333}", "1/3", {"rel_tol": 1e-2}, "correct"),
        ("\\boxed{\\frac{3}{4}}", "0.75", {}, "correct"),
        ("about 2.5e3", "2500", {}, "correct"),
        ("\\boxed{50\\%}", "50", {}, "correct"),
        ("\\boxed{x+1}", "3", {}, "no_answer"),
        ("3", "3", {"rel_tol": -1}, "error"),
        ("3", "pi", {}, "bad_ground_truth"),
    ],
)
def test_numeric(response: str, gold: str, params: dict, status: str) -> None:
    assert st("numeric", response, gold, **params) == status


@pytest.mark.parametrize(
    ("response", "gold", "status"),
    [
        ("The answer is (B).", "B", "correct"),
        ("Answer: C", "(C)", "correct"),
        ("I first thought (A) but the answer is (D)", "D", "correct"),
        ("\\boxed{E}", "E", "correct"),
        ("\\boxed{E}", "A", "incorrect"),
        ("b", "B", "correct"),
        ("no letter", "B", "no_answer"),
        ("(B)", "Z", "bad_ground_truth"),
    ],
)
def test_choice(response: str, gold: str, status: str) -> None:
    assert st("choice", response, gold) == status


def test_choice_respects_allowed_letters() -> None:
    assert st("choice", "The answer is (E).", "A", choices="ABCD") == "no_answer"


@pytest.mark.parametrize(
    ("response", "gold", "status"),
    [
        ("Therefore $\\boxed{\\frac{1}{2}}$.", "0.5", "correct"),
        ("$x \\in [1, 2)$, so \\boxed{[1,2)}", "[1,2)", "correct"),
        ("\\boxed{2}", "3", "incorrect"),
        ("I cannot solve this.", "3", "no_answer"),
        ("\\boxed{2}", "", "bad_ground_truth"),
        ("\\boxed{2}", "\\boxed{2}", "correct"),  # an already boxed gold is not boxed twice
    ],
)
def test_math_verify(response: str, gold: str, status: str) -> None:
    assert st("math_verify", response, gold) == status


def test_math_verify_reports_what_it_extracted() -> None:
    v = S["math_verify"]("so $\\boxed{\\frac{6}{4}}$", "3/2", {})
    assert v.status == "correct" and v.extracted == "\\frac{6}{4}" and v.extracted_gold


def test_boxed_gold_and_helpers() -> None:
    assert boxed_gold("5") == "\\boxed{5}"
    assert boxed_gold("\\boxed{5}") == "\\boxed{5}"
    assert last_boxed("a \\boxed{1} b \\boxed{\\frac{1}{2}} c") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{unclosed") is None
    assert to_fraction("1" * 1000) is None  # absurd literals are refused, not computed


@pytest.mark.parametrize(
    ("scorer", "source", "expected"),
    [
        (None, "openai/gsm8k", "gsm8k"),
        (None, "lighteval/MATH", "math_verify"),
        (None, "HuggingFaceH4/MATH-500", "math_verify"),
        (None, "numina_olympiads", "math_verify"),
        (None, "aime2024", "math_verify"),
        (None, "some/unknown-set", "math_verify"),
        (None, None, "math_verify"),
        ("gsm8k", "lighteval/MATH", "gsm8k"),  # explicit scorer wins
        ("math", None, "math_verify"),
        ("mcq", None, "choice"),
    ],
)
def test_routing(scorer: str | None, source: str | None, expected: str) -> None:
    assert resolve_scorer(scorer, source) == expected


def test_unknown_scorer_and_probe_names_are_refused() -> None:
    with pytest.raises(UnknownScorerError):
        resolve_scorer("nope", None)
    with pytest.raises(UnknownScorerError):
        resolve_scorer("__probe__:fork", None)
    assert set(SCORERS) == set(S)
