"""Two-stage ANTLR parsing for latex2sympy2_extended: SLL first, full LL only when SLL fails.

latex2sympy2_extended parses every LaTeX string with a fresh ``PSLexer``/``PSParser`` in
ANTLR's default LL prediction mode, whose adaptive prediction falls back to full-context
(LL) simulation of the grammar's ATN whenever SLL prediction sees a conflict. Full-context
results are never stored in ANTLR's DFA cache, so the same expensive simulation runs again on
every call that meets such a decision.

ANTLR documents the standard remedy ("two-stage parsing", ``PredictionMode.SLL``): parse with
SLL prediction and the ``BailErrorStrategy`` first. SLL "either returns the same parse tree as
LL would, or reports a syntax error"; a syntax error may be a real one or a decision that
needs full context, so only then parse again exactly as the library does (LL, its own error
listeners). The tree, hence the sympy result, is the library's whenever stage one succeeds,
and stage two *is* the library's code path, so every verdict is unchanged.
``tests/test_fast_parse.py`` compares both parsers' trees and sympy results on every LaTeX
string that math-verify extracts from the corpus and the golden suite.

Stage one only needs the grammar's ``math`` rule; the conversion (the visitor that builds
sympy objects) is the library's ``_Latex2Sympy.parse`` unchanged: :func:`install` replaces only
``_Latex2Sympy.create_parser``, returning an object whose ``math()`` runs the two stages.

Building the lexer and parser per call costs about 5 µs (the ATN and DFA are class-level and
shared), under 0.3% of a parse, so they are not reused across calls.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import math_verify.parser as _mv_parser
from antlr4 import CommonTokenStream, InputStream
from antlr4.atn.PredictionMode import PredictionMode
from antlr4.error.ErrorListener import ErrorListener
from antlr4.error.ErrorStrategy import BailErrorStrategy
from latex2sympy2_extended.antlr_parser import PSLexer, PSParser
from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

import reward_service.scorers.patches.fast_regex as fast_regex

__all__ = ["STATS", "TwoStage", "install", "sll_tree", "stock_create_parser"]

#: how often each stage produced the tree (per process; for profiles and tests)
STATS = {"sll": 0, "ll": 0}


class _LexError(Exception):
    pass


class _RaiseOnLexError(ErrorListener):
    """Stage one's lexer listener: any token-recognition error ends stage one (stage two then
    meets it again through the library's own listener)."""

    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int,
                    msg: str, e: Any) -> None:
        raise _LexError(msg)


_LEX_LISTENER = _RaiseOnLexError()


def sll_tree(latex: str) -> Any:
    """The ``math`` rule's parse tree with SLL prediction and bail-out on the first error;
    raises on any lexer or syntax error (or a decision SLL cannot make)."""
    lexer = PSLexer(InputStream(latex))
    lexer.removeErrorListeners()
    lexer.addErrorListener(_LEX_LISTENER)
    parser = PSParser(CommonTokenStream(lexer))
    parser.removeErrorListeners()
    parser._errHandler = BailErrorStrategy()
    parser._interp.predictionMode = PredictionMode.SLL
    return parser.math()


class TwoStage:
    """What ``create_parser`` returns once installed: ``math()`` as the library's parser gives
    it, SLL first (:func:`sll_tree`), else the library's own parser, built only then."""

    __slots__ = ("_converter", "_latex", "_stock")

    def __init__(self, stock: Callable[[Any, str], Any], converter: Any, latex: str) -> None:
        self._stock = stock
        self._converter = converter
        self._latex = latex

    def math(self) -> Any:
        try:
            tree = sll_tree(self._latex)
        except Exception:  # any failure of stage one: the library parses
            STATS["ll"] += 1
            return self._stock(self._converter, self._latex).math()
        STATS["sll"] += 1
        return tree


stock_create_parser: Callable[[Any, str], Any] = _Latex2Sympy.create_parser


NORMALIZE_ENTRIES = 8192
NORMALIZE_MAX_CHARS = 2000


def _memoise_normalize() -> None:
    """math-verify's ``extract_latex`` memo is keyed on the regex match object, a new one per
    call, so it never hits; the pure step under it, ``normalize_latex(text, config)`` (a
    string and a frozen dataclass in, a string out), is memoised here instead, for texts up
    to ``NORMALIZE_MAX_CHARS``."""
    original = _mv_parser.normalize_latex
    if getattr(original, "memoised", False):
        return
    memo = lru_cache(maxsize=NORMALIZE_ENTRIES)(original)

    def normalize_latex(text: str, config: Any) -> str:
        if len(text) <= NORMALIZE_MAX_CHARS:
            out: str = memo(text, config)
            return out
        return original(text, config)  # type: ignore[no-any-return]

    normalize_latex.memoised = True  # type: ignore[attr-defined]
    normalize_latex.cache_info = memo.cache_info  # type: ignore[attr-defined]
    _mv_parser.normalize_latex = normalize_latex


def install() -> None:
    """The parsing shortcuts of this module and of :mod:`.fast_regex` (math-verify's
    extraction regexes behind a zero-width start guard); once per process. Routes
    ``_Latex2Sympy.create_parser`` through :class:`TwoStage`."""
    fast_regex.install()
    _memoise_normalize()
    current = _Latex2Sympy.create_parser
    if getattr(current, "two_stage", False):
        return
    stock = current

    def create_parser(self: Any, latex_str: str) -> TwoStage:
        return TwoStage(stock, self, latex_str)

    create_parser.two_stage = True  # type: ignore[attr-defined]
    _Latex2Sympy.create_parser = create_parser  # type: ignore[method-assign]
