"""The issue-36 sections of ``docs/CORRECTNESS.md`` (``python -m bench.correctness`` writes them):
the disagreement audit, the new rules, the round-3 corpus per class and fold.

    $ python -m bench.correctness_r3     # prints the audit's lists and the round-3 figures

The audit runs ``math`` and ``math_verify`` over every response of ``corpus.jsonl`` and the 800
responses of ``qwen25math_math_cot_100.jsonl`` (scored against that file's own ``gt``, beside
its own grader's ``score``), and lists every item where the two profiles differ, or either
differs from the item's label. Since the labels are automatic, and the two profiles share the
library's extraction, a second reading follows: every MATH-style row a profile refuses, and
every row it pays whose extracted answer is not the gold as written; each group is judged
by reading it (``JUDGED`` below; a new item has no judgement and is flagged).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from tests.golden.hedge_corpus_r3 import generate as round3_corpus
from tests.helpers import DATA

Scorers = Mapping[str, Callable[[str, str, dict[str, Any]], Any]]
QWEN = DATA / "qwen25math_math_cot_100.jsonl"
CLASSES = ("our rule right", "library right", "gold wrong", "label wrong", "ambiguous",
           "shared error, fixed", "shared error, documented", "right (same value)",
           "right refusal (a different value)")

# (how found, gold) → (class, judgement); how found: "label" (a profile differs from the
# label), "refused" / "paid" (the second reading; a group's rows share the gold)
JUDGED: dict[tuple[str, str], tuple[str, str]] = {
    ("label", "10{,}000"): ("label wrong", "Both profiles right: the response's \\boxed{10000} is the gold "
                 "10{,}000 (a LaTeX thousands separator); the automatic label (and Qwen's grader "
                 "score in its own file) compared strings."),
    ("refused", "4:30p.."): ("gold wrong", "Every response answers 4:30 p.m., which is right (2:30 p.m. plus "
                "7200 seconds). The corpus gold `4:30p..` is a mangled `4:30 p.m.` (the file's "
                "`answer` field is `\\text{4:30 p.m.}`); label, Qwen's score and both profiles "
                "say incorrect. Against the right gold both profiles still refuse: the library "
                "reads `4:30` and cannot compare a clock time with `\\text{4:30 p.m.}`. "
                "Documented, not fixed: clock times are outside math-verify's reading, and a "
                "time rule on a mangled gold would be a guess."),
    ("paid", "4t"): ("shared error, fixed", "The responses answer `4t` and are paid, rightly; but "
           "the library deletes the trailing `t` as a unit from the gold and from answers, so "
           "gold `4t` is read as 4 and `\\boxed{4}` would be paid too (a false positive the "
           "labels cannot show). Fixed in `math` (rule 8, `variable`): a gold's letter right "
           "after a digit or `}` is kept as a variable on both sides."),
    ("paid", "900,000,000"): ("right (same value)", "\\boxed{900000000} for 900,000,000: the same number."),
    ("paid", "3,250"): ("right (same value)", "The same number without its separator."),
    ("paid", "50,625"): ("right (same value)", "The same number without its separator."),
}
REFUSAL = ("right refusal (a different value)",
           "Read: each extracted answer is a different value from the gold (a wrong answer), "
           "e.g. `1 \\frac{8}{91}` for `1\\frac{1}{10}`, `11 \\cdot 64` for 506, `\\sqrt{34} + "
           "3\\sqrt{10}` (15.3) for 28, `[2,\\infty)` for `[-2,2]`, `C` for `A`.")

DECISIONS = """## Round 3 (issue 36): answers per reading, inequalities as sets, a gold's letter

**Answers per reading or per case** (`rules/readings.py`, label `per_reading`, `math`): a
response that gives values bound to different readings or cases in its closing part and
never says which is *the* answer is refused (`There are 6 arrangements if rotations count as
different, 2 if they do not.`, `With replacement the probability is 1/4; without replacement
it is 1/6.`, `Answer: 20 (ordered) / 10 (unordered)`): whichever reading the gold takes, it
would be paid. Written by structure: the text from 400 characters before the final answer to
the end is cut into units (sentence ends, `;`, line breaks, `, `, ` / `, outside math and
boxes; a unit that is only a leading condition joins the value after it); a unit is
*conditional* when it holds a condition (if, unless, assuming, provided, supposing, in case,
otherwise, else, when, with, without, for (where it opens a clause), under, counting, up to, ignoring, including,
excluding, allowing, depending on, and the participles taking, treating, considering,
regarding, interpreting, reading, viewing; `case 2`, `the other case`; a parenthesised
qualifier of words, `(ordered)`), and states its last value outside that condition. The final
answer's unit must be conditional (by a condition in the answer's own sentence, within 250
characters); reading back over conditional units and on to the end, another conditional unit
with a different value (by `verify`) under a different condition is a hedge. A unit with a
value and no condition is a commitment: it stops the reading back, and after the answer it
keeps the reward (`If order matters, 20. If not, 10. Order matters here, so the answer is
20.`); so does a value under every reading (`whether or not`, `either way`, `in both cases`,
`regardless`). Paid, as the issue asks: a counterfactual in the reasoning followed by a
commitment, a case analysis that rejects all but one case, and one value under every reading.
Not read: a gold of several values (each part may be stated under its own heading), the
light scorers (`gsm8k` takes the last number or `####`; its hedge rule is unchanged), a
reading stated in a sentence of its own with no value (`There are two readings.`), conditions
in other words than the list above (the rule's vocabulary is its limit, as the held-out fold
showed). Cost: the answer's sentence is tested for a condition word first (a lower-case stem
test, then the pattern; exact, `tests/test_hedges_round3.py`); on the corpus 35 of 3,063
calls go further.

