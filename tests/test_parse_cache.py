"""The worker's shortcuts into math-verify return exactly what the library computes.

``reward_service/scorers/parse_cache.py`` builds plain integers without latex2sympy and
memoises ``Number(text)``; ``MathVerifyScorer.verify`` memoises verify on the answer's
structure. Each is compared here with the library function it stands in for, on the inputs
it takes (``integer_verdict`` with ``verify``); ``tests/test_parity.py`` compares whole
verdicts on the corpus.
"""

from __future__ import annotations

import random

import math_verify.parser as mv_parser
import pytest
import sympy
from latex2sympy2_extended.sets import FiniteSet as L2SFiniteSet
from math_verify import verify
from sympy import Integer, Number, srepr

from reward_service.scorers import parse_cache
from reward_service.scorers.math_verify_scorer import (
    MathVerifyScorer,
    _answer_key,
    integer_verdict,
)
from reward_service.scorers.patches import install_patches


def _integers() -> list[str]:
    rnd = random.Random(7)
    out = [str(i) for i in range(-300, 3000)]
    out += ["0", "-0", "00", "007", "-007", "000000000000000000000000000000"]
    out += ["".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 30)))
            for _ in range(300)]
    out += ["-" + x for x in out[-100:]]
    return out


def _library_latex(text: str) -> object:
    """latex2sympy as math-verify's ``parse_latex_cached`` calls it, with no memo in front."""
    fn = mv_parser.parse_latex_cached
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn(text)


@pytest.mark.parametrize("chunk", range(4))
def test_integer_shortcut_equals_latex2sympy(chunk: int) -> None:
    shortcut = parse_cache._latex_shortcut(lambda s: pytest.fail(f"not a shortcut: {s!r}"))
    texts = _integers()[chunk::4]
    for text in texts:
        assert parse_cache.PLAIN_INTEGER.fullmatch(text)
        ours, lib = shortcut(text), _library_latex(text)
        assert type(ours) is type(lib) and srepr(ours) == srepr(lib), text


@pytest.mark.parametrize("text", ["1.5", "1,000", "+5", " 5", "5 ", "٣", "1_000", "1" * 31,
                                  "\\frac{1}{2}", "-", "", "5%"])
def test_other_text_goes_to_latex2sympy(text: str) -> None:
    assert not parse_cache.PLAIN_INTEGER.fullmatch(text)


def test_installed_memos_answer_like_the_library() -> None:
    install_patches()  # installs the memos, as a worker does
    for text in ["374", "-49", "\\frac{3}{8}", "1\\frac{9}{10}", "x - 35", "3,250", "13.18"]:
        a, b = mv_parser.parse_latex_cached(text), _library_latex(text)
        assert type(a) is type(b) and srepr(a) == srepr(b), text
    numbers = ["18", "0", "3.14", "0.000001", "123456789012345678901234567890", "2.50", "1e5"]
    for text in numbers * 2:  # the second round is answered by the memo
        a, b = mv_parser.Number(text), Number(text)
        assert type(a) is type(b) and srepr(a) == srepr(b), text
    assert mv_parser.Number.cache_info().hits >= len(numbers)  # type: ignore[attr-defined]


def test_answer_key_tells_apart_what_verify_could() -> None:
    x = sympy.Symbol("x")
    pairs = [
        ([Integer(2), "2"], [sympy.Float("2.0"), "2"]),  # same text, other number type
        ([sympy.Float("0.1", 15), "0.1"], [sympy.Float("0.1", 30), "0.1"]),  # precision
        ([sympy.Symbol("x", real=True), "x"], [x, "x"]),  # assumptions
        ([sympy.FiniteSet(1, 2), "1,2"], [L2SFiniteSet(1, 2), "1,2"]),  # same name, other class
        ([Integer(2), "2"], [Integer(2), "2.0"]),  # same value, other text
    ]
    for a, b in pairs:
        ka, kb = _answer_key(a), _answer_key(b)
        assert ka is not None and kb is not None and ka != kb, (a, b)
    assert _answer_key([Integer(2), "2"]) == _answer_key([Integer(2), "2"])
    assert _answer_key([sympy.Matrix([[1]]), "m"]) is None  # not a Basic: never memoised
    assert _answer_key(["9" * (parse_cache.MAX_KEY_CHARS + 1)]) is None
    # no printing or evaluation: a matrix expression (srepr of it raised) gets a key
    a, b = sympy.MatrixSymbol("A", 2, 2), sympy.MatrixSymbol("B", 2, 2)
    assert _answer_key([a * b + a, "AB+A"]) == _answer_key([a * b + a, "AB+A"])
    deep = x
    for _ in range(3000):
        deep = sympy.Pow(deep, 2, evaluate=False)
    assert _answer_key([deep, "deep"]) is None  # too many nodes: verified every time


def test_verify_memo_returns_the_first_answer_and_counts_hits() -> None:
    s = MathVerifyScorer()
    verdicts = [s("so \\boxed{" + a + "}", "\\frac{1}{2}", {}).status
                for a in ["\\frac{1}{2}", "2", "\\frac{2}{4}", "2", "\\frac{1}{2}", "x"]]
    assert verdicts == ["correct", "incorrect", "correct", "incorrect", "correct", "incorrect"]
    assert len(s._verdicts) == 4  # repeats were answered from the memo, not verified again


def _integer_lists() -> list[list[object]]:
    """verify's inputs as parse builds them ([sympy object, string]) and odd mixes."""
    rnd = random.Random(11)
    values = [0, 1, -1, 2, 7, 10, 100, -100, 12345678901234567890, -(10**40), 10**40]
    values += [rnd.randint(-10**6, 10**6) for _ in range(40)]
    out: list[list[object]] = []
    for v in values:
        out.append([Integer(v), str(v)])
        out.append([Integer(v), f" {v} "])
        out.append([Integer(v)])
        out.append([str(v)])
    out += [[], [""], [" "], ["x"], [Integer(3), ""], ["3", Integer(3)]]
    return out


def test_integer_verdict_equals_verify() -> None:
    """Where it answers, the verify fast path gives verify's answer (all pairs of lists)."""
    lists = _integer_lists()
    rnd = random.Random(5)
    pairs = [(a, b) for a in lists for b in lists if rnd.random() < 0.25]
    answered = 0
    for gold, pred in pairs:
        fast = integer_verdict(gold, pred)
        if fast is None:
            continue
        answered += 1
        assert fast == verify(gold, pred, timeout_seconds=None), (gold, pred)
    assert answered == len(pairs)  # these are all integer/string pairs


def test_integer_verdict_defers_everything_else() -> None:
    x = sympy.Symbol("x")
    for other in (sympy.Float(2.0), sympy.Rational(1, 2), x + 1, sympy.FiniteSet(1, 2),
                  sympy.Eq(x, 2), sympy.Matrix([[1]])):
        assert integer_verdict([Integer(2), "2"], [other, "2.0"]) is None
        assert integer_verdict([other, "2.0"], [Integer(2), "2"]) is None
