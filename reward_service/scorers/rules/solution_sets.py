"""Rule 4 of the ``math`` profile, widened (issue 36): inequalities read as the set they define.

Rule 4 (``strict_values.relation_as_set``) compares one relation (``-1 < x \\le 5``) with an
interval gold, as the library does only with ``allow_set_relation_comp``. This module reads
the forms it does not: an answer that states its solution set as

* a **union of inequalities**: ``x < 2 or x > 3``, ``x < 2 \\text{ or } x > 3``, ``x \\le -1
  \\lor x \\ge 4``, ``$x<2$ or $x>3$``, and a bare list ``x < 2, x > 3`` (the library parses all
  of these as the set of the relations ``{x < 2, x > 3}`` and compares it with nothing);
* **set-builder notation**: ``\\{x \\mid -1 < x \\le 5\\}``, ``\\{x : x < 2 \\text{ or } x >
  3\\}``, ``\\{x \\in \\mathbb{R} \\mid ...\\}`` (the library reads ``5`` out of the first);

each piece a relation or a chained inequality in one variable. Inside a set-builder
condition a comma or ``and`` is a conjunction (``\\{x \\mid x > -1, x \\le 5\\}``); in a bare
list, pieces joined by ``or``, ``\\lor``, ``\\vee`` or commas are alternatives, and pieces
joined by ``and`` / ``\\land`` / ``\\wedge`` are a conjunction (``x > -1 and x \\le 5``).

The set is computed with sympy (``as_set``, real line) and must **equal** the gold's set:
an interval, a union of intervals, or ``x \\in`` one (then the variables must agree).
Endpoints matter: ``x < 2 or x > 3`` is ``(-\\infty, 2) \\cup (3, \\infty)``, not
``(-\\infty, 2] \\cup (3, \\infty)``. A rescue says ``rescued: ...`` in the reason, as rule 4.

Only tried on an answer the library called incorrect against a set gold, and only when the
answer as written holds an inequality sign: no cost on other items.
"""

from __future__ import annotations

import re
from typing import Any

import sympy
from latex2sympy2_extended.sets import FiniteSet as L2SFiniteSet
from math_verify import parse

from reward_service.scorers.rule_labels import rule_reason
from reward_service.scorers.rules.strict_read import boxed_answers

__all__ = ["answer_texts", "is_set_gold", "solution_set", "union_rescue"]

_INEQUALITY = re.compile(r"<|>|\\[lg]eq?\b|\\[lg]eqslant|\\[lg]t\b|\u2264|\u2265")
_DELIMITERS = re.compile(r"\$+|\\\(|\\\)|\\\[|\\\]")
_SENTENCE_BACK = 200
_SENTENCE_START = re.compile(r"[.!?:](?=\s)|\n|\b(?:is|are|be|so|thus|hence|therefore)\b")
# where an inequality starts: a variable before a relation, or a bound before one
_FIRST_RELATION = re.compile(
    r"(?:-?\s*\d+(?:\.\d+)?\s*(?:<|>|\\[lg]eq?\b|\\[lg]t\b)\s*)?[a-zA-Z]\s*(?:<|>|\\[lg]eq?\b|\\[lg]t\b)")
# \{ x | cond \} with an optional domain: \{x \in \mathbb{R} : cond\}
_SET_BUILDER = re.compile(
    r"^\s*\\(?:left)?\\?\{\s*([a-zA-Z])\s*(?:\\in\s*\\mathbb\s*\{?R\}?\s*|\\in\s*\\R\s*)?"
    r"(?:\\mid|\\vert|\||:|\\colon)\s*(.+?)\s*\\(?:right)?\\?\}\s*$",
    re.DOTALL,
)
_TEXT_WORD = r"\\(?:text|textrm|mathrm|mbox)\s*\{\s*{w}\s*\}"
_OR = re.compile(r"\s*(?:" + _TEXT_WORD.replace("{w}", "or") + r"|\bor\b|\\lor\b|\\vee\b)\s*")
_AND = re.compile(r"\s*(?:" + _TEXT_WORD.replace("{w}", "and") + r"|\band\b|\\land\b|\\wedge\b)\s*")
_MAX_PIECES = 8
_MAX_CHARS = 500  # longer answers are not read (each piece is parsed again)