**Inequalities against interval golds** (`rules/solution_sets.py`, rule 4 widened, label
`rescued`): the answer's inequalities are turned into the set they define (sympy `as_set`,
real line) and compared with the gold's interval or union (or `x \\in` one, same
variable): a union (`x < 2 or x > 3`, `\\text{ or }`, `\\lor`, `\\vee`, a bare list `x < 2,
x > 3`, `$x < 2$ or $x > 3$`, and plain text `So x < 2 or x > 3.`), a chained inequality
(`-1 < x \\le 5`, as before), set-builder notation (`\\{x \\mid -1 < x \\le 5\\}`, `\\{x :
...\\}`, `\\{x \\in \\mathbb{R} \\mid ...\\}`; there a comma is *and*). Pieces joined by
`and`/`\\land`/`\\wedge` intersect. The sets must be equal, so endpoints matter: `x < 2 or x >
3` against `(-\\infty, 2] \\cup (3, \\infty)` stays incorrect, as do a different union and a
different variable. Stock math-verify parses the union as the set of two relations
`{x < 2, x > 3}` and compares it with nothing, and reads `5` out of `\\{x \\mid -1 < x \\le
5\\}`.

**A gold's trailing letter is a variable** (`rules/variables.py`, rule 8, label `variable`,
both ways), found by the audit below: the library's normaliser deletes units after a number,
and its unit list holds single letters (`t`, `h`, `c`, `l`, `s`, `g`, `m`, `d`, `o`), so gold
`4t` is read as `4`, `\\boxed{4}` is paid, and `t \\cdot 4` is not. When the gold ends in such
a letter written right after a digit or `}` (how a gold writes a product; MATH writes units
as `\\text{ cm}`), gold and answer are parsed again with the unit deletion off and that
verdict stands. A unit in `\\text{}` or after a space (`10\\text{ m}`, `5 m`) is left to the
library and rule 5. Not changed: an *answer* with a stray letter (`\\boxed{5m}` for gold `5`)
is still read as the library reads it (a unit is the likelier reading there).

The new labels are counted like the others: `reward_rule_overrides_total{scorer="math",
rule="per_reading"}` / `rule="variable"` (a rescue by the widened rule 4 counts as
`rule="rescued"`), and `rule/per_reading`, `rule/variable` in `extra_logs` /
`reward_extra_info`. The `math` profile's version is 2.3.
"""

_PLAIN = re.compile(r"\\[dt]frac|\s|\\!|\\,|\{,\}|\$|\\left|\\right")


def _plain(s: object) -> str:
    return _PLAIN.sub(lambda m: "\\frac" if "frac" in m.group(0) else "", str(s)).strip(".")


def items() -> list[dict]:
    """Every audited item: corpus rows, then the Qwen file's responses."""
    out = []
    with (DATA / "corpus.jsonl").open() as fh:
        for i, line in enumerate(fh):
            r = json.loads(line)
            out.append({"where": f"corpus {i}", "source": r["source"], "response": r["response"],
                        "gold": r["gold"], "label": r["label"]})
    with QWEN.open() as fh:
        for line in fh:
            r = json.loads(line)
            for k, (resp, score) in enumerate(zip(r["code"], r["score"], strict=True)):
                out.append({"where": f"qwen {r['idx']}/{k}", "source": "qwen_file",
                            "response": resp, "gold": r["gt"], "label": score})
    return out


def audit(table: Scorers) -> dict[str, Any]:
    rows = items()
    profile_diff, label_diff = [], []
    refused, paid_other_form = defaultdict(list), defaultdict(list)
    for r in rows:
        a = table["math_verify"](r["response"], r["gold"], {})
        b = table["math"](r["response"], r["gold"], {})
        r["math_verify"], r["math"] = a.status, b.status
        r["extracted"] = b.extracted
        if a.status != b.status:
            profile_diff.append(r)
        if (a.status == "correct") != r["label"] or (b.status == "correct") != r["label"]:
            label_diff.append(r)
        if r["source"].startswith("gsm8k"):
            continue
        if b.status != "correct":
            refused[r["gold"]].append(r)
        elif _plain(b.extracted) != _plain(r["gold"]):
            paid_other_form[r["gold"]].append(r)
    return {"rows": rows, "profile_diff": profile_diff, "label_diff": label_diff,
            "refused": refused, "paid_other_form": paid_other_form}


