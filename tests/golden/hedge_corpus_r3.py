"""Round 3 of the generated corpus (issue 36): answers per reading, and inequalities.

    $ python tests/golden/hedge_corpus_r3.py      # prints counts per class, kind and fold

Its own random stream (``generate(seed=36)``): rounds 1 and 2 (``hedge_corpus.py``) are
unchanged. Every row is ``{"template", "class", "fold", "kind", "scorer", "response",
"gold"}``; ``kind == "hedge"`` rows must be refused, ``kind == "near_miss"`` rows paid. Within
each list every fifth template (``index % 5 == 4``) is held out: all templates were written
before the rule was run on any of them, and the held-out ones were not run while the rule was
developed (``docs/CORRECTNESS.md`` reports the folds apart).

Classes:

* ``per_reading`` (hedge): two values, each bound to a reading or case, no commitment. Each
  template is generated twice per answer pair, the gold being the first reading's value and
  then the second's: the class is paid whenever *either* reading matches.
* ``counterfactual_commit``, ``case_reject``, ``every_reading`` (near misses, the issue's
  three kinds): a counterfactual in the reasoning and then a commitment; a case analysis that
  rejects all but one case; one value under every reading.
* ``inequality_forms`` (near miss): a union of inequalities, a chained inequality, set-builder
  notation, against the equivalent interval or union gold.
* ``endpoint_controls`` (hedge kind: must not be paid): the same answers against a gold that
  differs in one endpoint (open for closed, or closed for open).
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    from tests.golden.hedge_corpus import Answer, _golds
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.golden.hedge_corpus import Answer, _golds

Tpl = Callable[[Answer, Answer], str]

PER_READING: list[tuple[str, Tpl]] = [
    ("trailing-if", lambda a, b: f"{a.text} if the two boxes are distinguishable, {b.text} if "
                                 "they are not."),
    ("if-semicolon", lambda a, b: f"If the chairs are in a row, the count is {a.text}; if they "
                                  f"are around a table, it is {b.text}."),
    ("with-without", lambda a, b: f"With repetition allowed the total is {a.math}, and without "
                                  f"repetition it is {b.math}."),
    ("assuming-colon", lambda a, b: f"Assuming the coins are fair: {a.text}. Assuming they are "
                                    f"weighted: {b.text}."),
    ("interpretations", lambda a, b: f"Under the first interpretation we get {a.text}; under "
                                     f"the second interpretation we get {b.text}."),
    ("slash-qualifiers", lambda a, b: f"Answer: {a.text} (distinct objects) / {b.text} "
                                      "(identical objects)"),
    ("lines-for", lambda a, b: f"For ordered triples: {a.math}\nFor unordered triples: "
                               f"{b.math}"),
    ("numbered-cases", lambda a, b: f"In case 1 the value is {a.text}, while in case 2 the "
                                    f"value is {b.text}."),
    ("when-parity", lambda a, b: f"When $n$ is even the answer is {a.text}; when $n$ is odd "
                                 f"the answer is {b.text}."),
    ("counting-as", lambda a, b: f"Counting reflections as the same, there are {a.text} "
                                 f"necklaces; counting them as different, there are {b.text}."),
    ("including-excluding", lambda a, b: f"Including the endpoints gives {a.text}, excluding "
                                         f"them gives {b.text}."),
    ("if-and-if", lambda a, b: f"The answer is {a.math} if we include zero and {b.math} if we "
                               "exclude it."),
    ("then-otherwise", lambda a, b: f"If the order of selection matters then {a.text}. "
                                    f"Otherwise {b.text}."),
    ("provided-unless", lambda a, b: f"Provided the triangle is acute, the area is {a.math}. "
                                     f"If it is obtuse, the area is {b.math}."),
    ("taking-allowing", lambda a, b: f"Taking the digits to be distinct gives {a.text}; "
                                     f"allowing repeated digits gives {b.text}."),
]

# near misses: the gold is a, and the response commits to it
NEAR: dict[str, list[tuple[str, Tpl]]] = {
    "counterfactual_commit": [
        ("ignored-constraint", lambda a, b: f"If we had ignored the constraint we would get "
                                            f"{b.text}, but the constraint holds, so the answer "
                                            f"is {a.text}."),
        ("had-been", lambda a, b: f"Had the boxes been identical the count would be {b.text}; "
                                  f"they are distinct, so there are {a.text} ways."),
        ("x-were", lambda a, b: f"If $x$ were 3 the sum would be {b.math}, but $x = 4$, so the "
                                f"sum is {a.math}."),
        ("suppose-then", lambda a, b: f"Suppose the order mattered; then we would get {b.text}. "
                                      f"It does not, so the answer is {a.text}."),
        ("were-hence", lambda a, b: f"Were repetition allowed, the count would be {b.text}. "
                                    f"Repetition is not allowed here, hence the count is "
                                    f"{a.text}."),
    ],
    "case_reject": [
        ("only-case-2", lambda a, b: f"In case 1 we get {b.text}, in case 2 we get {a.text}; "
                                     f"only case 2 meets the constraint, so the answer is "
                                     f"{a.text}."),
        ("parity-given", lambda a, b: f"If $n$ is even the value is {b.text}; if $n$ is odd it "
                                      f"is {a.text}. Since $n = 7$ is odd, the answer is "
                                      f"{a.text}."),
        ("case-violates", lambda a, b: f"Case A gives {b.text} and case B gives {a.text}. Case A "
                                       f"violates the condition, so the answer is {a.text}."),
        ("boxed-choice", lambda a, b: f"With replacement we would get {b.text}; without "
                                      f"replacement we get {a.text}. The problem says without "
                                      f"replacement, so the answer is $\\boxed{{{a.latex}}}$."),
        ("intended-reading", lambda a, b: f"For the first reading the count is {b.text}, for "
                                          f"the second it is {a.text}. The problem intends the "
                                          f"second reading; therefore the final answer is "
                                          f"{a.text}."),
    ],
    "every_reading": [
        ("whether-or-not", lambda a, b: f"The answer is {a.text} whether or not the coins are "
                                        "distinguishable."),
        ("either-way", lambda a, b: f"Either way the total is {a.text}."),
        ("both-cases", lambda a, b: f"In both cases the answer is {a.math}."),
        ("regardless", lambda a, b: f"Regardless of the order, there are {a.text} ways."),
        ("every-interpretation", lambda a, b: f"Under every interpretation of the problem the "
                                              f"value is {a.text}."),
    ],
}

# (gold, response, control gold) for endpoints p < q
IneqTpl = Callable[[int, int], tuple[str, str, str]]
INEQUALITIES: list[tuple[str, IneqTpl]] = [
    ("or-dollars", lambda p, q: (f"(-\\infty, {p}) \\cup ({q}, \\infty)",
                                 f"So $x < {p}$ or $x > {q}$.",
                                 f"(-\\infty, {p}] \\cup ({q}, \\infty)")),
    ("text-or-closed", lambda p, q: (f"(-\\infty, {p}] \\cup [{q}, \\infty)",
                                     f"\\boxed{{x \\le {p} \\text{{ or }} x \\ge {q}}}",
                                     f"(-\\infty, {p}] \\cup ({q}, \\infty)")),
    ("chained", lambda p, q: (f"({p}, {q}]", f"The solution is $\\boxed{{{p} < x \\le {q}}}$.",
                              f"({p}, {q})")),
    ("set-builder", lambda p, q: (f"[{p}, {q})", f"\\boxed{{\\{{x \\mid {p} \\le x < {q}\\}}}}",
                                  f"[{p}, {q}]")),
    ("set-builder-union", lambda p, q: (f"(-\\infty, {p}) \\cup [{q}, \\infty)",
                                        f"The solution set is $\\{{x : x < {p} \\text{{ or }} "
                                        f"x \\ge {q}\\}}$.",
                                        f"(-\\infty, {p}) \\cup ({q}, \\infty)")),
    ("lor", lambda p, q: (f"(-\\infty, {p}) \\cup ({q}, \\infty)",
                          f"The answer is $x < {p} \\lor x > {q}$.",
                          f"(-\\infty, {p}) \\cup [{q}, \\infty)")),
    ("plain-text", lambda p, q: (f"(-\\infty, {p}) \\cup ({q}, \\infty)",
                                 f"Therefore x < {p} or x > {q}.",
                                 f"(-\\infty, {p}] \\cup [{q}, \\infty)")),
    ("x-in-gold", lambda p, q: (f"x \\in (-\\infty, {p}) \\cup ({q}, \\infty)",
                                f"\\boxed{{x < {p} \\text{{ or }} x > {q}}}",
                                f"x \\in (-\\infty, {p}) \\cup [{q}, \\infty)")),
    ("reversed-bound", lambda p, q: (f"(-\\infty, {p}) \\cup ({q}, \\infty)",
                                     f"\\boxed{{{p} > x \\text{{ or }} x > {q}}}",
                                     f"(-\\infty, {p}] \\cup ({q}, \\infty)")),
    ("swapped-order", lambda p, q: (f"(-\\infty, {p}] \\cup [{q}, \\infty)",
                                    f"The answer is $x \\geq {q}$ or $x \\leq {p}$.",
                                    f"(-\\infty, {p}) \\cup [{q}, \\infty)")),
]


def fold(index: int) -> str:
    return "held_out" if index % 5 == 4 else "dev"


def generate(per_template: int = 30, seed: int = 36, folds: tuple[str, ...] = ("dev", "held_out"),
             ) -> Iterator[dict]:
    """The round-3 rows (deterministic for a seed and corpus); ``folds`` limits the output
    (the held-out fold is left out while a rule is developed)."""
    rnd = random.Random(seed)
    math_golds, _ = _golds()

    def pairs() -> list[tuple[Answer, Answer]]:
        out = []
        for a in rnd.sample(math_golds, min(per_template, len(math_golds))):
            out.append((a, rnd.choice([g for g in math_golds if g.latex != a.latex])))
        return out

    def row(name: str, cls: str, i: int, kind: str, response: str, gold: str) -> dict:
        return {"template": f"math/{name}", "class": cls, "fold": fold(i), "kind": kind,
                "scorer": "math", "response": response, "gold": gold}

    rows: list[dict] = []
    for i, (name, tpl) in enumerate(PER_READING):
        for a, b in pairs():
            response = tpl(a, b)
            rows.append(row(name, "per_reading", i, "hedge", response, a.latex))
            rows.append(row(name, "per_reading", i, "hedge", response, b.latex))
    for cls, templates in NEAR.items():
        for i, (name, tpl) in enumerate(templates):
            for a, b in pairs():
                rows.append(row(name, cls, i, "near_miss", tpl(a, b), a.latex))
    for i, (name, itpl) in enumerate(INEQUALITIES):
        for _ in range(per_template):
            p = rnd.randint(-20, 20)
            q = p + rnd.randint(1, 20)
            gold, response, control = itpl(p, q)
            rows.append(row(name, "inequality_forms", i, "near_miss", response, gold))
            rows.append(row(name, "endpoint_controls", i, "hedge", response, control))
    yield from (r for r in rows if r["fold"] in folds)


def main() -> None:
    counts = Counter((r["class"], r["kind"], r["fold"]) for r in generate())
    for (c, k, f), n in sorted(counts.items()):
        sys.stdout.write(f"{c:24} {k:10} {f:9} {n}\n")


if __name__ == "__main__":
    main()
