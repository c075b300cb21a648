"""Scorer names, versions and routing from ``data_source`` (as verl's default_compute_score)."""

from __future__ import annotations

from dataclasses import dataclass

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
            "math_verify",
            f"1.0+math-verify.{MATH_VERIFY_VERSION}",
            "math-verify verify(parse(gold), parse(response)) with the library's default "
            "configs; gold wrapped in \\boxed{} when it has none (as verl does).",
        ),
        ScorerInfo(
            "gsm8k",
            "1.0",
            "Number after the last '#### ' or else the last number in the response "
            "(commas and $ dropped, no character clip), compared exactly as decimals.",
        ),
        ScorerInfo(
            "numeric",
            "1.0",
            "Last \\boxed{} / '#### ' / number in the response, compared with tolerance "
            "(extra.rel_tol, default 1e-6; extra.abs_tol, default 1e-9). Fractions allowed.",
            ("rel_tol", "abs_tol"),
        ),
        ScorerInfo(
            "choice",
            "1.0",
            "Multiple choice: the last committed letter (\\boxed{B}, 'answer is (B)', "
            "'Answer: B', '(B)'), among extra.choices (default A-J).",
            ("choices",),
        ),
    )
}

# "math" names the default math profile; today it is math-verify's exact behaviour.
ALIASES: dict[str, str] = {"math": "math_verify", "math-verify": "math_verify", "mcq": "choice"}
DEFAULT_SCORER = "math_verify"

# data_source → scorer, as verl's default_compute_score routes (unknown → default math).
_EXACT_SOURCES: dict[str, str] = {
    "openai/gsm8k": "gsm8k",
    "gsm8k": "gsm8k",
    "lighteval/MATH": "math_verify",
    "DigitalLearningGmbH/MATH-lighteval": "math_verify",
    "HuggingFaceH4/MATH-500": "math_verify",
    "math_dapo": "math_verify",
    "math": "math_verify",
}
_PREFIX_SOURCES: tuple[tuple[str, str], ...] = (
    ("numina_", "math_verify"),
    ("aime", "math_verify"),
    ("math_dapo", "math_verify"),
)


class UnknownScorerError(ValueError):
    """A request named a scorer that does not exist."""


def resolve_scorer(scorer: str | None, data_source: str | None) -> str:
    """The scorer an item uses: explicit ``scorer`` first, then routing by ``data_source``."""
    if scorer is not None:
        name = ALIASES.get(scorer, scorer)
        if name not in SCORERS:
            known = ", ".join(sorted([*SCORERS, *ALIASES]))
            raise UnknownScorerError(f"unknown scorer {scorer!r}; known: {known}")
        return name
    if data_source:
        if data_source in _EXACT_SOURCES:
            return _EXACT_SOURCES[data_source]
        for prefix, name in _PREFIX_SOURCES:
            if data_source.startswith(prefix):
                return name
    return DEFAULT_SCORER
