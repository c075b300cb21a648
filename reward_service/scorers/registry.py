"""Scorer names, versions and routing from ``data_source`` (as verl's default_compute_score)."""

from __future__ import annotations

from dataclasses import dataclass

from reward_service.errors import InvalidRequestError, clip_echo

__all__ = ["DEFAULT_SCORER", "SCORERS", "ScorerInfo", "UnknownScorerError", "resolve_scorer"]

MATH_VERIFY_VERSION = "0.9.0"


@dataclass(frozen=True, slots=True)
class ScorerInfo:
    name: str
    version: str
    description: str
    params: tuple[str, ...] = ()  # keys of an item's ``extra`` this scorer reads


SCORERS: dict[str, ScorerInfo] = {
    s.name: s
    for s in (
        ScorerInfo(
            "math",
            f"2.3+math-verify.{MATH_VERIFY_VERSION}",
            "The default math profile: math_verify's extraction and comparison, plus rules "
            "where the library is wrong: a response earns the reward only if it commits to "
            "one final answer (more than one distinct candidate in its closing part, e.g. "
            "'5. Or maybe 6.', 'either 7 or 8', different \\boxed{} values, is refused), "
            "exact values stay exact (no 6-decimal rounding of 1e-7 vs 2e-7), 1e5 is read as "
            "its value, a percent is read one way, chosen by the gold's size (10% matches 0.1 "
            "and 10; 1000% does not match 10), inequalities vs an interval or union gold "
            "(x < 2 or x > 3, -1 < x <= 5, set-builder; endpoints matter), contradicting "
            "units, a gold's trailing letter kept as a variable (4t is not 4), and values "
            "bound to different readings or cases with no commitment to one ('6 if rotations "
            "count, 2 if not') are refused (per_reading). "
            "The reason of an overridden verdict starts with the rule's name (hedged: ...). "
            "Think blocks: judged on what follows </think>; an unclosed <think> is no_answer "
            "(unclosed_think); extra.think=false turns that off. Invisible characters removed, "
            "digits in other forms read as digits, digit groups (1 000) read as one number.",
            ("think",),
        ),
        ScorerInfo(
            "math_verify",
            f"1.0+math-verify.{MATH_VERIFY_VERSION}",
            "math-verify verify(parse(gold), parse(response)) with the library's default "
            "configs; gold wrapped in \\boxed{} when it has none (as verl does).",
        ),
        ScorerInfo(
            "gsm8k",
            "1.4",
            "Number after the last '#### ' or else the last number in the response "
            "(commas and $ dropped, no character clip), compared exactly as decimals; "
            "a response that offers more than one distinct final answer ('#### 5 or 6', "
            "'#### 20' then '#### 24') is incorrect (hedged). Think blocks, invisible "
            "characters and digit groups as for math (extra.think). extra.format_score "
            "(default 0, as verl's gsm8k reward): the score of a wrong answer written after "
            "'####' (status stays incorrect; reason format_score: ...).",
            ("think", "format_score"),
        ),
        ScorerInfo(
            "numeric",
            "1.1",
            "Last \\boxed{} / '#### ' / number in the response, compared with tolerance "
            "(extra.rel_tol, default 1e-6; extra.abs_tol, default 1e-9). Fractions allowed.",
            ("rel_tol", "abs_tol", "think"),
        ),
        ScorerInfo(
            "choice",
            "1.3",
            "Multiple choice: the last committed letter (\\boxed{B}, 'answer is (B)', "
            "'Answer: B', '(B)'), among extra.choices (default A-J); a response that offers "
            "more than one distinct letter as its answer ('(B) or (C)', '(B). Or maybe (C).') "
            "is incorrect (hedged). Think blocks as for math (extra.think).",
            ("choices", "think"),
        ),
    )
}

# "math" is the default math profile (math_strict.py); "math_verify" is the library exactly.
ALIASES: dict[str, str] = {"math-verify": "math_verify", "mcq": "choice"}
DEFAULT_SCORER = "math"

# data_source → scorer, as verl's default_compute_score routes (unknown → default math).
_EXACT_SOURCES: dict[str, str] = {
    "openai/gsm8k": "gsm8k",
    "gsm8k": "gsm8k",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "math": "math",
}
_PREFIX_SOURCES: tuple[tuple[str, str], ...] = (
    ("numina_", "math"),
    ("aime", "math"),
    ("math_dapo", "math"),
)


class UnknownScorerError(InvalidRequestError, ValueError):
    """A request named a scorer that does not exist."""

    kind = "unknown_scorer"


def resolve_scorer(scorer: str | None, data_source: str | None) -> str:
    """The scorer an item uses: explicit ``scorer`` first, then routing by ``data_source``."""
    if scorer is not None:
        name = ALIASES.get(scorer, scorer)
        if name not in SCORERS:
            known = ", ".join(sorted([*SCORERS, *ALIASES]))
            raise UnknownScorerError(f"unknown scorer {clip_echo(scorer)}; known: {known}")
        return name
    if data_source:
        if data_source in _EXACT_SOURCES:
            return _EXACT_SOURCES[data_source]
        for prefix, name in _PREFIX_SOURCES:
            if data_source.startswith(prefix):
                return name
    return DEFAULT_SCORER