def answer_texts(response: str, where: tuple[int, int] | None, extracted: Any) -> list[str]:
    """The final answer as written, in the forms worth reading: the box holding the library's
    match (or the last box, when the library kept no match), the matched text without its
    ``$`` / ``\\(`` delimiters, the inequality that ends at the match in its sentence
    (``So x < 2 or x > 3.``: the library matches only the ``3``), and the library's own
    string of the answer."""
    out: list[str] = []
    boxes = boxed_answers(response)
    if where is not None:
        a0, a1 = where
        out += [content for s, e, content in boxes if s <= a0 and a1 <= e][-1:]
        out.append(_DELIMITERS.sub(" ", response[a0:a1]).strip())
        sentence = response[max(0, a0 - _SENTENCE_BACK) : a1]
        cut = _SENTENCE_START.split(sentence)[-1]
        start = _FIRST_RELATION.search(cut)
        if start is not None:
            out.append(_DELIMITERS.sub(" ", cut[start.start() :]).strip())
    elif boxes:
        out.append(boxes[-1][2])
    if isinstance(extracted, str):
        out.append(extracted)
    return [t for i, t in enumerate(out) if t and t not in out[:i]]


def _piece_set(piece: str) -> tuple[Any, set[sympy.Symbol]] | None:
    """One relation or chained inequality, as (its set on the real line, its variables)."""
    piece = piece.strip().rstrip(".")
    if not piece or not _INEQUALITY.search(piece):
        return None
    parsed = parse("$" + piece + "$", parsing_timeout=None)  # type: ignore[arg-type]
    if not parsed:
        return None
    rel = parsed[0]
    if not isinstance(rel, sympy.core.relational.Relational | sympy.And) or isinstance(
            rel, sympy.Eq | sympy.Ne):
        return None
    symbols = rel.free_symbols
    if len(symbols) != 1:
        return None
    return rel.as_set(), symbols


def _split(text: str, pattern: re.Pattern[str], comma: bool) -> list[str]:
    parts = pattern.split(text)
    if comma:
        parts = [p for part in parts for p in part.split(",")]
    return [p for p in parts if p.strip()]


def solution_set(answer: str) -> tuple[Any, sympy.Symbol] | None:
    """The set an answer written as inequalities defines, and its variable; None when it is
    not such an answer (no inequality sign, a piece that is not a relation in one variable,
    several variables, more than 8 pieces, over 500 characters)."""
    if len(answer) > _MAX_CHARS or not _INEQUALITY.search(answer):
        return None
    built = _SET_BUILDER.match(answer)
    body = _DELIMITERS.sub(" ", built.group(2) if built else answer)
    disjuncts = _split(body, _OR, comma=built is None)
    if not disjuncts or len(disjuncts) > _MAX_PIECES:
        return None
    total: Any = sympy.S.EmptySet
    variables: set[sympy.Symbol] = set()
    try:
        for disjunct in disjuncts:
            conjuncts = _split(disjunct, _AND, comma=built is not None)
            if not conjuncts or len(conjuncts) > _MAX_PIECES:
                return None
            part: Any = sympy.S.Reals
            for conjunct in conjuncts:
                read = _piece_set(conjunct)
                if read is None:
                    return None
                part = part.intersect(read[0])
                variables |= read[1]
            total = total.union(part)
    except (TypeError, ValueError, NotImplementedError, AttributeError):
        return None
    if len(variables) != 1:
        return None
    (var,) = variables
    if built is not None and built.group(1) != str(var):
        return None
    return total, var


def _gold_set(gold: Any) -> tuple[Any, sympy.Symbol | None] | None:
    if isinstance(gold, sympy.Eq) and isinstance(gold.rhs, sympy.Set) and isinstance(
            gold.lhs, sympy.Symbol):
        return gold.rhs, gold.lhs
    if isinstance(gold, sympy.Set) and not isinstance(gold, sympy.FiniteSet | L2SFiniteSet):
        return gold, None
    return None


def is_set_gold(gold: Any) -> bool:
    """The gold is an interval or a union of them (or ``x \\in`` one): this rule may apply."""
    return _gold_set(gold) is not None


def _equal_sets(a: Any, b: Any) -> bool:
    if a == b:
        return True
    try:
        return bool(sympy.Complement(a, b) == sympy.S.EmptySet
                    and sympy.Complement(b, a) == sympy.S.EmptySet)
    except (TypeError, ValueError, NotImplementedError):
        return False


def union_rescue(gold: Any, answers: list[str]) -> str | None:
    """The ``rescued`` reason when ``answer`` (as written) is inequalities whose solution set
    equals the gold's interval or union (``x \\in`` one: same variable), else None."""
    target = _gold_set(gold)
    if target is None:
        return None
    read = next((r for r in map(solution_set, answers) if r is not None), None)
    if read is None:
        return None
    found, var = read
    gold_set, gold_var = target
    if gold_var is not None and gold_var != var:
        return None
    if not _equal_sets(found, gold_set):
        return None
    return rule_reason("rescued", "the inequalities compared as the set they define "
                       f"({sympy.sstr(found)}; the library does not)")