def _cell(text: object, limit: int) -> str:
    s = str(text).replace("\n", " ").replace("|", "\\|")
    return s if len(s) <= limit else s[: limit - 3] + "..."


def audit_section(fig: dict[str, Any]) -> list[str]:
    rows = fig["rows"]
    n_corpus = sum(r["source"] != "qwen_file" for r in rows)
    counts: Counter[str] = Counter()
    table = []
    unjudged: list[tuple[str, str]] = []

    def judged(key: tuple[str, str], default: tuple[str, str] | None = None) -> tuple[str, str]:
        if key in JUDGED:
            return JUDGED[key]
        if default is None:
            unjudged.append(key)
            return "ambiguous", "**not yet judged**"
        return default

    for r in fig["label_diff"]:
        cls, why = judged(("label", r["gold"]))
        counts[cls] += 1
        table.append(f"| {r['where']} | label | `{_cell(r['gold'], 20)}` | {r['label']} | "
                     f"{r['math_verify']} | {r['math']} | `{_cell(r['extracted'], 25)}` | "
                     f"{cls} | {why} |")
    for gold, group in sorted(fig["refused"].items(), key=lambda kv: kv[1][0]["where"]):
        if all(r in fig["label_diff"] for r in group):
            continue
        cls, why = judged(("refused", gold), REFUSAL)
        counts[cls] += len(group)
        if ("refused", gold) in JUDGED:
            table.append(f"| {', '.join(r['where'] for r in group)} | second reading: refused | "
                         f"`{_cell(gold, 20)}` | {group[0]['label']} | {group[0]['math_verify']} "
                         f"| {group[0]['math']} | `{_cell(group[0]['extracted'], 25)}` | {cls} | "
                         f"{why} |")
    for gold, group in sorted(fig["paid_other_form"].items(), key=lambda kv: kv[1][0]["where"]):
        cls, why = judged(("paid", gold))
        counts[cls] += len(group)
        table.append(f"| {', '.join(r['where'] for r in group)} | second reading: paid, "
                     f"other form | `{_cell(gold, 20)}` | {group[0]['label']} | "
                     f"{group[0]['math_verify']} | {group[0]['math']} | "
                     f"`{_cell(group[0]['extracted'], 25)}` | {cls} | {why} |")
    n_refused = sum(len(g) for g in fig["refused"].values())
    out = [
        "## Every disagreement looked at (issue 36)",
        "",
        f"`python -m bench.correctness_r3`: `math` and `math_verify` over all {n_corpus} "
        f"responses of `corpus.jsonl` and the {len(rows) - n_corpus} responses of "
        "`qwen25math_math_cot_100.jsonl` (against that file's own `gt`, beside its grader's "
        "`score`; they are the corpus's Qwen rows, scored again from their source).",
        "",
        f"* **`math` and `math_verify` disagree on {len(fig['profile_diff'])} of "
        f"{len(rows)} items.** Every rule of `math` that changes a verdict (hedges, exactness, "
        "percent, units, the new ones) changes none of these real responses.",
        f"* **A profile and the label disagree on {len(fig['label_diff'])} items** (one "
        "response, in both files).",
        "* Since the labels are automatic and both profiles share the library's extraction, "
        "agreement cannot show a shared error, so every item was read a second time where an "
        f"error could hide: the {n_refused} MATH-style responses `math` refuses (a false "
        "negative costs an RL run as much as a false positive), and the responses it pays "
        "whose extracted answer is not the gold as written.",
        "",
        "| items | found by | gold | label | `math_verify` | `math` | extracted | class | "
        "judgement |",
        "|---|---|---|---|---|---|---|---|---|",
        *table,
        f"| the other {counts[REFUSAL[0]]} refused MATH-style responses | second reading: "
        f"refused | | | incorrect | incorrect | | {REFUSAL[0]} | {REFUSAL[1]} |",
        "",
        "Counts per class (items; the Qwen rows of the corpus count twice, once per file):",
        "",
        "| class | items |",
        "|---|---|",
        *(f"| {cls} | {counts[cls]} |" for cls in CLASSES),
        "",
        "*Library right* (a disagreement where stock math-verify is right and `math` is not) "
        "has no item: no rule of `math` changed a verdict on these responses. The one "
        "library error the reading found that a rule could fix (`4t`) is fixed; the one it "
        "cannot (a clock time against a mangled gold) is documented above. On the GSM8K rows "
        "`math` and the `gsm8k` scorer differ on 4 responses, both refusing (`incorrect` vs "
        "`no_answer`, repeating decimals `gsm8k` reads as no number): no reward differs.",
        "",
    ]
    if unjudged:
        out.insert(2, f"**Groups without a judgement: {unjudged}.**\n")
    return out


