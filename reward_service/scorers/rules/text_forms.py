"""What every rule of ``math``, ``gsm8k``, ``choice`` and ``numeric`` reads: the text in one form.

Run on the response and the gold before extraction (issue 26); never for ``math_verify``,
which stays the library as released.

1. **Invisible characters removed** (:func:`plain_text`): Unicode category Cf (zero-width
   space and joiners, soft hyphen U+00AD, word joiner, BOM, bidi marks, invisible times and
   separators, tags) and the other default-ignorable code points (variation selectors, the
   combining grapheme joiner, Hangul fillers). They render as nothing, and they break the
   rules' ``\\s``/``\\b``: ``5 \\u200dor\\u200d 6`` is ``5 or 6``.
2. **Digits in other forms read as ASCII digits**: every decimal digit (category Nd:
   full-width five U+FF15, Arabic-Indic five U+0665, mathematical bold five U+1D7D3) and the full-width
   forms of ASCII (U+FF01-FF5E: a full-width dollar sign or ``or``; U+3000 is a space). This is NFKC restricted
   to where it means the same thing: the rest of NFKC is *not* applied, since it changes
   meaning here (``x`` with a superscript two would become ``x2``; the vulgar fraction one
   half becomes ``1``, U+2044 FRACTION SLASH, ``2``, which the library does not read; ligatures,
   black-letter capitals). Superscripts stay as written.
3. **Digit groups read as one number** (:func:`join_digit_groups`): a 1-3 digit lead and
   groups of exactly three digits, each after the same separator (a space, a no-break,
   thin, narrow no-break or figure space, LaTeX ``\\,``, ``\\ ``, ``~``, ``{,}``):
   ``1 000``, ``1\\,000``, ``12 345 678`` become ``1000``, ``12345678``. Not when the lead
   follows a digit, a ``.`` or a ``,`` (``3.141 592`` is left alone), nor when a fourth digit
   follows a group (``3 2026`` is two numbers). The library reads ``1 000`` in LaTeX as a
   product or sum of its parts (``\\boxed{1 200}`` equals 201).
4. **Disjunctions in symbols written as words**: U+2228 LOGICAL OR, ``\\lor``, ``\\vee``, ``\\text{ or
   }`` (``\\textrm``, ``\\mathrm``, ``\\mbox``), and ``|`` / ``\\mid`` between two numbers
   (a digit, ``$`` or ``<digit>}`` before; a number or ``\\frac`` after, ``$`` between allowed)
   become `` or ``; ``|x|``, ``\\{x \\mid x > 0\\}`` are left alone. Inside math the library
   then reads ``5 or 6`` as the set {5, 6} (as it reads ``\\text{ or }``), and outside it the
   hedge rule sees the ``or``.

Cost: ASCII text (most responses) skips steps 1-2 (``str.isascii``); steps 3-4 are one
guarded regex scan each, which the ``math`` profile runs only when its final answer needs
them (:func:`answer_needs_forms`).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["IGNORABLE", "answer_needs_forms", "join_digit_groups", "plain_text", "prepare",
           "symbols_as_words"]

# Cf in Unicode 14 (Python 3.11's unicodedata; tests/test_text_forms.py recomputes it), plus
# the default-ignorable code points of other categories
IGNORABLE = (
    "\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u180f\u3164\ufe00-\ufe0f\uffa0"
    "\U000e0100-\U000e01ef"
)
_IGNORABLE = re.compile(f"[{IGNORABLE}]+")
_OTHER_DIGIT_OR_WIDE = re.compile(r"(?![0-9])\d|[\uff01-\uff5e\u3000]")


def _ascii_form(m: re.Match[str]) -> str:
    c = m.group(0)
    if c == "\u3000":
        return " "
    if "\uff01" <= c <= "\uff5e":
        return chr(ord(c) - 0xFEE0)
    return str(unicodedata.decimal(c))


def plain_text(text: str) -> str:
    """Steps 1 and 2: invisible characters removed, digits and full-width forms as ASCII."""
    if text.isascii():
        return text
    text = _IGNORABLE.sub("", text)
    return _OTHER_DIGIT_OR_WIDE.sub(_ascii_form, text)


_SEP = r"(?: |\u00a0|\u2009|\u202f|\u2007|\\,|\\ |~|\{,\})"
_GROUPS = re.compile(
    r"(?<![\d.,])(?=\d)(\d{1,3})(" + _SEP + r")(\d{3}(?:\2\d{3})*+)(?!\d)"
)
_GROUP_HINT = re.compile(r"[0-9][ \u00a0\u2009\u202f\u2007~\\{][ ,]?+\}?+[0-9]{3}")  # a superset


def _joined(m: re.Match[str]) -> str:
    return m.group(1) + m.group(3).replace(m.group(2), "")


def join_digit_groups(text: str) -> str:
    """Step 3: ``1 000`` → ``1000`` (see the module docstring for the separators)."""
    if _GROUP_HINT.search(text) is None:
        return text
    return _GROUPS.sub(_joined, text)


_SYMBOL_OR = re.compile(
    r"(?=[\u2228\\|\s])(?:\s*+(?:\u2228|\\(?:lor|vee)(?![a-zA-Z])"
    r"|\\(?:text|textrm|mathrm|mbox)\s*+\{\s*+or\s*+\})\s*+"
    r"|(?:(?<=[\d$])|(?<=\d\}))\s*+(?:\||\\mid(?![a-zA-Z]))\s*+(?=\$?+\s*+[-+]?(?:\d|\\frac)))"
)


def symbols_as_words(text: str) -> str:
    """Step 4: ``5 \u2228 6``, ``5 \\lor 6``, ``5 \\text{ or } 6``, ``5 | 6`` → ``5 or 6``."""
    if "\\" not in text and "|" not in text and "\u2228" not in text:
        return text
    return _SYMBOL_OR.sub(" or ", text)


def prepare(text: str) -> str:
    """All four steps, in order."""
    return symbols_as_words(join_digit_groups(plain_text(text)))


_BEFORE = 200  # how far before the final answer a symbol is looked for
_SYMBOL_HINT = re.compile(r"\||\\lor|\\vee|\\mid|or ?\}|\u2228")  # a superset of _SYMBOL_OR


def answer_needs_forms(text: str, start: int, end: int) -> bool:
    """Whether steps 3-4 could change how the final answer at ``text[start:end]`` is read:
    a digit group in it or after it, a disjunction symbol from ``_BEFORE`` characters before
    it to the end. The ``math`` profile extracts first and runs steps 3-4 (and extracts again)
    only then: a scan of the whole text costs more than its 5% budget on long responses, and
    the library reads its answer from the end (``tail_scan``)."""
    if _GROUP_HINT.search(text, max(0, start - 8)) is not None:  # the lead may stand before
        return True
    return _SYMBOL_HINT.search(text, max(0, start - _BEFORE)) is not None
