"""Scoring correctness figures, and ``docs/CORRECTNESS.md``.

    $ python -m bench.correctness                # prints the figures, rewrites docs/CORRECTNESS.md
    $ python -m bench.correctness --no-write     # prints only

In-process, one core: every row of ``../shared/data/corpus.jsonl`` through the ``math_verify``
and ``math`` profiles (and ``gsm8k`` on the GSM8K rows), agreement with the corpus labels,
every disagreement with a hand-written judgement (``JUDGEMENTS`` below: a new disagreement
has none and is flagged), the rows where the two math profiles differ, the speed of each
profile, Math-Verify's own test cases (``tests/golden/math_verify_cases*.jsonl``) right per
profile against stock math-verify with every case either profile judges differently from the
library's expectation, and the generated hedge corpus (``tests/golden/hedge_corpus.py``) per
fold. The service-level checks of the same figures are ``tests/test_golden.py``,
``tests/test_hedges.py`` and ``tests/test_corpus_agreement.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from math_verify import parse, verify

from bench import correctness_r2, correctness_r3
from reward_service.scorers import rule_of
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.math_verify_scorer import boxed_gold
from reward_service.scorers.patches import install_patches
from reward_service.scorers.registry import SCORERS
from tests.golden.hedge_corpus import generate as hedge_corpus
from tests.helpers import DATA

ROOT = Path(__file__).resolve().parents[1]
CORPUS = DATA / "corpus.jsonl"
MV_CASES = ROOT / "tests" / "golden" / "math_verify_cases.jsonl"
MV_OTHERS = ROOT / "tests" / "golden" / "math_verify_cases_other_settings.jsonl"
GOLDEN = ROOT / "tests" / "golden" / "cases.jsonl"
DOC = ROOT / "docs" / "CORRECTNESS.md"
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


# Decisions documented with the figures (issue 15); the rules themselves are in
# reward_service/scorers/rules/hedge.py and math_strict.py.
DECISIONS = """## One committed answer: where the closing part starts, and why

A response earns the reward only if it commits to one final answer (`math`, `gsm8k`,
`choice`; `math_verify` stays the library). Its candidate answers are the values it offers as
its answer in its *closing part*: boxed values, `answer is` / `Answer:` / `####` statements,
and values offered as alternatives (or, maybe, perhaps, possibly, probably, either,
alternatively, actually, otherwise, or else, and/or, if not, then again, could/might/may
(also) be), across sentence and line boundaries. More than one distinct candidate, by the
scorer's own equivalence (`0.5` and `\\frac12` are one value; `gsm8k` compares numbers,
`choice` letters), is a hedge: `incorrect`, reason `hedged: ...`.

The closing part starts (`reward_service/scorers/rules/hedge.py: closing_start`):

1. **at the final commitment**: the clause holding the phrase that introduces the final
   answer the scorer takes (`The final answer is`, `answer is`, `Answer:`, `\\boxed{`,
   `####`), or, for a bare final value (the last number), the clause holding that value. A
   clause ends at `.`/`!`/`?` + space, a line break, `,`/`;`/`:` + space, or before *so,
   thus, therefore, hence, then, but*;
2. **back over an alternative it answers**: a closing part that opens with an alternative
   word (`Or maybe 6.`, `, or possibly 6`, `Actually, the answer is 6.`) takes in the clause
   before it, since it offers itself as an alternative to it;
3. **back over answer sentences**: when the commitment opens its sentence, a preceding
   sentence that is nothing but an answer (`The answer is 5.`, `Maybe 6?`, `#### 20`) joins
   it, and so on back; a sentence with any other words (`Wait, no.`, `Recounting gives 8.`)
   stops it.

It runs to the end of the response. In addition every `\\boxed{}` (`math`) and every `####`
(`gsm8k`) anywhere is a declaration of a final answer.

Why there: before the final commitment is the work. `x = 5 or x = 6; checking, x = 6 fails.
So the answer is 5.` and case analyses offer values while solving, not as the answer; a
self-correction the response argues for (`The answer is 7. Wait, let me recheck: 3 + 5 = 8.
So the answer is 8.`) ends on one value, and the library already takes its last statement.
From the final commitment on, or in what the commitment is offered as an alternative to, a
second value can only be a second answer. A value is a candidate only when it is a value
(followed by no operator: `3+5=8` is work; an equation still to solve, `-8y=392, or
y=\\boxed{-49}`, restates rather than offers), and values inside the final answer's own span
(`$5$ or $6$`, which the library reads as the set {5, 6}) are that answer. Known limit: a
restatement in other units after the answer (`2 hours, or 120 minutes`) reads as a second
value; say it once.

