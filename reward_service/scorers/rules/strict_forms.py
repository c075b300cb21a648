"""Rules 5, 6 and 7 of the ``math`` profile (``math_strict.py``): how an answer is written.

Rule 7 rewrites the response before extraction; rules 6 and 5 run after the value rules, on
an answer still correct.

5. **Units must not contradict** (veto). The library drops ``\\text{cm}`` and friends, which
is right when only one side names a unit (``10`` vs ``10\\text{ cm}``), but it also
makes ``10\\text{ m}`` equal ``10\\text{ cm}``. When both the gold and the final answer
name a unit in ``\\text{}``/``\\mathrm{}``/``\\mbox{}`` that is in our small table of
common units (length, mass, volume, time, money, angle; spellings and plurals mapped to
one name: ``inches`` = ``in``) and the two differ, the answer is refused. Words not in
the table (names, ``units``) never refuse an answer; no conversion is attempted
(``100\\text{ cm}`` vs ``1\\text{ m}`` is refused: say it in the gold's unit).

6. **Nothing dropped** (veto). The library's normaliser deletes ``\\ldots``/``\\cdots``,
leaving an empty list element, and what is left may parse to anything: ``1, 2, \\ldots, n``
and ``1, 3, 5, \\ldots, 2n-1`` both parse to ``2`` (Math-Verify #14). When either side has
such an empty element, the two must be the same as written (spaces aside).

7. **Scientific notation** (both ways). ``1e5``, ``2E-3``, ``1.5e+3`` are written as their
decimal values before extraction (:func:`read_scientific`): the library reads ``1e5`` in
text as ``1`` and in LaTeX as ``1 \\cdot e \\cdot 5``. ``scientific: ...`` names it when
reading the mantissa alone would have given the other verdict. An exponent beyond 400
is not read at all (never as its mantissa).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from reward_service.scorers.base import clip
from reward_service.scorers.rule_labels import rule_reason
from reward_service.scorers.rules.strict_read import SPACES, boxed_answers, parse_boxed

__all__ = ["dropped_element", "read_scientific", "scientific_reason", "units_differ"]


# --- rule 7: scientific notation --------------------------------------------------------------

# 1e5, 2E-3, 1.5e+3: a number, then e/E and an integer exponent; not part of a word (x1e5) or
# of a longer number. LaTeX's 1.5 \times 10^{3} the library already reads as its value.
_SCIENTIFIC = re.compile(r"(?<![\w.])((?:\d+(?:\.\d*)?|\.\d+)[eE][-+]?\d+)(?![\w]|\.\d)")
_MANTISSA = re.compile(r"[eE]")
_SCIENTIFIC_HINT = re.compile(r"\d[eE][-+]?\d")  # a cheap test before the full pattern
_MAX_EXPONENT = 400  # 1e400 is written out as 401 digits; larger exponents are not read


def read_scientific(text: str) -> tuple[str, list[tuple[int, int, str]]]:
    """``text`` with every scientific literal written as its decimal value (``1e5`` →
    ``100000``, ``2E-3`` → ``0.002``), and where each now is (start, end, as written). The
    library reads ``1e5`` in text as ``1`` and in LaTeX as ``1 \\cdot e \\cdot 5``. A literal
    with an exponent beyond 400 is replaced by ``(overflow)``: it is no number any gold
    holds, and its mantissa must not be read as the answer."""
    if _SCIENTIFIC_HINT.search(text) is None:
        return text, []
    out: list[str] = []
    spans: list[tuple[int, int, str]] = []
    pos = size = 0
    for m in _SCIENTIFIC.finditer(text):
        written = m.group(1)
        mantissa, exponent = _MANTISSA.split(written)
        if len(exponent.lstrip("+-")) > 3 or abs(int(exponent)) > _MAX_EXPONENT:
            value = "(overflow)"
        else:
            value = f"{Decimal(mantissa).scaleb(int(exponent)).normalize():f}"
        out.append(text[pos : m.start()])
        size += m.start() - pos
        spans.append((size, size + len(value), written))
        out.append(value)
        size += len(value)
        pos = m.end()
    if not spans:
        return text, []
    out.append(text[pos:])
    return "".join(out), spans


def scientific_reason(where: re.Match[str], literals: list[tuple[int, int, str]], ok: bool,
                      judge: Callable[[list[Any]], bool]) -> str | None:
    """Rule 7: the ``scientific`` reason when the final answer (``where``) holds a literal
    like ``1e5`` (``literals``, from :func:`read_scientific`) and reading its mantissa alone
    (as the library does) would give another verdict than ``ok``; ``judge`` is the verdict
    of a parsed answer."""
    for start, end, written in literals:
        if where.start() <= start and end <= where.end():
            mantissa = parse_boxed((_MANTISSA.split(written)[0],))
            if bool(mantissa) and judge(mantissa) != ok:
                return rule_reason("scientific", f"{clip(written, 30)} read as its value, "
                                   "not as its mantissa")
    return None


# --- rule 5: units ----------------------------------------------------------------------------

_UNIT = re.compile(r"\\(?:text|mbox|mathrm|textrm|textnormal|operatorname)\s*\{\s*([A-Za-z][A-Za-z ]*?)\s*\}")
# Spellings of common units → one name. Only units named here are compared: a word we do
# not know (a name, "units", "ways") never refuses an answer.
_UNITS: dict[str, str] = {
    spelling: unit
    for unit, spellings in {
        "mm": "mm millimeter millimeters millimetre millimetres",
        "cm": "cm centimeter centimeters centimetre centimetres",
        "m": "m meter meters metre metres",
        "km": "km kilometer kilometers kilometre kilometres",
        "in": "in inch inches",
        "ft": "ft foot feet",
        "yd": "yd yard yards",
        "mi": "mi mile miles",
        "mg": "mg milligram milligrams",
        "g": "g gram grams",
        "kg": "kg kilogram kilograms",
        "lb": "lb lbs pound pounds",
        "oz": "oz ounce ounces",
        "ml": "ml mL milliliter milliliters millilitre millilitres",
        "l": "l L liter liters litre litres",
        "s": "s sec secs second seconds",
        "min": "min mins minute minutes",
        "h": "h hr hrs hour hours",
        "day": "day days",
        "week": "week weeks",
        "year": "year years yr yrs",
        "cent": "cent cents",
        "dollar": "dollar dollars",
        "deg": "deg degree degrees",
        "rad": "rad radian radians",
    }.items()
    for spelling in spellings.split()
}


def _unit(latex: str) -> str | None:
    """The known unit named last in an answer (``\\text{ cm}`` → ``cm``), or None."""
    for word in reversed(_UNIT.findall(latex)):
        unit = _UNITS.get(word.strip()) or _UNITS.get(word.strip().lower())
        if unit is not None:
            return unit
    return None


def units_differ(ground_truth: str, where: re.Match[str] | None) -> str | None:
    """Rule 5: the ``units`` reason when the gold and the final answer name different known
    units, else None."""
    if where is None or "\\" not in ground_truth:
        return None
    answer = where.group(0)
    boxes = boxed_answers(answer)
    if boxes:
        answer = boxes[-1][2]
    g, p = _unit(ground_truth), _unit(answer)
    if g is not None and p is not None and g != p:
        return rule_reason("units", f"units differ: {clip(p, 20)} vs gold {clip(g, 20)}")
    return None


# --- rule 6: nothing dropped ------------------------------------------------------------------

# a list element left empty: ", ," / a trailing ", " / a leading ","; not LaTeX's "\,"
_EMPTY_ELEMENT = re.compile(r"(?<!\\),\s*,|(?<!\\),\s*$|^\s*,")


def dropped_element(gold: list[Any], pred: list[Any]) -> str | None:
    """Rule 6: the library's normaliser deletes ``\\ldots`` and friends, leaving an empty list
    element, and the rest may parse to anything (``1, 2, \\ldots, n`` parses to 2). Then the
    two are compared as written (spaces aside)."""
    g, p = gold[-1], pred[-1]
    if not (isinstance(g, str) and isinstance(p, str)):
        return None
    if not (_EMPTY_ELEMENT.search(g) or _EMPTY_ELEMENT.search(p)):
        return None
    if SPACES.sub("", g) == SPACES.sub("", p):
        return None
    return rule_reason("dropped", "an element did not parse (e.g. \\ldots): compared as written, "
                       "and they differ")
