"""The hand-written judgements docs/CORRECTNESS.md prints beside the figures: every corpus row
where a profile disagrees with its label, and every Math-Verify test case a profile judges
differently from the library's expectation (a new disagreement has none and is flagged)."""

from __future__ import annotations

PROFILES = ("math_verify", "math")

# Row index in corpus.jsonl → (gold as a check that the row is the one judged, judgement).
JUDGEMENTS: dict[int, tuple[str, str]] = {
    5859: (
        "10{,}000",
        "Label error, both profiles right. The response's final answer is \\boxed{10000} and "
        "the gold is 10{,}000 (LaTeX thousands separator): the same number. The corpus "
        "labels come from automatic matching that compared strings.",
    ),
}


# Math-Verify cases a profile judges differently from the library's test expectation:
# (gold, start of pred, expected) → judgement (the first two columns identify the case).
MV_JUDGEMENTS: dict[tuple[str, str, bool], str] = {
    ("1,22", "1.22", True): (
        "Keep. Gold ambiguity: wrapped in \\boxed{} (as verl and both profiles do) `1,22` is the "
        "set {1, 22}; the library's test reads it as the decimal-comma number 1.22, which "
        "raw `parse` does. MATH golds like `1,2` are lists, so we keep the list reading; a "
        "decimal-comma gold must be written `1.22` (or `1{,}22`)."
    ),
    ("$9$", "Answer $ \n 9 \n $", False): (
        "Keep. Their test expects no extraction because their config has no expression "
        "extractor; with default extraction the answer 9 is found, and 9 is right: paying a "
        "right answer is what a reward must do."
    ),
    ("$9$", "Answer \\( \n 9 \n \\)", False): "Keep, as above.",
    ("$1 - \\frac{1}{\\mathrm{e}}$", "$1 + \\frac{1}{\\mathrm{e}}$", True): (
        "Keep. The expected verdict is itself a false positive (1 - 1/e is not 1 + 1/e): raw "
        "`parse` fails on both and keeps only the `1`, so the library calls them equal. "
        "Boxed, the gold does not parse and nothing matches, which is the right outcome."
    ),
    ("$(\\begin{pmatrix}\\frac{1}{3}\\\\ \\frac{1}{5} \\end{pmatrix})$", "$\\begin{pmatrix}0.33", True): (
        "Keep. Their test passes precision=2; at the default (6 places) 0.33 is not 1/3, "
        "and the `math` profile's exactness rule needs a decimal to carry >= 3 significant "
        "digits. A reward for exact answers must not pay a 2-digit rounding (a policy "
        "learns to round)."
    ),
    ("$(\\frac{3}{5},\\frac{8}{3}]$", "$(0.6,2.6667]$", True): (
        "Keep. Their test passes precision=2. 2.6667 is 8/3 rounded to 4 places; both "
        "profiles pay decimals only to the library's default 6 places (0.333333 for 1/3), "
        "so a policy cannot trade exactness for fewer digits."
    ),
    ("$x \\in [-2,7]$", "$-2 \\\\le x \\\\le 7$", True): (
        "Fixed in `math` (rule 4, `rescued`): the same solution set, which the library "
        "accepts only with allow_set_relation_comp=True (their test sets it). "
        "`math_verify` stays the library as released."
    ),
    ("$x \\in [-2,7]$", "$-2 \\\\le x \\\\le 7$", False): (
        "Keep in `math`: the same pair expected True above with the flag on; this row tests "
        "the flag's default, not mathematics (one of the two must differ in any profile)."
    ),
    ("$f(x)$", "$f(y)$", True): (
        "Keep. Their test passes strict=False; by default (both profiles) variables matter, "
        "and f(y) for f(x) is a different answer unless the question says otherwise."
    ),
}
