"""Two-stage ANTLR parsing (``reward_service/scorers/patches/fast_parse.py``) gives the library's trees.

The differential test collects every LaTeX string stock math-verify hands to latex2sympy2
while parsing the corpus (responses and boxed golds), OlympiadBench's solutions and answers
and the golden suite (in a fresh interpreter, so nothing of ours is installed), then parses
each with the library's own parser (LL, its error listeners) and with stage one (SLL, bail
out): wherever stage one returns a tree, the library must return the very same tree (rule by
rule, token by token); wherever the library fails, stage one must fail too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from antlr4.tree.Tree import TerminalNode
from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy, latex2sympy
from sympy import srepr

from reward_service.scorers.patches import fast_parse
from tests.helpers import ROOT

_COLLECT = r"""
import json, logging, sys
sys.path.insert(0, sys.argv[1])
logging.getLogger("math_verify").setLevel(logging.CRITICAL)
import math_verify.parser as p
from math_verify import parse
from sympy import Number
from tests.helpers import read_jsonl
assert p.parse_latex_cached.cache_info().maxsize == 20 and p.Number is Number, "patched"
seen = {}
library = p.latex2sympy
def record(latex, *args, **kwargs):
    seen.setdefault(latex, None)
    return library(latex, *args, **kwargs)
p.latex2sympy = record
texts = []
for r in read_jsonl("corpus.jsonl"):
    texts += [r["response"], "\\boxed{" + r["gold"] + "}"]
for r in read_jsonl("qwen25math_olympiadbench_test.jsonl"):
    texts += [r["solution"][0], "\\boxed{" + r["final_answer"][0].strip("$") + "}"]
for name in ("cases.jsonl", "math_verify_cases.jsonl"):
    with open(sys.argv[1] + "/tests/golden/" + name) as fh:
        for line in fh:
            r = json.loads(line)
            texts += [r.get("response") or r.get("pred") or "", r["gold"],
                      "\\boxed{" + r["gold"] + "}"]
for text in texts:
    parse(text, parsing_timeout=None)
json.dump(list(seen), sys.stdout)
"""


def _shape(node: Any) -> tuple[Any, ...]:
    """A parse tree as nested tuples: rule index and alternative, or token type, text and
    position."""
    if isinstance(node, TerminalNode):
        tok = node.getSymbol()
        return ("token", tok.type, tok.text, tok.start, tok.stop)
    return (node.getRuleIndex(), node.getAltNumber(),
            tuple(_shape(node.getChild(i)) for i in range(node.getChildCount())))


def _stock(latex: str) -> tuple[Any, ...] | None:
    try:
        return _shape(fast_parse.stock_create_parser(_Latex2Sympy(), latex).math())
    except Exception:
        return None


def _sll(latex: str) -> tuple[Any, ...] | None:
    try:
        return _shape(fast_parse.sll_tree(latex))
    except Exception:
        return None


@pytest.fixture(scope="module")
def extracted() -> list[str]:
    proc = subprocess.run([sys.executable, "-c", _COLLECT, str(ROOT)], capture_output=True,
                          text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    strings: list[str] = json.loads(proc.stdout)
    return strings


@pytest.mark.needs_data
def test_sll_trees_equal_the_librarys_on_every_extracted_string(extracted: list[str]) -> None:
    assert len(extracted) > 1000
    sll_ok = stock_ok = 0
    differ = []
    for latex in extracted:
        fast, stock = _sll(latex), _stock(latex)
        sll_ok += fast is not None
        stock_ok += stock is not None
        if fast is not None and fast != stock:
            differ.append(latex)
    assert differ == []
    # live: stage one decides most strings, and some need stage two (real syntax errors, or
    # decisions SLL cannot make)
    assert sll_ok > 0.8 * len(extracted)
    assert stock_ok > sll_ok


@pytest.mark.parametrize("latex", ["b_{i}", "A_{4}=6", "x^2+33x-33", "f(n)=n^{2}"])
def test_strings_sll_cannot_decide_fall_back_to_the_library(latex: str) -> None:
    """Control: these fail in stage one but parse with full LL; installed, they still parse,
    through stage two, to the library's sympy result."""
    with pytest.raises(Exception):  # noqa: B017 - whatever ANTLR raises
        fast_parse.sll_tree(latex)
    stock = _stock(latex)
    assert stock is not None
    fast_parse.install()
    before = fast_parse.STATS["ll"]
    assert _shape(_Latex2Sympy().create_parser(latex).math()) == stock
    assert fast_parse.STATS["ll"] == before + 1


