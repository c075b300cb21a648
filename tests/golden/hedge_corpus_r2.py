"""Round 2 of the hedge corpus (issue 26): the classes the round-1 templates did not generate.

Imported by ``hedge_corpus.py``, which writes these rows after its own with the same random
stream (round-1 rows are unchanged) and the same folds: within each list below, every fifth
template (``index % 5 == 4``) is held out. Each row also names its ``class``.

Hedges (``kind == "hedge"``: the scorer must refuse; for ``unclosed_think`` and
``wrong_digit_groups`` the response is not a hedge but must not be paid either):
``conditional``, ``parenthetical``, ``number_words``, ``symbols``, ``invisible``,
``unicode_digits``, ``think_hedge`` (a hedge after ``</think>``), ``unclosed_think``,
``wrong_digit_groups`` (``1 200`` for a gold the library reads it as, 201 or 200).

Near misses (``kind == "near_miss"``: one committed answer, the gold, must be paid):
``think_exploration`` (alternatives inside a closed think block, or one opened by the prompt),
``restated_words`` (``6 (that is, six)``), ``case_discard``, ``self_correction``,
``conditional_one`` (a condition, one value), ``digit_groups`` (``1 000`` for 1000),
``scientific_gold`` (``\\boxed{0.00001}`` for gold ``1e-5``), ``unicode_digits_right``
(a full-width five in a box, for gold 5).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

A = Any  # hedge_corpus.Answer (latex, plain, text, math); not imported: no cycle

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def words(n: int) -> str:
    """0 <= n < 1000 in English words (``31`` → ``thirty-one``)."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        t, u = divmod(n, 10)
        return _TENS[t - 2] + (f"-{_ONES[u]}" if u else "")
    h, rest = divmod(n, 100)
    return f"{_ONES[h]} hundred" + (f" and {words(rest)}" if rest else "")


def wide(s: str) -> str:
    """ASCII digits as full-width digits (U+FF10-FF19)."""
    return "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in s)


def grouped(n: int, sep: str) -> str:
    return f"{n:,}".replace(",", sep)


