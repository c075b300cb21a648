"""Generate the hedge corpus: hedged responses and near-miss non-hedges around real answers.

    $ python tests/golden/hedge_corpus.py               # prints counts per template
    $ python tests/golden/hedge_corpus.py --write FILE  # also writes the rows as JSONL

Every row is ``{"template", "fold", "kind", "scorer", "response", "gold"}`` (and ``class``
for the round-2 rows of ``hedge_corpus_r2.py``: conditional, worded, symbol, invisible and
think-block hedges, digit forms, and their near misses): ``kind`` is
``hedge`` (the response offers more than one distinct final answer; the ``math``, ``gsm8k`` or
``choice`` scorer must refuse it) or ``near_miss`` (one committed answer, the gold, written
close to a hedge: a self-correction or case analysis that ends on one value, ``5 or more``
restated, the same value in two forms, intervals, sets, ``\\pm``; the scorer must accept it).

The answers are real: the golds of ``../shared/data/corpus.jsonl`` (MATH-style golds for the
``math`` templates, GSM8K golds for ``gsm8k``), each paired with another gold of the corpus as
the hedged alternative. A template is a function of (answer, alternative, the answer in another
form); the answer is placed where the library takes its final answer from, so every hedge
would be paid by plain math-verify unless a rule refuses it.

Folds: the templates of each list are numbered in order; every fifth one (``index % 5 == 4``)
is **held out** (``fold == "held_out"``). Held-out templates were written together with the
others, before the rule, and were not run while the rule was developed; ``tests/test_hedges.py``
and ``docs/CORRECTNESS.md`` report them separately.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

try:
    from tests.golden import hedge_corpus_r2 as round2
    from tests.helpers import DATA
except ImportError:  # run as a script: python tests/golden/hedge_corpus.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository
    from tests.golden import hedge_corpus_r2 as round2
    from tests.helpers import DATA

CORPUS = DATA / "corpus.jsonl"

Template = Callable[["Answer", "Answer", str], str]


@dataclass(frozen=True)
class Answer:
    """An answer as LaTeX (``\\frac{1}{2}``) and, when it has one, as plain text (``0.5``)."""

    latex: str
    plain: str | None = None  # a number a person would type without LaTeX

    @property
    def text(self) -> str:
        """Plain when possible, else inline math."""
        return self.plain if self.plain is not None else f"${self.latex}$"

    @property
    def math(self) -> str:
        return f"${self.latex}$"


_INT = re.compile(r"-?\d+")
_FRAC = re.compile(r"^(-?)\\frac\{(\d+)\}\{(\d+)\}$")


def _answer(gold: str) -> Answer | None:
    g = gold.strip()
    if _INT.fullmatch(g):
        return Answer(g, g)
    if re.fullmatch(r"-?\d+\.\d+", g):
        return Answer(g, g)
    if _FRAC.match(g) or re.fullmatch(r"-?\d+\\frac\{\d+\}\{\d+\}|\d+\\pi|\\frac\{\d+\}\{\d+\}", g):
        return Answer(g)
    return None  # words, lists, expressions with letters: not used as hedge values


def _other_form(a: Answer) -> str:
    """The same value written another way (LaTeX)."""
    g = a.latex
    if _INT.fullmatch(g):
        n = int(g)
        return f"\\frac{{{2 * n}}}{{2}}" if n % 3 else f"{n}.0"
    m = _FRAC.match(g)
    if m:
        q = Fraction(int(m.group(2)), int(m.group(3))) * (-1 if m.group(1) else 1)
        d = q.denominator
        while d % 2 == 0:
            d //= 2
        while d % 5 == 0:
            d //= 5
        if d == 1:
            return str(float(q))
        return f"{m.group(1)}\\frac{{{2 * q.numerator * (-1 if m.group(1) else 1)}}}{{{2 * q.denominator}}}"
    if re.fullmatch(r"-?\d+\.\d+", g):
        return g + "0"
    return g.replace("\\frac", "\\dfrac") if "\\frac" in g else g


# --- math hedges: (A = the gold, placed where the library takes the final answer; B = another
# real answer offered as an alternative; F = A in another form) ---------------------------------
MATH_HEDGES: list[tuple[str, Template]] = [
    ("final-or-maybe", lambda a, b, f: f"The final answer is {a.text}. Or maybe {b.text}."),
    ("either-or", lambda a, b, f: f"Either {b.text} or {a.text}."),
    ("comma-or-possibly", lambda a, b, f: f"The answer is {a.text}, or possibly {b.text}."),
    ("could-also-be", lambda a, b, f: f"The answer is {a.text}. It could also be {b.text}."),
    ("boxed-alternatively-might", lambda a, b, f:
        f"So the answer is $\\boxed{{{a.latex}}}$. Alternatively, it might be {b.math}."),
    ("actually-maybe-line", lambda a, b, f: f"Thus the answer is {a.text}.\nActually, maybe {b.text}."),
    ("or-perhaps-paragraph", lambda a, b, f: f"The answer is {a.text}\n\nor perhaps {b.text}"),
    ("its-b-or-maybe-a", lambda a, b, f: f"I think it's {b.text}, or maybe {a.text}."),
    ("final-answer-paren-or", lambda a, b, f: f"Final answer: {a.text} (or {b.text})"),
    ("semicolon-perhaps", lambda a, b, f: f"The answer is {a.text}; perhaps {b.text}."),
    ("bold-dash-possibly", lambda a, b, f: f"**Answer:** {a.text} (possibly {b.text})."),
    ("might-be-then-answer", lambda a, b, f: f"The answer might be {b.text}. The answer is {a.text}."),
    ("boxed-or-maybe-dollar", lambda a, b, f: f"$\\boxed{{{a.latex}}}$ or maybe {b.math}"),
    ("answer-is-either-or", lambda a, b, f: f"The answer is either {a.text} or {b.text}."),
    ("line-or", lambda a, b, f: f"The answer is {a.text}.\nOr {b.text}."),
    ("possibly-though", lambda a, b, f: f"We find the answer is {a.text}. Possibly {b.text}, though."),
    ("answer-colon-might-instead", lambda a, b, f: f"Answer: {a.text}. Might be {b.text} instead."),
    ("if-not", lambda a, b, f: f"The answer is {a.text}, if not {b.text}."),
    ("forms-then-or-maybe", lambda a, b, f:
        f"The answer is ${f}$ = {a.math}, or maybe {b.math}."),
    ("maybe-question-then-final", lambda a, b, f: f"Maybe {b.text}? The final answer is {a.text}."),
    ("boxes-alternatively", lambda a, b, f:
        f"The answer is $\\boxed{{{b.latex}}}$.\n\n(Alternatively, $\\boxed{{{a.latex}}}$.)"),
    ("not-sure", lambda a, b, f: f"The answer is {a.text} or {b.text}, I'm not sure which."),
    ("answer-then-answer", lambda a, b, f: f"The answer is {b.text}. The answer is {a.text}."),
    ("exclaim-or", lambda a, b, f: f"The answer is {a.text}! Or {b.text}!"),
    ("b-or-a-bare", lambda a, b, f: f"{b.text} or {a.text}"),
    ("result-paren-possibly", lambda a, b, f: f"The final answer is {a.math} (possibly {b.math})."),
    ("actually-line", lambda a, b, f: f"The answer is {a.text}.\nActually, {b.text}."),
    ("answer-colon-or-maybe", lambda a, b, f: f"Answer: {a.text} or maybe {b.text}"),
    ("might-also-be", lambda a, b, f: f"So the answer is {a.text}, but it might also be {b.text}."),
    ("or-else", lambda a, b, f: f"The answer should be {a.text}, or else {b.text}."),
    ("hash-lines", lambda a, b, f: f"#### {b.text}\n#### {a.text}"),
    ("and-or", lambda a, b, f: f"The answer is {a.text} and/or {b.text}."),
    ("paren-maybe", lambda a, b, f: f"The answer is {a.text} (maybe {b.text})."),
    ("probably-maybe", lambda a, b, f: f"The answer is probably {a.text}, maybe {b.text}."),
    ("alternatively-colon", lambda a, b, f: f"The answer is {a.text}. Alternatively: {b.text}."),
    ("perhaps-its-though", lambda a, b, f: f"I'd say the answer is {a.text}. Perhaps it's {b.text} though."),
    ("rule-possibly", lambda a, b, f: f"The answer is {a.text}.\n\n---\n\nOr possibly {b.text}."),
    ("hmm-or", lambda a, b, f: f"The final answer is {a.math}. Hmm, or {b.math}."),
    ("then-again", lambda a, b, f: f"The answer is {a.text}. Then again, it could be {b.text}."),
    ("could-be-either", lambda a, b, f: f"It could be {b.text} or {a.text}."),
]

# --- math near misses: one committed answer (A), written close to a hedge -----------------------
MATH_NEAR: list[tuple[str, Template]] = [
    ("self-correction", lambda a, b, f:
        f"The answer is {b.text}. Wait, let me recheck: that step was wrong. "
        f"Redoing it carefully gives {a.text}. So the answer is {a.text}."),
    ("case-analysis", lambda a, b, f:
        f"Case 1: $x = {b.latex}$ fails the condition. Case 2: $x = {a.latex}$ works. "
        f"Therefore the answer is {a.math}."),
    ("either-then-check", lambda a, b, f:
        f"Either $x = {a.latex}$ or $x = {b.latex}$; checking, $x = {b.latex}$ fails. "
        f"So the answer is {a.math}."),
    ("five-or-more-restated", lambda a, b, f:
        f"We need boxes with 5 or more apples, or 3 or fewer pears. Counting them, "
        f"the answer is {a.text}."),
    ("or-more-after", lambda a, b, f: f"The answer is {a.text}, which holds for 5 or more terms."),
    ("equivalently", lambda a, b, f: f"The answer is {a.math} or, equivalently, ${f}$."),
    ("boxed-ie", lambda a, b, f: f"So the answer is $\\boxed{{{a.latex}}}$, i.e. ${f}$."),
    ("same-twice", lambda a, b, f: f"The answer is {a.text}. Or, written another way, ${f}$."),
    ("not-b", lambda a, b, f: f"It is not {b.math}, since that fails; the answer is {a.math}."),
    ("wrong-then-right-boxed", lambda a, b, f:
        f"At first it seems like {b.text}, but that double counts. Correcting for it, "
        f"the answer is $\\boxed{{{a.latex}}}$."),
    ("options-rejected", lambda a, b, f:
        f"Could it be {b.math}? No: substituting gives a contradiction. "
        f"Hence the final answer is {a.math}."),
    ("maybe-earlier-reasoning", lambda a, b, f:
        f"Maybe we can factor it. Possibly {b.text} works, so test it: it fails.\n"
        f"Testing {a.text} instead, it works.\nThe answer is {a.text}."),
    ("restated-final", lambda a, b, f: f"The answer is {a.text}.\n\nFinal answer: {a.text}"),
    ("boxed-twice-same", lambda a, b, f:
        f"We get $\\boxed{{{a.latex}}}$. Checking again, the result is $\\boxed{{{f}}}$."),
    ("values-before", lambda a, b, f:
        f"The roots are 2 or 3, and {b.text} is excluded by the domain, so the answer is {a.text}."),
    ("actually-in-reasoning", lambda a, b, f:
        f"Actually, we only need the sum. Adding the parts gives {a.text}. The answer is {a.text}."),
    ("alternatively-method", lambda a, b, f:
        f"The answer is {a.text}. Alternatively, we could have used the formula directly, "
        f"which gives the same value."),
    ("might-be-tempting", lambda a, b, f:
        f"It might be tempting to answer {b.text}, but that ignores the last step.\n\n"
        f"The final answer is {a.math}."),
    ("probably-single", lambda a, b, f: f"The answer is probably {a.text}."),
    ("no-then-answer", lambda a, b, f:
        f"The answer is {b.text}. Wait, no. Recounting the cases gives {a.text}.\n"
        f"The answer is {a.text}."),
]

# near misses with a structured gold (intervals, sets, \pm) built from a real integer answer n
STRUCTURED_NEAR: list[tuple[str, Callable[[int, int], tuple[str, str]]]] = [
    ("interval-closed", lambda n, m: (f"[{min(n, m)},{max(n, m) + 1}]",
        f"So $x$ lies between {min(n, m)} and {max(n, m) + 1}, i.e. "
        f"$\\boxed{{[{min(n, m)}, {max(n, m) + 1}]}}$.")),
    ("interval-half-open", lambda n, m: (f"[{min(n, m)},{max(n, m) + 1})",
        f"Either endpoint could be checked; only the left one is included. "
        f"The answer is $[{min(n, m)}, {max(n, m) + 1})$.")),
    ("set-two", lambda n, m: (f"{n}, {n + 1}",
        f"So $x = {n}$ or $x = {n + 1}$, and both satisfy the equation. "
        f"The solutions are $\\boxed{{{n}, {n + 1}}}$.")),
    ("pm", lambda n, m: (f"\\pm {abs(n) + 1}",
        f"So $x^2 = {(abs(n) + 1) ** 2}$, and $x = {abs(n) + 1}$ or $x = -{abs(n) + 1}$. "
        f"The answer is $\\boxed{{\\pm {abs(n) + 1}}}$.")),
    ("union", lambda n, m: (f"(-\\infty,{n})\\cup({n + 2},\\infty)",
        f"The inequality holds for $x < {n}$ or $x > {n + 2}$, so the answer is "
        f"$\\boxed{{(-\\infty, {n}) \\cup ({n + 2}, \\infty)}}$.")),
]

# --- gsm8k: integers; A is where the scorer takes its answer (last ``####``, else last number)
GSM_HEDGES: list[tuple[str, Callable[[int, int, int], str]]] = [
    ("smollm-hash-lines", lambda a, b, c: f"She has {a} left.\n#### {b}\n#### {c}\n#### {a}"),
    ("hash-or", lambda a, b, c: f"So the total is {a}.\n#### {a} or {b}"),
    ("answer-or-maybe-then-hash", lambda a, b, c: f"The answer is {a}, or maybe {b}.\n#### {a}"),
    ("hash-then-possibly", lambda a, b, c: f"#### {a}\nOr possibly {b}."),
    ("dollars-b-or-a", lambda a, b, c: f"She makes ${b} or ${a}."),
    ("hash-two-lines", lambda a, b, c: f"#### {b}\n#### {a}"),
    ("maybe-then-bare", lambda a, b, c: f"Maybe {b}. So she has {a} apples."),
    ("could-also-then-hash", lambda a, b, c: f"The answer is {a}.\nIt could also be {b}.\n#### {a}"),
    ("either-or-bare", lambda a, b, c: f"It is either {b} or {a}."),
    ("hash-paren-maybe", lambda a, b, c: f"#### {a} (maybe {b})"),
]
GSM_NEAR: list[tuple[str, Callable[[int, int, int], str]]] = [
    ("restated-hash", lambda a, b, c: f"The answer is {a}.\n#### {a}"),
    ("hash-twice-same", lambda a, b, c: f"#### {a}\n#### {a}"),
    ("five-or-more", lambda a, b, c: f"Each bag holds 5 or more apples. In total {b} - {b} + {a} = {a}.\n#### {a}"),
    ("self-correction", lambda a, b, c: f"That gives {b}. Wait, I forgot the last day. Adding it, {a}.\n#### {a}"),
    ("dollars", lambda a, b, c: f"She makes {a} dollars, or ${a}.\n#### {a}"),
    ("not-b", lambda a, b, c: f"The answer is {a}, not {b}.\n#### {a}"),
    ("or-fewer-after", lambda a, b, c: f"#### {a}\nThat is the most for 3 or fewer people."),
    ("case-analysis", lambda a, b, c: f"If she sells {b}, she runs out; so she sells {a}.\n#### {a}"),
    ("hash-no-space", lambda a, b, c: f"Total: {a}\n####{a}"),
    ("commas", lambda a, b, c: f"So {a:,} in all.\n#### {a:,}"),
]

# --- choice: letters A-E
CHOICE_HEDGES: list[tuple[str, Callable[[str, str], str]]] = [
    ("or-maybe", lambda a, b: f"The answer is ({a}). Or maybe ({b})."),
    ("either", lambda a, b: f"Either ({b}) or ({a})."),
    ("answer-comma-possibly", lambda a, b: f"Answer: {a}, possibly {b}"),
    ("could-also-be", lambda a, b: f"The answer is ({a}). It could also be ({b})."),
    ("boxed-or-maybe", lambda a, b: f"\\boxed{{{a}}} or maybe \\boxed{{{b}}}"),
    ("line-actually", lambda a, b: f"The answer is ({a}).\nActually, ({b})."),
    ("paren-or", lambda a, b: f"The answer is ({a}) (or ({b}))."),
    ("perhaps-then-answer", lambda a, b: f"Perhaps ({b})? The answer is ({a})."),
    ("alternatively", lambda a, b: f"The answer is ({a}). Alternatively, ({b})."),
    ("slash", lambda a, b: f"The answer is ({a})/({b})."),
]
CHOICE_NEAR: list[tuple[str, Callable[[str, str], str]]] = [
    ("eliminated", lambda a, b: f"({b}) is too large, so it is not ({b}). The answer is ({a})."),
    ("self-correction", lambda a, b: f"The answer is ({b}). Wait, recheck: ({b}) fails. The answer is ({a})."),
    ("restated", lambda a, b: f"The answer is ({a}).\nAnswer: {a}"),
    ("i-pronoun", lambda a, b: f"The answer is ({a}). Or maybe I should say it more plainly: ({a})."),
    ("not-b", lambda a, b: f"The answer is ({a}), not ({b})."),
]


def _golds() -> tuple[list[Answer], list[int]]:
    rows = [json.loads(line) for line in CORPUS.open()]
    math_golds: list[Answer] = []
    seen: set[str] = set()
    ints: list[int] = []
    for r in rows:
        g = r["gold"].strip()
        if r["source"].startswith("gsm8k"):
            if _INT.fullmatch(g) and int(g) not in ints:
                ints.append(int(g))
        elif g not in seen:
            seen.add(g)
            a = _answer(g)
            if a is not None:
                math_golds.append(a)
    return math_golds, ints


def generate(per_template: int = 30, seed: int = 15) -> Iterator[dict]:
    """Every row of the corpus (deterministic for a given seed and corpus)."""
    rnd = random.Random(seed)
    math_golds, ints = _golds()
    math_ints = [a for a in math_golds if _INT.fullmatch(a.latex)]

    def pick(golds: list[Answer], n: int) -> list[tuple[Answer, Answer]]:
        out = []
        for a in rnd.sample(golds, min(n, len(golds))):
            b = rnd.choice([g for g in golds if g.latex != a.latex])
            out.append((a, b))
        return out

    for kind, templates in (("hedge", MATH_HEDGES), ("near_miss", MATH_NEAR)):
        for i, (name, tpl) in enumerate(templates):
            for a, b in pick(math_golds, per_template):
                yield {"template": f"math/{name}", "fold": round2.fold(i), "kind": kind,
                       "scorer": "math", "response": tpl(a, b, _other_form(a)), "gold": a.latex}
    for i, (name, stpl) in enumerate(STRUCTURED_NEAR, start=len(MATH_NEAR)):
        for a, b in pick(math_ints, per_template // 2):
            gold, response = stpl(int(a.latex), int(b.latex))
            yield {"template": f"math/{name}", "fold": round2.fold(i), "kind": "near_miss",
                   "scorer": "math", "response": response, "gold": gold}
    for kind, gtemplates in (("hedge", GSM_HEDGES), ("near_miss", GSM_NEAR)):
        for i, (name, gtpl) in enumerate(gtemplates):
            for n in rnd.sample(ints, per_template):
                m1, m2 = rnd.sample([x for x in ints if x != n], 2)
                yield {"template": f"gsm8k/{name}", "fold": round2.fold(i), "kind": kind,
                       "scorer": "gsm8k", "response": gtpl(n, m1, m2), "gold": str(n)}
    letters = "ABCDE"
    for kind, ctemplates in (("hedge", CHOICE_HEDGES), ("near_miss", CHOICE_NEAR)):
        for i, (name, ctpl) in enumerate(ctemplates):
            for right in letters:
                for other in letters:
                    if right != other:
                        yield {"template": f"choice/{name}", "fold": round2.fold(i), "kind": kind,
                               "scorer": "choice", "response": ctpl(right, other), "gold": right}
    yield from round2.generate(rnd, math_golds, ints, per_template)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, help="write the rows as JSONL to this file")
    args = ap.parse_args()
    rows = list(generate())
    counts = Counter((r["kind"], r["fold"]) for r in rows)
    sys.stdout.write(json.dumps({f"{k}/{f}": n for (k, f), n in sorted(counts.items())}) + "\n")
    classes = Counter((r.get("class", "round1"), r["kind"], r["fold"]) for r in rows)
    for (c, k, f), n in sorted(classes.items()):
        sys.stdout.write(f"{c:24} {k:10} {f:9} {n}\n")
    if args.write:
        with args.write.open("w") as fh:
            for r in rows:
                fh.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
