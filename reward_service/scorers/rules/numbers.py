"""Number extraction shared by the gsm8k, numeric and choice scorers (pure, regex only)."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

__all__ = ["after_hashes", "hashes", "last_boxed", "last_number", "last_number_span", "to_fraction"]

# 1,234.5 | -3 | .5 | 2e-3 ; commas only as thousands separators
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")
_HASHES = re.compile(r"####\s*\$?\s*([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)")


def _numbers(text: str) -> list[str]:
    return [m.group(0) for m in _NUMBER.finditer(text) if any(c.isdigit() for c in m.group(0))]


def last_number(text: str) -> str | None:
    """The last number written in ``text`` (``$1,234.50`` → ``1,234.50``), or None."""
    found = _numbers(text.replace("$", " "))
    return found[-1] if found else None


def last_number_span(text: str) -> tuple[int, int] | None:
    """Where :func:`last_number` found its number (start, end), or None."""
    spans = [m.span() for m in _NUMBER.finditer(text.replace("$", " "))
             if any(c.isdigit() for c in m.group(0))]
    return spans[-1] if spans else None


def hashes(text: str) -> list[re.Match[str]]:
    """Every ``#### n`` in ``text`` (group 1: the number), in order."""
    return list(_HASHES.finditer(text))


def after_hashes(text: str) -> str | None:
    """The number after the last ``####`` marker (GSM8K's answer format), or None."""
    found = _HASHES.findall(text)
    return found[-1] if found else None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), braces balanced, or None."""
    idx = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if idx < 0:
        return None
    start = text.find("{", idx)
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(text)):
        ch = text[i]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


_FRAC = re.compile(r"^\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}$")


def to_fraction(text: str) -> Fraction | None:
    """An exact number from ``12``, ``-1,234.5``, ``2e-3``, ``3/4``, ``\\frac{3}{4}``, ``50\\%``."""
    s = text.strip().strip("$").strip()
    for junk in ("\\!", "\\,", "{,}", "\\left", "\\right", "\\%", "%", " "):
        s = s.replace(junk, "")
    s = s.replace(",", "")
    m = _FRAC.match(s)
    if m:
        num, den = to_fraction(m.group(1)), to_fraction(m.group(2))
        if num is None or den is None or den == 0:
            return None
        return num / den
    if s.count("/") == 1:
        a, b = s.split("/")
        num, den = to_fraction(a), to_fraction(b)
        if num is None or den is None or den == 0:
            return None
        return num / den
    if len(s) > 400:  # refuse absurd literals instead of spending the deadline on them
        return None
    try:
        d = Decimal(s)
    except InvalidOperation:
        return None
    if not d.is_finite() or abs(d.adjusted()) > 300:
        return None
    return Fraction(d)