Tpl = Callable[[A, A, str], str]
# math hedges by class: A is the gold, B another real answer; W is B's integer in words
MATH_HEDGES: dict[str, list[tuple[str, Tpl]]] = {
    "conditional": [
        ("unless-in-which-case", lambda a, b, w: f"Final answer: {a.math}, unless the ordering "
                                                 f"matters, in which case {b.math}."),
        ("assuming-otherwise", lambda a, b, w: f"The answer is {a.text}, assuming the order "
                                               f"matters; otherwise {b.text}."),
        ("if-and-if", lambda a, b, w: f"The answer is {a.text} if the boxes are distinct, and "
                                      f"{b.text} if they are identical."),
        ("branches", lambda a, b, w: f"Assuming repetition is allowed, the answer is {b.text}; "
                                     f"without repetition, the answer is {a.text}."),
        ("other-reading", lambda a, b, w: f"The final answer is {a.math}; under the other "
                                          f"reading of the problem it is {b.math}."),
        ("if-count-comma", lambda a, b, w: f"The answer is {a.text}. If we count the start, "
                                           f"{b.text}."),
        ("in-case", lambda a, b, w: f"Answer: {a.text}. In case the endpoints are included: "
                                    f"{b.text}."),
        ("provided-else", lambda a, b, w: f"The answer is {a.text}, provided $n$ is even, "
                                          f"else {b.text}."),
        ("or-if", lambda a, b, w: f"The answer is {a.text}, or, if the start counts, {b.text}."),
        ("other-case", lambda a, b, w: f"The answer is {a.text}. In the other case it is "
                                       f"{b.text}."),
    ],
    "parenthetical": [
        ("paren-if", lambda a, b, w: f"The answer is {a.text} ({b.text} if we count the start)."),
        ("paren-bare", lambda a, b, w: f"The final answer is {a.math} ({b.math})."),
        ("paren-question", lambda a, b, w: f"Answer: {a.text} ({b.text}?)"),
        ("paren-unless", lambda a, b, w: f"So the answer is $\\boxed{{{a.latex}}}$ ({b.math} "
                                         f"unless the order matters)."),
        ("paren-assuming", lambda a, b, w: f"The answer is {a.text} ({b.text} assuming "
                                           f"repetition)."),
    ],
    "number_words": [
        ("or-word", lambda a, b, w: f"The answer is {a.text} or {w}."),
        ("maybe-word", lambda a, b, w: f"The final answer is {a.math}. Maybe {w}."),
        ("either-word", lambda a, b, w: f"The answer is either {a.text} or {w}."),
        ("word-or-boxed", lambda a, b, w: f"It is {w} or $\\boxed{{{a.latex}}}$."),
        ("possibly-word", lambda a, b, w: f"The answer is {a.text}, possibly {w}."),
    ],
    "symbols": [
        ("logical-or", lambda a, b, w: f"The answer is {a.text} \u2228 {b.text}."),
        ("lor", lambda a, b, w: f"The answer is ${a.latex} \\lor {b.latex}$."),
        ("vee-boxed", lambda a, b, w: f"The answer is $\\boxed{{{a.latex} \\vee {b.latex}}}$."),
        ("bar", lambda a, b, w: f"The answer is {a.text} | {b.text}."),
        ("text-or", lambda a, b, w: f"The answer is {a.text} \\text{{ or }} {b.text}."),
    ],
    "invisible": [
        ("zwj-or", lambda a, b, w: f"The answer is {a.text} \u200dor\u200d {b.text}."),
        ("soft-hyphen-or", lambda a, b, w: f"The answer is {a.text} o\u00adr {b.text}."),
        ("zwsp-maybe", lambda a, b, w: f"The final answer is {a.math}.\u200b Or\u200b maybe "
                                       f"{b.math}."),
        ("word-joiner", lambda a, b, w: f"The answer is {a.text}, or\u2060 possibly {b.text}."),
        ("bom-either", lambda a, b, w: f"The answer is \ufeffeither {a.text} \ufeffor {b.text}."),
    ],
    "think_hedge": [
        ("think-then-or", lambda a, b, w: f"<think>Let me see.</think> The answer is {a.text} "
                                          f"or {b.text}."),
        ("think-then-maybe", lambda a, b, w: f"<think>\nComputing...\n</think>\n\nThe final "
                                             f"answer is {a.math}. Or maybe {b.math}."),
        ("prompt-think-either", lambda a, b, w: f"Hmm.\n</think>\nEither {b.text} or {a.text}."),
        ("think-boxes", lambda a, b, w: f"<think>ok</think>$\\boxed{{{b.latex}}}$, or "
                                        f"$\\boxed{{{a.latex}}}$"),
        ("think-conditional", lambda a, b, w: f"<think>two readings</think>The answer is "
                                              f"{a.text}, unless order matters, in which case "
                                              f"{b.text}."),
    ],
    "unclosed_think": [
        ("cut-so-answer-is", lambda a, b, w: f"<think>\nLet me compute. It is {a.text}.\nSo the "
                                             f"answer is"),
        ("cut-after-boxed", lambda a, b, w: f"<think>The answer is $\\boxed{{{a.latex}}}$."),
        ("cut-reopened", lambda a, b, w: f"<think>a</think> The answer is {a.text}.\n<think>"
                                         f"Wait, let me double-check"),
        ("cut-long", lambda a, b, w: "<think>\n" + "We try again. " * 20 + f"Got {a.text}."),
        ("cut-final-answer", lambda a, b, w: f"<think>\nThe final answer is {a.math}"),
    ],
}

