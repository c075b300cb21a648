"""The worker's shortcuts into math-verify return exactly what the library computes.

``reward_service/scorers/patches/parse_cache.py`` builds plain integers without latex2sympy and
memoises ``Number(text)``; ``MathVerifyScorer.verify`` memoises verify on the answer's
structure. Each is compared here with the library function it stands in for, on the inputs
it takes (``integer_verdict`` with ``verify``); ``tests/test_parity.py`` compares whole
verdicts on the corpus.
"""

from __future__ import annotations

import json
import random

import math_verify.parser as mv_parser
import pytest
import sympy
from latex2sympy2_extended.sets import FiniteSet as L2SFiniteSet
from math_verify import parse, verify
from sympy import Integer, Number, srepr

from reward_service.scorers.math_verify_scorer import (
    MathVerifyScorer,
    _answer_key,
    boxed_gold,
    integer_verdict,
)
from reward_service.scorers.patches import install_patches, parse_cache
from tests.helpers import ROOT, read_jsonl


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
    # expressions: numbers are decided without verify (integer_verdict), never memoised
    verdicts = [s("so \\boxed{" + a + "}", "x+1", {}).status
                for a in ["x+1", "2x", "1+x", "2x", "x+1", "y"]]
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
    pct = sympy.Mul(2, sympy.UnevaluatedExpr(sympy.Rational(1, 100)), evaluate=False)
    for other in (sympy.Float(2.0), sympy.Float("2.0004"), sympy.Float(2.0, 10), x + 1,
                  sympy.FiniteSet(1, 2), sympy.Eq(x, 2), sympy.Matrix([[1]]), pct,
                  sympy.oo, sympy.nan, sympy.Float(2) ** 2000, sympy.pi):
        assert integer_verdict([Integer(2), "2"], [other, "2.0"]) is None, other
        assert integer_verdict([other, "2.0"], [Integer(2), "2"]) is None, other


def _numbers() -> list[object]:
    """Numbers as parse builds them, and the edges of the float shortcut: values just inside
    and just outside its margin, huge and tiny magnitudes, high precision, zeros."""
    F, R = sympy.Float, sympy.Rational
    out: list[object] = [Integer(v) for v in (0, 1, -1, 2, 3, 10, 460, 1000, 10**6, 10**20)]
    out += [R(1, 2), R(1, 3), R(-7, 4), R(2, 3), R(1, 2**98), R(10**20 + 1, 10**20)]
    out += [F(t) for t in ("0", "0.5", "2.0", "10.95", "10.9500001", "0.333333", "0.3333",
                           "0.666667", "-1.75", "1e20", "100000000000000000000.0", "459.999",
                           "460.0005", "460.002", "1.0e-9", "3.14159", "-0.0", "1e300",
                           "2.0001", "1.999", "1000000.5", "1000001.5")]
    out += [F("0.1", 30), F("460.00000000000000000001", 40), F("1e-30", 20)]
    return out


def test_number_verdict_equals_verify_on_edge_numbers() -> None:
    values = _numbers()
    answered = 0
    for g in values:
        for t in values:
            for gold, pred in (([g], [t]), ([g, str(g)], [t, str(t)])):
                fast = integer_verdict(gold, pred)
                if fast is None:
                    continue
                answered += 1
                assert fast == verify(gold, pred, timeout_seconds=None), (gold, pred)
    assert answered > len(values) ** 2  # most pairs are decided; the close ones are not


def _parsed_rows() -> list[tuple[list[object], list[object]]]:
    """(parse(gold), parse(response)) of every corpus row, OlympiadBench solution and golden
    case."""
    rows = [(r["gold"], r["response"]) for r in read_jsonl("corpus.jsonl")]
    rows += [(r["final_answer"][0].strip("$"), r["solution"][0])
             for r in read_jsonl("qwen25math_olympiadbench_test.jsonl")]
    for name in ("cases.jsonl", "math_verify_cases.jsonl"):
        with open(ROOT / "tests" / "golden" / name) as fh:
            rows += [(c["gold"], c.get("response", c.get("pred", ""))) for c in map(json.loads, fh)]
    return [(parse(boxed_gold(g), parsing_timeout=None),  # type: ignore[arg-type]
             parse(r, parsing_timeout=None))  # type: ignore[arg-type]
            for g, r in rows]


@pytest.mark.needs_data
def test_number_verdict_equals_verify_on_every_corpus_and_golden_pair() -> None:
    """On every (gold, answer) that the corpus, OlympiadBench and the golden suite parse to,
    and on pairs of the numbers they hold crossed with each other, the shortcut (where it
    answers) is verify's verdict."""
    parsed = _parsed_rows()
    answered = floats = 0
    for gold, pred in parsed:
        fast = integer_verdict(gold, pred)
        if fast is not None:
            answered += 1
            floats += any(isinstance(x, sympy.Float) for x in [*gold, *pred])
            assert fast == verify(gold, pred, timeout_seconds=None), (gold, pred)
    assert answered > 0.8 * len(parsed) and floats > 100, (answered, floats)
    numbers = sorted({x for g, p in parsed for x in [*g, *p] if isinstance(x, Number)}, key=str)
    rnd = random.Random(3)
    for g, t in [(rnd.choice(numbers), rnd.choice(numbers)) for _ in range(1500)]:
        fast = integer_verdict([g], [t])
        if fast is not None:
            assert fast == verify([g], [t], timeout_seconds=None), (g, t)