@pytest.mark.parametrize("latex", ["\\frac{1}{2}", "(0, \\frac{5}{2})", "n=9", "x \\in [1, 2)",
                                   "\\sqrt{2}+3i", "(x, y, z)=(1,2,3)"])
def test_installed_parser_gives_the_librarys_sympy_result(latex: str) -> None:
    fast_parse.install()
    before = fast_parse.STATS["sll"]
    ours = latex2sympy(latex, normalization_config=None)
    assert fast_parse.STATS["sll"] == before + 1
    stock = _Latex2Sympy()
    stock.create_parser = lambda s: fast_parse.stock_create_parser(stock, s)  # type: ignore[method-assign]
    assert srepr(ours) == srepr(stock.parse(latex))


def test_syntax_errors_still_raise() -> None:
    fast_parse.install()
    for latex in ("\\frac{1}{", "x ==== ", "\\boxed{", "]["):
        with pytest.raises(Exception):  # noqa: B017 - the library's Exception
            latex2sympy(latex, normalization_config=None)
        assert _stock(latex) is None


def test_normalize_memo_returns_the_librarys_text() -> None:
    import math_verify.parser as mv_parser
    from latex2sympy2_extended.math_normalization import NormalizationConfig
    from latex2sympy2_extended.math_normalization import normalize_latex as library

    fast_parse.install()
    memo = mv_parser.normalize_latex
    assert memo is not library and memo.memoised  # type: ignore[attr-defined]
    config = NormalizationConfig(basic_latex=True, units=True, malformed_operators=False,
                                 nits=True, boxed="last", equations=True)
    texts = ["\\frac12 \\text{ cm}", "\\boxed{\\dfrac{1}{2}}", "x = 5\\%", "0.5", "2\\sqrt3"]
    for text in texts + texts:
        assert memo(text, config=config) == library(text, config)
    assert memo.cache_info().hits >= len(texts)  # type: ignore[attr-defined]
    long = "x" * (fast_parse.NORMALIZE_MAX_CHARS + 1)
    assert memo(long, config) == library(long, config)


_TREES = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from reward_service.scorers.patches import install_patches
install_patches()
from tests.test_fast_parse import _sll, _stock
from reward_service.scorers.patches.warmup import dfa_states, warm_parser
if sys.argv[2] == "warm":
    warm_parser()
before = dfa_states()
strings = json.load(sys.stdin)
out = [[_sll(s), _stock(s)] for s in strings]
json.dump({"dfa_before": before, "dfa_after": dfa_states(), "trees": out}, sys.stdout)
"""


@pytest.mark.needs_data
def test_the_zygotes_warm_up_leaves_every_tree_as_a_cold_parser_gives_it(
        extracted: list[str]) -> None:
    """The warm-up (``scorers/patches/warmup.py``) only fills ANTLR's prediction cache: in two fresh
    interpreters, one cold and one warmed, both stages parse every extracted string to the same
    tree (or both fail)."""
    procs = {mode: subprocess.Popen([sys.executable, "-c", _TREES, str(ROOT), mode],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
             for mode in ("cold", "warm")}
    got = {}
    for mode, proc in procs.items():
        out, err = proc.communicate(json.dumps(extracted), timeout=900)
        assert proc.returncode == 0, err[-2000:]
        got[mode] = json.loads(out)
    cold, warm = got["cold"], got["warm"]
    # live: the warm one starts with many decisions cached, the cold one with few
    assert warm["dfa_before"] > 1000 > cold["dfa_before"] * 3
    assert len(cold["trees"]) == len(warm["trees"]) == len(extracted)
    differ = [s for s, c, w in zip(extracted, cold["trees"], warm["trees"], strict=True) if c != w]
    assert differ == []
    assert sum(sll is not None for sll, _ in warm["trees"]) > 0.8 * len(extracted)