MATH_NEAR: dict[str, list[tuple[str, Tpl]]] = {
    "think_exploration": [
        ("maybe-or-same-line", lambda a, b, w: f"<think>Maybe {b.text}. Or {a.text}.</think> The "
                                               f"answer is $\\boxed{{{a.latex}}}$."),
        ("could-be-lines", lambda a, b, w: f"<think>\nIt could be {b.text} or {a.text}. "
                                           f"Checking...\n</think>\n\nThe final answer is {a.math}."),
        ("prompt-opened", lambda a, b, w: f"Perhaps {b.text}? Or {a.text}.\n</think>\n"
                                          f"$\\boxed{{{a.latex}}}$"),
        ("two-blocks", lambda a, b, w: f"<think>The answer is {b.text}.</think>\n<think>Recheck: "
                                       f"{a.text}.</think> The answer is {a.text}."),
        ("either-inside", lambda a, b, w: f"<think>Either {b.text} or {a.text}; {b.text} "
                                          f"fails.</think>The answer is {a.math}."),
    ],
    "restated_words": [
        ("that-is", lambda a, b, w: f"The answer is {a.text} (that is, {w})."),
        ("which-is", lambda a, b, w: f"Answer: {a.text}, which is {w}."),
        ("boxed-words", lambda a, b, w: f"The final answer is $\\boxed{{{a.latex}}}$ ({w})."),
        ("or-in-words", lambda a, b, w: f"So there are {a.text} ways, or {w} in words."),
        ("written-out", lambda a, b, w: f"The answer is {a.text}; written out, {w}."),
    ],
    "case_discard": [
        ("if-fails-if-holds", lambda a, b, w: f"If $x = {b.latex}$, the condition fails; if "
                                              f"$x = {a.latex}$, it holds. So the answer is {a.math}."),
        ("cases", lambda a, b, w: f"Case {b.text}: impossible. Case {a.text}: works. The "
                                  f"answer is {a.text}."),
        ("extraneous", lambda a, b, w: f"The candidates are {b.math} and {a.math}; {b.math} is "
                                       f"extraneous. The answer is {a.math}."),
        ("other-root-rejected", lambda a, b, w: f"The answer is {a.text}; the other root, "
                                                f"{b.text}, is rejected."),
        ("or-fails", lambda a, b, w: f"So it is {a.text} or {b.text}, and {b.text} fails the "
                                     f"check. The answer is {a.text}."),
    ],
    "self_correction": [
        ("wait-redo", lambda a, b, w: f"The answer is {b.text}. Wait, that ignores the last "
                                      f"step. Redoing it: the answer is {a.text}."),
        ("first-got", lambda a, b, w: f"I first got {b.text}, but that was wrong. The answer "
                                      f"is {a.text}."),
        ("maybe-no", lambda a, b, w: f"Maybe {b.text}? No, recounting gives {a.text}.\nThe "
                                     f"answer is {a.text}."),
        ("is-wrong", lambda a, b, w: f"{b.math} is wrong because of the sign. The correct "
                                     f"answer is {a.math}."),
        ("earlier", lambda a, b, w: f"Earlier I wrote {b.text}; correcting the sign, the "
                                    f"answer is $\\boxed{{{a.latex}}}$."),
    ],
    "conditional_one": [
        ("assuming-convention", lambda a, b, w: f"The answer is {a.text}, assuming the usual "
                                                f"convention."),
        ("if-start", lambda a, b, w: f"If we count the start, the answer is {a.text}."),
        ("if-distinct", lambda a, b, w: f"The answer is {a.math} if the boxes are distinct, "
                                        f"which they are."),
        ("unless-misread", lambda a, b, w: f"Unless I misread the problem, the answer is "
                                           f"{a.text}."),
        ("provided-holds", lambda a, b, w: f"Provided $n > 0$, which holds, the answer is "
                                           f"{a.text}."),
    ],
}

