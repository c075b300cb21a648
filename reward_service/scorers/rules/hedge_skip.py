"""When the hedge rule's scans of a closing part can be skipped: no candidate can stand in it.

``hedge.candidates`` looks for values offered as answers in the closing part of a response,
outside the final answer's own span. For ``math`` every value form holds a digit, a backslash
or a ``$`` (``strict_commit.MATH_VALUE_HOLDS``), and a number in words ends with a word of
``NUMBER_TOKENS``; a closing part where none of those stands outside the answer has no
candidate, and three in four closing parts of the corpus are such (issue 26's cost budget).
Exact: tests/test_hedges.py replays every ``candidates`` call of the corpus and both hedge
corpora with the skip turned off.
"""

from __future__ import annotations

import re

from reward_service.scorers.rules.number_words import NUMBER_TOKENS

__all__ = ["nothing_offered"]

# The answer's own delimiters, next to it, are not a value on their own: one opening token
# before the answer and one closing after it are set aside (:func:`nothing_offered`).
_LETTERS = re.compile(r"[a-z]+")
_OPENERS = ("$$", "$", "\\(", "\\[", "**", "\\boxed{", "\\fbox{")
_CLOSERS = ("$$", "$", "\\)", "\\]", "**", "}")


def _quiet(piece: str, holds: re.Pattern[str]) -> bool:
    """No value can lie in ``piece``: ASCII, none of the characters every value holds, no
    word a number in words ends with (under Unicode case folding other letters could spell
    one, hence ASCII only)."""
    return (piece.isascii() and holds.search(piece) is None
            and NUMBER_TOKENS.isdisjoint(_LETTERS.findall(piece.lower())))


def nothing_offered(text: str, start: int, a0: int, a1: int, holds: re.Pattern[str]) -> bool:
    """True only when no candidate can exist: every candidate is a value lying wholly in
    ``text[start:a0]`` or ``text[a1:]``, and neither piece can hold one (``holds``: see
    ``hedge.candidates``). Each piece is tested without the one delimiter token touching the
    answer (``$``, ``\\(``, ``\\boxed{`` before; ``$``, ``\\)``, ``}`` after): for ``math``'s
    value forms, alone with quiet text it completes none (a ``$`` value needs two ``$``, a
    ``\\(`` one its ``\\)``, a box its ``}``, bold a digit). Three in four closing parts of the
    corpus; tests/test_hedges.py checks that none of them has a candidate."""
    before = text[start:a0].rstrip()
    for token in _OPENERS:
        if before.endswith(token):
            before = before[: -len(token)]
            break
    after = text[a1:].lstrip()
    for token in _CLOSERS:
        if after.startswith(token):
            after = after[len(token):]
            break
    return _quiet(before, holds) and _quiet(after, holds)