## The percent rule

`10%` is a right answer both for gold `0.1` (a fraction asked as a percentage: 10% is 0.1)
and for gold `10` (MATH writes percentage answers without the sign). The library accepts both
readings for every gold, so one answer matches two numbers a factor 100 apart: `1000%`
matches gold `10` and `0.1%` matches gold `0.1`, rewarding a policy that is off by 100 and
appends a sign. The `math` profile keeps both right answers with one reading per gold,
chosen by the gold alone: a gold without `%` that is **below 1 in size** is a fraction, so
`P%` is read as its value `P/100` (`10%` = 0.1; `0.1%` is not 0.1); a gold **at least 1 in
size** is a percentage written without its sign, so `P%` is read as `P` (`10%` for 10;
`1000%` is not 10). A gold with `%` (`G%`) accepts `G%`, `G` and `G/100`. What is lost:
a percentage question whose true answer is below 1% (gold `0.5` meaning 0.5%) does not
accept `0.5%`, and a ratio question with gold `2` does not accept `200%`; both are rare in
MATH-style data, and either reading for all golds would pay the factor-100 errors above.

## Scientific notation

`1e5`, `2E-3`, `1.5e+3` are read as their values (the library reads `1e5` in text as its
mantissa `1`, and in LaTeX as `1 \\cdot e \\cdot 5`): the `math` profile writes each such
literal as its decimal value before extraction (`read_scientific`), so `The answer is 1e5.`
is `incorrect` for gold `1` and `correct` for gold `100000`, with reason `scientific: ...`
where that reading changed the verdict. LaTeX's `1.5 \\times 10^{3}` the library already
reads as 1500. An exponent beyond 400 is not read (the literal becomes `(overflow)`), never
as its mantissa.
"""


COST_NOTE = [
    "`math` profile, all 6,526 corpus rows, ABBA pairs in one process, CPU time, ratio new/base,",
    "verdicts identical (0 of 6,526 differ). Against a like-for-like base (the revision before",
    "the round-2 rules, 2a777e4, with the same round's two `tail_scan` cuts, 65e1910 and 43f050f,",
    "so that only the rules differ: `python -m bench.rules_ab --base 2a777e4 --pick 65e1910",
    "43f050f --pairs 21`), final code: **1.029** [min 0.958, max 1.231], 1.037 [0.956, 1.058]",
    "(21 pairs each) and 1.033 [0.957, 1.123] (31 pairs), 64-66 -> 66-69 us per item: **within the 5% budget by the median**; the",
    "brackets straddle it (single pairs drift 5-20% on this VM). Before the three cuts below the",
    "rules cost 1.140 [1.087, 1.228] (85 -> 99 us, 11 pairs; 1.159 [1.122, 1.188] this session).",
    "The cuts, each exact and tested against the plain form: `hedge._last_end` looks 40",
    "characters back before 200 (clause and sentence ends never overlap, so the last match is",
    "the same; 7.8 -> 3.8 us per item); `hedge.candidates` skips a closing part where no value",
    "can stand outside the answer (no digit, `\\` or `$` once the answer's own delimiters are",
    "set aside, no number word; 3 in 4 closing parts; 6.5 -> 2.8 us); the lead scanner behind a",
    "first-character guard (1.5 -> 0.7 us on the rest). Smaller: the gold's boxed form built",
    "once per item, the think/forms pass returns an ASCII tag-free response as it is.",
]


def _rows() -> list[dict]:
    with CORPUS.open() as fh:
        return [json.loads(line) for line in fh]


def _cell(text: object, limit: int = 60) -> str:
    s = str(text).replace("\n", " ").replace("|", "\\|")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def corpus_figures(rows: list[dict]) -> dict:
    table = build_scorers()
    verdicts = {name: [table[name](r["response"], r["gold"], {}) for r in rows] for name in PROFILES}
    gsm_rows = [i for i, r in enumerate(rows) if r["source"].startswith("gsm8k")]
    verdicts["gsm8k"] = {i: table["gsm8k"](rows[i]["response"], rows[i]["gold"], {}) for i in gsm_rows}
    agreement = {}
    for name in PROFILES:
        agree = sum((v.status == "correct") == r["label"] for v, r in zip(verdicts[name], rows, strict=True))
        agreement[name] = (agree, len(rows))
    agree = sum((v.status == "correct") == rows[i]["label"] for i, v in verdicts["gsm8k"].items())
    agreement["gsm8k"] = (agree, len(gsm_rows))
    return {"verdicts": verdicts, "agreement": agreement}


def speed(rows: list[dict], passes: int = 3) -> dict[str, float]:
    """Items per CPU-second per profile, one core, gold cache warm: the median of
    ``passes`` alternating passes (CPU time, so a busy machine disturbs it less)."""
    table = build_scorers()
    for r in rows:  # warm the shared gold cache
        table["math_verify"](r["response"], r["gold"], {})
    rates: dict[str, list[float]] = {name: [] for name in PROFILES}
    for _ in range(passes):
        for name in PROFILES:
            fn = table[name]
            t = time.process_time()
            for r in rows:
                fn(r["response"], r["gold"], {})
            rates[name].append(len(rows) / (time.process_time() - t))
    return {name: statistics.median(r) for name, r in rates.items()}


def _speed_in_doc() -> dict[str, float]:
    """The speed table of the current ``docs/CORRECTNESS.md`` (``--keep-speed``)."""
    found = dict(re.findall(r"^\| `(\w+)` \| (\d+) \|$", DOC.read_text().split("## Speed")[-1], re.M))
    return {name: float(found[name]) for name in PROFILES}


def math_verify_suite() -> dict:
    cases = [json.loads(line) for line in MV_CASES.open()]
    others = [json.loads(line) for line in MV_OTHERS.open()]
    table = build_scorers()
    right: dict = {"cases": len(cases), "others": len(others), "stock_raw_gold": 0,
                   "stock_boxed_gold": 0, "missed": []}
    for c in cases:
        pred = parse(c["pred"])
        right["stock_raw_gold"] += bool(verify(parse(c["gold"]), pred)) == c["expected"]
        right["stock_boxed_gold"] += bool(verify(parse(boxed_gold(c["gold"])), pred)) == c["expected"]
    for c in [*cases, *others]:
        verdicts = {name: table[name](c["pred"], c["gold"], {}) for name in PROFILES}
        for name in PROFILES:
            if c in cases:
                right[name] = right.get(name, 0) + (
                    (verdicts[name].status == "correct") == c["expected"])
        if any((v.status == "correct") != c["expected"] for v in verdicts.values()):
            right["missed"].append((c, verdicts))
    return right


def hedge_figures() -> dict[str, dict[str, int]]:
    """Per fold: hedges, hedges refused, near misses, near misses lost (refused where, for
    ``math``, the library as released pays them), near misses the library itself misreads."""
    table = build_scorers()
    out: dict[str, dict[str, int]] = {}
    for r in hedge_corpus():
        f = out.setdefault(r["fold"], dict.fromkeys(
            ("hedges", "refused", "near_misses", "lost", "library", "paid_by_library"), 0))
        v = table[r["scorer"]](r["response"], r["gold"], {})
        if r["kind"] == "hedge":
            f["hedges"] += 1
            f["refused"] += v.status != "correct"
            if r["scorer"] == "math":
                f["paid_by_library"] += (
                    table["math_verify"](r["response"], r["gold"], {}).status == "correct")
            continue
        f["near_misses"] += 1
        if v.status != "correct":
            library = r["scorer"] == "math" and table["math_verify"](
                r["response"], r["gold"], {}).status != "correct" and rule_of(v.reason) is None
            f["library" if library else "lost"] += 1
    return out


def golden_differences() -> tuple[int, list[tuple[dict, str, str, str | None]]]:
    """The golden cases, and those where the two math profiles differ."""
    cases = [json.loads(line) for line in GOLDEN.open()]
    table = build_scorers()
    out = []
    for c in cases:
        if "math" not in c["expect"]:
            continue
        a = table["math_verify"](c["response"], c["gold"], {})
        b = table["math"](c["response"], c["gold"], {})
        if a.status != b.status:
            out.append((c, a.status, b.status, b.reason))
    return len(cases), out


def _hedge_section(hedges: dict[str, dict[str, int]]) -> list[str]:
    out = [
        "## One committed answer: the generated hedge corpus",
        "",
        "`tests/golden/hedge_corpus.py` writes hedged responses and near-miss non-hedges from",
        "templates around the real answers of `corpus.jsonl` (`math`, `gsm8k`, `choice`);",
        "every fifth template is held out: written with the others, before the rule, and not",
        "run while the rule was developed. `tests/test_hedges.py` checks the same figures.",
        "",
        "| fold | hedges | refused | math hedges the library pays | near misses | lost | "
        "misread by the library itself |",
        "|---|---|---|---|---|---|---|",
    ]
    for fold in ("dev", "held_out"):
        f = hedges[fold]
        out.append(
            f"| {fold} | {f['hedges']} | {f['refused']} ({f['refused'] / f['hedges']:.2%}) | "
            f"{f['paid_by_library']} | {f['near_misses']} | {f['lost']} | {f['library']} |")
    return [*out, "",
            "*Lost*: a near miss refused where the library as released pays it (for `gsm8k` and",
            "`choice`: any refused near miss). *Misread by the library*: a near miss the",
            "library's own extraction gets wrong, which no rule of ours refuses (held out:",
            "`math/or-more-after` with a LaTeX answer, where the library takes the `5` of",
            "`5 or more`). Both rounds together: round 1's 1,700 hedges (`math` 1,200, `gsm8k`",
            "300, `choice` 200) and 1,075 near misses, and round 2's classes (next section).",
            ""]


def cost_section() -> list[str]:
    """What ``python -m bench.rules_ab`` measured for the round-2 rules (run by hand; the
    figure is pasted here, since it needs the base revision and minutes of alternation)."""
    return ["## Cost of the round-2 rules (`python -m bench.rules_ab`)", "", *COST_NOTE, ""]


def render(rows: list[dict], fig: dict, rate: dict[str, float], suite: dict,
           hedges: dict[str, dict[str, int]], round2: list[str], round3: list[str]) -> str:
    v = fig["verdicts"]
    out = [
        "# Scoring correctness",
        "",
        "Written by `python -m bench.correctness` (in-process, one core); the same figures are",
        "checked through the real service by `tests/test_corpus_agreement.py` and",
        "`tests/test_golden.py`. The rules of the `math` profile are documented in",
        "`reward_service/scorers/math_strict.py`; the golden cases in `tests/golden/`.",
        "",
        "## Agreement with the labels of `../shared/data/corpus.jsonl`",
        "",
        "| profile | version | rows | agree | agreement |",
        "|---|---|---|---|---|",
    ]
    for name in (*PROFILES, "gsm8k"):
        agree, n = fig["agreement"][name]
        scope = "" if name != "gsm8k" else " (GSM8K rows)"
        out.append(f"| `{name}`{scope} | {SCORERS[name].version} | {n} | {agree} | {agree / n:.2%} |")
    out += [
        "",
        "The labels are automatic answer matching, not human grades, so a disagreement may be",
        "the label's error. Every one is listed with a judgement.",
        "",
        DECISIONS,
        correctness_r2.DECISIONS,
        "## Every disagreement with a label",
        "",
        "| row | source | gold | label | `math_verify` | `math` | extracted | judgement |",
        "|---|---|---|---|---|---|---|---|",
    ]
    unjudged = []
    for i, r in enumerate(rows):
        statuses = {name: v[name][i].status for name in PROFILES}
        if all((s == "correct") == r["label"] for s in statuses.values()):
            continue
        gold, judgement = JUDGEMENTS.get(i, (r["gold"], "**not yet judged**"))
        if i not in JUDGEMENTS or gold != r["gold"]:
            unjudged.append(i)
        out.append(
            f"| {i} | {r['source']} | `{_cell(r['gold'], 30)}` | {r['label']} | "
            f"{statuses['math_verify']} | {statuses['math']} | "
            f"`{_cell(v['math'][i].extracted, 30)}` | {judgement} |"
        )
    out += [
        "",
        "## Rows where the two math profiles differ",
        "",
        "| row | gold | label | `math_verify` | `math` | `math` reason |",
        "|---|---|---|---|---|---|",
    ]
    differ = 0
    for i, r in enumerate(rows):
        a, b = v["math_verify"][i], v["math"][i]
        if a.status != b.status:
            differ += 1
            out.append(
                f"| {i} | `{_cell(r['gold'], 30)}` | {r['label']} | {a.status} | {b.status} | "
                f"{_cell(b.reason, 80)} |"
            )
    if not differ:
        out.append("| none | | | | | |")
    n_golden, golden = golden_differences()
    out += [
        "",
        "## What the rules change: golden cases where the profiles differ",
        "",
        f"{len(golden)} of the {n_golden} cases of `tests/golden/cases.jsonl` (each pinned per "
        "profile by `tests/test_golden.py`):",
        "",
        "| response | gold | `math_verify` | `math` | `math` reason |",
        "|---|---|---|---|---|",
        *(
            f"| `{_cell(c['response'], 45)}` | `{_cell(c['gold'], 25)}` | {a} | {b} | {_cell(why, 90)} |"
            for c, a, b, why in golden
        ),
    ]
    out += [
        "",
        "## Math-Verify's own test cases",
        "",
        f"{suite['cases']} cases extracted from the math-verify 0.9.0 sdist by",
        "`tests/golden/extract_math_verify_cases.py` (what was skipped, and why, is in its",
        "docstring), replayed with default extraction as the service runs them.",
        "",
        "| checker | right |",
        "|---|---|",
        f"| stock math-verify, `verify(parse(gold), parse(pred))` | {suite['stock_raw_gold']} |",
        f"| stock math-verify, gold wrapped in `\\boxed{{}}` (what `math_verify` does) | {suite['stock_boxed_gold']} |",
        f"| service profile `math_verify` | {suite['math_verify']} |",
        f"| service profile `math` | {suite['math']} |",
        "",
        f"With the {suite['others']} rows skipped above for their comparison settings "
        "(`tests/golden/math_verify_cases_other_settings.jsonl`: precision 2 or 5, "
        "strict=False, the allow_set_relation_comp flag) and one f-string row not read, the "
        "library's suite has 275 rows. Every case either profile judges differently from the "
        "library's test expectation, judged:",
        "",
        "| gold | response | expected | their settings | `math_verify` | `math` | judgement |",
        "|---|---|---|---|---|---|---|",
        *(
            f"| `{_cell(c['gold'], 30)}` | `{_cell(c['pred'], 30)}` | {c['expected']} | "
            f"{c.get('their_settings', 'default')} | {v['math_verify'].status} | "
            f"{v['math'].status} | "
            + next((j for (g, p, e), j in MV_JUDGEMENTS.items()
                    if c["gold"] == g and c["pred"].startswith(p) and c["expected"] == e),
                   "**not yet judged**")
            + " |"
            for c, v in suite["missed"]
        ),
        "",
        *(f"`{name}` judges {n} of these differently from the library's expectation."
          for name, n in (
              (name, sum((v[name].status == "correct") != c["expected"]
                         for c, v in suite["missed"])) for name in PROFILES)),
        "",
    ]
    out += _hedge_section(hedges)
    out += round2
    out += round3
    out += [
        "## Speed, in-process, one core, gold cache warm (median of 3 passes, CPU time)",
        "",
        "| profile | items per CPU-second on corpus rows |",
        "|---|---|",
        *(f"| `{name}` | {rate[name]:.0f} |" for name in PROFILES),
        "",
    ]
    if unjudged:
        out.insert(2, f"**Rows without a judgement: {unjudged}.**\n")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print figures, leave the doc")
    ap.add_argument("--keep-speed", action="store_true",
                    help="take the speed table from the current doc instead of measuring it "
                         "(to rewrite the verdict sections when no quiet CPU is to be had)")
    args = ap.parse_args()
    install_patches()  # as a worker runs (verdicts do not depend on it)
    rows = _rows()
    fig = corpus_figures(rows)
    rate = _speed_in_doc() if args.keep_speed else speed(rows)
    suite = math_verify_suite()
    hedges = hedge_figures()
    table = build_scorers()
    round2 = [*correctness_r2.class_section(correctness_r2.class_figures(table)),
              *correctness_r2.digit_forms(table), *cost_section()]
    round3 = [correctness_r3.DECISIONS, *correctness_r3.audit_section(correctness_r3.audit(table)),
              *correctness_r3.round3_section(table), *correctness_r3.cost_section()]
    for name, (agree, n) in fig["agreement"].items():
        print(f"{name:12s} agreement {agree}/{n} = {agree / n:.4%}")
    for name, r in rate.items():
        print(f"{name:12s} {r:.0f} items/s (in-process, one core)")
    print("math-verify cases right:", {k: v for k, v in suite.items() if k != "missed"})
    print("hedge corpus:", hedges)
    if not args.no_write:
        DOC.write_text(render(rows, fig, rate, suite, hedges, round2, round3))
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