# from real integer answers n (GSM8K golds >= 1000): (gold, response)
IntTpl = Callable[[int], tuple[str, str]]
GROUPS: dict[tuple[str, str], list[tuple[str, IntTpl]]] = {
    ("near_miss", "digit_groups"): [
        ("space", lambda n: (str(n), f"The answer is $\\boxed{{{grouped(n, ' ')}}}$.")),
        ("thin-space", lambda n: (str(n), f"The answer is $\\boxed{{{grouped(n, chr(0x2009))}}}$.")),
        ("latex-thin", lambda n: (str(n), f"So the total is $\\boxed{{{grouped(n, chr(92) + ',')}}}$.")),
        ("narrow-nbsp", lambda n: (str(n), f"The answer is {grouped(n, chr(0x202f))}.")),
        ("braced-comma", lambda n: (grouped(n, ' '), f"The answer is $\\boxed{{{grouped(n, '{,}')}}}$.")),
    ],
    ("hedge", "wrong_digit_groups"): [
        ("sum-reading", lambda n: (str(n // 1000 + n % 1000), f"$\\boxed{{{grouped(n, ' ')}}}$")),
        ("product-reading", lambda n: (str(n // 1000 * (n % 1000)),
                                       f"The answer is $\\boxed{{{grouped(n, ' ')}}}$.")),
        ("thin-sum", lambda n: (str(n // 1000 + n % 1000), f"$\\boxed{{{grouped(n, chr(0x2009))}}}$")),
        ("latex-thin-product", lambda n: (str(n // 1000 * (n % 1000)),
                                          f"$\\boxed{{{grouped(n, chr(92) + ',')}}}$")),
        ("nbsp-sum", lambda n: (str(n // 1000 + n % 1000), f"\\boxed{{{grouped(n, chr(0xa0))}}}")),
    ],
    ("near_miss", "scientific_gold"): [
        ("e-minus", lambda n: (f"{n}e-5", f"The answer is $\\boxed{{{Decimal(n).scaleb(-5):f}}}$.")),
        ("e-plus", lambda n: (f"{n}e+10", f"\\boxed{{{Decimal(n).scaleb(10):f}}}")),
        ("capital-e", lambda n: (f"{n}E-3", f"The answer is {Decimal(n).scaleb(-3):f}.")),
        ("mantissa-decimal", lambda n: (f"{n / 10}e-06", f"\\boxed{{{Decimal(str(n / 10)).scaleb(-6):f}}}")),
        ("e-twenty", lambda n: (f"{n}e20", f"So the answer is \\boxed{{{Decimal(n).scaleb(20):f}}}.")),
    ],
    ("near_miss", "unicode_digits_right"): [
        ("wide-boxed", lambda n: (str(n), f"The answer is $\\boxed{{{wide(str(n))}}}$.")),
        ("wide-plain", lambda n: (str(n), f"The answer is {wide(str(n))}.")),
        ("arabic-indic", lambda n: (str(n), "The answer is " + "".join(
            chr(0x660 + int(c)) for c in str(n)) + ".")),
        ("math-bold", lambda n: (str(n), "\\boxed{" + "".join(
            chr(0x1D7CE + int(c)) for c in str(n)) + "}")),
        ("wide-hash", lambda n: (str(n), f"Total:\n#### {wide(str(n))}")),
    ],
    ("hedge", "unicode_digits"): [
        ("wide-or", lambda n: (str(n), f"The answer is {n} or {wide(str(n + 1))}.")),
        ("wide-maybe", lambda n: (str(n), f"The final answer is ${n}$. Maybe ${wide(str(n + 7))}$.")),
        ("arabic-either", lambda n: (str(n), "It is either " + "".join(
            chr(0x660 + int(c)) for c in str(n + 2)) + f" or {n}.")),
        ("wide-paren", lambda n: (str(n), f"The answer is {n} (or {wide(str(n * 2))}).")),
        ("wide-boxes", lambda n: (str(n), f"$\\boxed{{{wide(str(n + 1))}}}$ ... $\\boxed{{{n}}}$")),
    ],
}

GsmTpl = Callable[[int, int, str], str]
# gsm8k: a is the gold (where the scorer takes its answer), b another gold, w = b in words
GSM: dict[tuple[str, str], list[tuple[str, GsmTpl]]] = {
    ("hedge", "gsm8k_round2"): [
        ("zwj-hash", lambda a, b, w: f"#### {a} \u200dor\u200d {b}"),
        ("or-word", lambda a, b, w: f"She has {a} left.\n#### {a} or {w}"),
        ("conditional", lambda a, b, w: f"#### {a}\n({b} if she keeps one for herself)"),
        ("think-hash-lines", lambda a, b, w: f"<think>hmm</think>\n#### {b}\n#### {a}"),
        ("unclosed", lambda a, b, w: f"<think>\nShe has {a} left.\n#### {a}"),
        ("unless", lambda a, b, w: f"The answer is {a}, unless she sold more, in which case {b}."),
        ("soft-hyphen", lambda a, b, w: f"So she makes ${a} o\u00adr ${b}."),
        ("maybe-word", lambda a, b, w: f"#### {a}\nMaybe {w}."),
        ("prompt-think-or", lambda a, b, w: f"ok\n</think>\nIt is either {b} or {a}."),
        ("otherwise", lambda a, b, w: f"#### {a}\nOtherwise {b}."),
    ],
    ("near_miss", "gsm8k_round2"): [
        ("think-explore", lambda a, b, w: f"<think>Maybe {b}. Or {a}.</think> #### {a}"),
        ("prompt-think", lambda a, b, w: f"It could be {b} or {a}.\n</think>\nSo {a} in all.\n#### {a}"),
        ("grouped", lambda a, b, w: f"Total: {grouped(a, ' ')}\n#### {grouped(a, ' ')}"),
        ("think-last-number", lambda a, b, w: f"<think>{b} apples? no.</think>She has {a} apples."),
        ("wide", lambda a, b, w: f"#### {wide(str(a))}"),
    ],
}

ChoiceTpl = Callable[[str, str], str]
CHOICE: dict[tuple[str, str], list[tuple[str, ChoiceTpl]]] = {
    ("hedge", "choice_round2"): [
        ("zwj-or", lambda a, b: f"The answer is ({a}) \u200dor\u200d ({b})."),
        ("unless", lambda a, b: f"The answer is ({a}), unless the graph is directed, in which "
                                f"case ({b})."),
        ("think-then-or-maybe", lambda a, b: f"<think>x</think>The answer is ({a}). Or maybe ({b})."),
        ("unclosed", lambda a, b: f"<think>\nThe answer is ({a})."),
        ("paren-if", lambda a, b: f"The answer is ({a}) (({b}) if we count the start)."),
    ],
    ("near_miss", "choice_round2"): [
        ("think-explore", lambda a, b: f"<think>Maybe ({b}). Or ({a}).</think> The answer is ({a})."),
        ("prompt-think", lambda a, b: f"({b}) or ({a})?\n</think>\nAnswer: {a}"),
        ("wide-letter", lambda a, b: f"The answer is ({chr(ord(a) + 0xFEE0)})."),
        ("eliminated-after", lambda a, b: f"The answer is ({a}); ({b}) is ruled out."),
        ("invisible-inside", lambda a, b: f"The answer is \u200b({a})\u200b."),
    ],
}


def fold(index: int) -> str:
    """The fold of the ``index``-th template of a list (both rounds): every fifth is held out."""
    return "held_out" if index % 5 == 4 else "dev"


def generate(rnd: random.Random, math_golds: list[A], ints: list[int],
             per_template: int) -> Iterator[dict]:
    """The round-2 rows (``hedge_corpus.generate`` passes its random stream and golds)."""
    small = [a for a in math_golds if a.plain is not None and a.plain.isdigit()
             and int(a.plain) < 1000]

    def pairs(golds: list[A]) -> Iterator[tuple[A, A]]:
        for a in rnd.sample(golds, min(per_template, len(golds))):
            yield a, rnd.choice([g for g in golds if g.latex != a.latex])

    for kind, table in (("hedge", MATH_HEDGES), ("near_miss", MATH_NEAR)):
        for cls, templates in table.items():
            worded = cls in ("number_words", "restated_words")
            for i, (name, tpl) in enumerate(templates):
                for a, b in pairs(small if worded else math_golds):
                    w = words(int((a if cls == "restated_words" else b).plain)) if worded else ""
                    yield {"template": f"math/{name}", "class": cls, "fold": fold(i),
                           "kind": kind, "scorer": "math", "response": tpl(a, b, w),
                           "gold": a.latex}
    big = [n for n in ints if 1000 <= n < 10**6 and n % 1000 >= 100]
    for (kind, cls), itemplates in GROUPS.items():
        pool = big if "digit_groups" in cls else [n for n in ints if 0 < n < 10**6]
        for i, (name, itpl) in enumerate(itemplates):
            for n in rnd.sample(pool, min(per_template, len(pool))):
                gold, response = itpl(n)
                yield {"template": f"math/{name}", "class": cls, "fold": fold(i), "kind": kind,
                       "scorer": "math", "response": response, "gold": gold}
    for (kind, cls), gtemplates in GSM.items():
        for i, (name, gtpl) in enumerate(gtemplates):
            for n in rnd.sample(ints, per_template):
                m = rnd.choice([x for x in ints if x != n and 0 <= x < 1000])
                yield {"template": f"gsm8k/{name}", "class": cls, "fold": fold(i), "kind": kind,
                       "scorer": "gsm8k", "response": gtpl(n, m, words(m)), "gold": str(n)}
    for (kind, cls), ctemplates in CHOICE.items():
        for i, (name, ctpl) in enumerate(ctemplates):
            for right in "ABCDE":
                for other in "ABCDE":
                    if right != other:
                        yield {"template": f"choice/{name}", "class": cls, "fold": fold(i),
                               "kind": kind, "scorer": "choice", "response": ctpl(right, other),
                               "gold": right}
