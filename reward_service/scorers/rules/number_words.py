"""Values written as English number words, for the hedge rule (issue 26).

``The answer is 5 or six.`` offers two values. :data:`WORDS` is a regex (no groups) matching
one number written in words: ``zero`` to ``nineteen``, the tens and their compounds
(``thirty-one``, ``thirty one``), ``N hundred [and] M``, ``N thousand``, and simple
fractions (``one half``, ``a half``, ``two thirds``, ``three quarters``, ``one-fifth``).
:func:`word_value` is its value. ``one`` alone counts only where it stands as a value (before
punctuation, the end, or ``or``/``and``): ``one of them``, ``either one works`` are words.
Only the hedge rule reads words: a final answer in words is not extracted (the library's
choice, and a strict grader's "write the number").
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["NUMBER_TOKENS", "WORDS", "as_latex", "word_value"]

_UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
          "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
          "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_VALUES: dict[str, int] = {w: i for i, w in enumerate(_UNITS)}
_VALUES.update({w: 20 + 10 * i for i, w in enumerate(_TENS)})
_DENOMINATORS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4,
                 "fourth": 4, "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6,
                 "seventh": 7, "sevenths": 7, "eighth": 8, "eighths": 8, "ninth": 9,
                 "ninths": 9, "tenth": 10, "tenths": 10}

#: every word a number in words can end with (a cheap test before the regex)
NUMBER_TOKENS = frozenset([*_UNITS, *_TENS, *_DENOMINATORS, "hundred", "thousand"])
_UNIT = "(?:" + "|".join(sorted(_UNITS[1:], key=len, reverse=True)) + ")"
_TEN = "(?:" + "|".join(_TENS) + ")"
_DENOM = "(?:" + "|".join(sorted(_DENOMINATORS, key=len, reverse=True)) + ")"
_BELOW_100 = rf"(?:{_TEN}(?:[- ]{_UNIT})?+|{_UNIT})"
_BELOW_1000 = rf"{_BELOW_100}(?:[- ]hundred(?:[- ](?:and[- ])?+{_BELOW_100})?+)?+"
_WHOLE = rf"(?:{_BELOW_1000}(?:[- ]thousand(?:[- ](?:and[- ])?+{_BELOW_1000})?+)?+|zero)"
_STANDS_ALONE = r"(?=\s*+(?:[).,;:!?$*]|$)|\s++(?:or|and)\b)"
_BARE_ONE = rf"one(?![- ](?:hundred|thousand|{_DENOM}))"
# A cheap guard first (a word start, and the first two letters of a number word), then: "one"
# alone only where it stands as a value; a fraction (a half, two thirds); a whole number
WORDS = (
    r"(?<![A-Za-z-])(?=(?i:ze|on|tw|th|fo|fi|si|se|ei|ni|te|el|a[- ]))(?i:"
    + rf"(?={_BARE_ONE})one{_STANDS_ALONE}"
    + rf"|(?!{_BARE_ONE})(?:a[- ]{_DENOM}|{_WHOLE}(?:[- ]{_DENOM})?+)"
    + r")(?![A-Za-z]|-[A-Za-z])"
)
_WORDS_FULL = re.compile(WORDS, re.IGNORECASE)


# the non-ASCII letters IGNORECASE matches to ASCII ones (LATIN SMALL LONG S, DOTTED and
# DOTLESS I, KELVIN SIGN): WORDS matches six with a long s, and its value is six's
_FOLD = str.maketrans({"\u017f": "s", "\u0130": "i", "\u0131": "i", "\u212a": "k"})


def word_value(text: str) -> Fraction | None:
    """The value of a number written in words (:data:`WORDS`), else None."""
    s = text.strip().translate(_FOLD).lower()
    if _WORDS_FULL.fullmatch(s) is None:
        return None
    parts = [p for p in re.split(r"[- ]+", s) if p != "and"]
    if parts[-1] in _DENOMINATORS:
        num = 1 if parts[0] == "a" else _VALUES[parts[0]]
        return Fraction(num, _DENOMINATORS[parts[-1]])
    total = current = 0
    for p in parts:
        if p == "hundred":
            current *= 100
        elif p == "thousand":
            total, current = total + current * 1000, 0
        else:
            current += _VALUES[p]
    return Fraction(total + current)


def as_latex(text: str) -> str:
    """A number in words as LaTeX (``six`` → ``6``, ``one half`` → ``\\frac{1}{2}``); any
    other text as it is."""
    value = word_value(text) if text[:1].isalpha() else None
    if value is None:
        return text
    if value.denominator == 1:
        return str(value.numerator)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