def round3_figures(table: Scorers, fold: str) -> dict[tuple[str, str], Counter[str]]:
    out: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in round3_corpus(folds=(fold,)):
        v = table["math"](r["response"], r["gold"], {})
        c = out[(r["class"], r["kind"])]
        c["rows"] += 1
        c["refused" if v.status != "correct" else "paid"] += 1
        c["library pays"] += table["math_verify"](r["response"], r["gold"], {}).status == "correct"
    return out


def round3_section(table: Scorers) -> list[str]:
    out = [
        "## Round 3 corpus, per class (issue 36)",
        "",
        "`tests/golden/hedge_corpus_r3.py` (its own random stream; rounds 1 and 2 unchanged). "
        "*Hedge* rows must be refused (`per_reading`: each response twice, the gold being "
        "either reading's value; `endpoint_controls`: an inequality answer against a gold that "
        "differs in one endpoint); *near misses* must be paid. Every fifth template is held "
        "out. *Library pays*: stock math-verify on the same rows.",
        "",
        "| class | kind | fold | rows | refused | paid | library pays |",
        "|---|---|---|---|---|---|---|",
    ]
    for fold in ("dev", "held_out"):
        for (cls, kind), c in sorted(round3_figures(table, fold).items()):
            out.append(f"| {cls} | {kind} | {fold} | {c['rows']} | {c['refused']} | "
                       f"{c['paid']} | {c['library pays']} |")
    return [*out, "", HELD_OUT, ""]


HELD_OUT = (
    "The held-out fold was run once, blind, after the rule was final on the dev fold: "
    "`per_reading` held out 150 of 180 refused (83.3%): `math/taking-allowing` (*Taking the "
    "digits to be distinct gives A; allowing repeated digits gives B.*) was paid when the gold "
    "was B, since *taking* was no condition word (its A side was refused through *allowing*); "
    "the near misses (90) and the inequality rows (60 paid, 60 controls refused) were all "
    "right. The rule was then extended with the participles that set a reading (*taking, "
    "treating, considering, regarding, interpreting, reading, viewing*), so that template is "
    "no longer a blind test; the table shows the figures after that change."
)


def main() -> None:
    from reward_service.scorers.impl import build_scorers
    from reward_service.scorers.patches import install_patches

    install_patches()
    table = build_scorers()
    print("\n".join([*audit_section(audit(table)), *round3_section(table)]))


if __name__ == "__main__":
    main()


COST_NOTE: list[str] = [  # pasted from `python -m bench.rules_ab` runs (below)
    "`math` profile, all 6,526 corpus rows, ABBA pairs in one process, CPU time, ratio new/base",
    "against round 2's final code (`python -m bench.rules_ab --base 3ccc4d1`), each run under",
    "`flock /work/cpu.lock`, verdicts identical (0 of 6,526 differ):",
    "",
    "| code | pairs | CPU per item | ratio new/base, median [min, max] |",
    "|---|---|---|---|",
    "| first complete rules (a0ec2e5) | 21 | 83 -> 92 us | 1.111 [1.068, 1.265] |",
    "| + span memo, clause-opening `for`, lower-case gate (1e45bd7) | 21 | 83 -> 88 us | "
    "1.058 [1.015, 1.090] |",
    "| + `for`-only sentences tested apart (dcb2e13, final) | 31 | 84 -> 90 us | "
    "1.061 [1.033, 1.075] |",
    "",
    "**Over the 5% budget by about one point (1.058 and 1.061 by the median).** Where it goes",
    "(in-process A/B against the same base, not under the lock, 6-8 pairs, so +-2%): with the",
    "three new hooks turned off the tree is at 1.00 [0.98, 1.02]; `per_reading` alone is about",
    "5 points (it runs on every paid item: the answer's span, its sentence, a stem test that",
    "most sentences fail; 35 of 3,063 reach the unit analysis), `variable` and the widened",
    "rule 4 under 1 (a cached gold test; a set gold only). Cuts not made for lack of time: reuse",
    "rule 1's closing-part scan (its clause ends and candidates) instead of a second pass over",
    "the answer's sentence, or run `per_reading` only where rule 1's scan saw a second value.",
]


def cost_section() -> list[str]:
    """What ``python -m bench.rules_ab`` measured for the round-3 rules (run by hand; pasted
    here, since it needs the base revision and minutes of alternation)."""
    return ["## Cost of the round-3 rules (`python -m bench.rules_ab`)", "", *COST_NOTE, ""]
