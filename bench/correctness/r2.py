"""The issue-26 sections of ``docs/CORRECTNESS.md`` (``python -m bench.correctness`` writes them):
the choices made, the round-2 hedge corpus per class, digit forms beside stock math-verify."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from tests.golden.hedge_corpus import generate as hedge_corpus

Scorers = Mapping[str, Callable[[str, str, dict[str, Any]], Any]]

DECISIONS = """## Round 2 (issue 26): what every rule reads, think blocks, more hedges

**What the rules read** (`reward_service/scorers/rules/text_forms.py`, before any rule of
`math`, `gsm8k`, `choice`, `numeric` reads the response or the gold; never for `math_verify`):

1. Invisible characters removed: Unicode category Cf (zero-width space, ZWJ/ZWNJ, word joiner,
   soft hyphen, BOM, bidi marks, invisible operators, tags) and the other default-ignorable code
   points (variation selectors, combining grapheme joiner, Hangul fillers). `5 \\u200dor\\u200d 6`
   is `5 or 6`, and `o\\u00adr` is `or`.
2. Digits in other forms read as ASCII: every decimal digit (category Nd: full-width, Arabic-Indic,
   mathematical bold...) and the full-width forms of ASCII (U+FF01-FF5E, U+3000). This is
   NFKC *restricted* to where it keeps the meaning: full NFKC turns `x²` into `x2` (a different
   answer), `½` into `1`, U+2044 FRACTION SLASH, `2` (which the library does not read), and rewrites ligatures,
   letterlike symbols and compatibility characters a math answer may use on purpose; none of
   that is applied. Superscript digits stay as written.
3. Digit groups read as one number: a 1-3 digit lead, then groups of exactly three digits,
   all after the same separator (space, no-break space, thin space U+2009, narrow no-break space
   U+202F, figure space, LaTeX `\\,`, `\\ `, `~`, `{,}`). Not after a digit, `.` or `,` (so
   `3.141 592` is untouched) and not when a fourth digit follows (`3 2026` is two numbers).
4. Disjunction symbols read as `or`: U+2228 LOGICAL OR, `\\lor`, `\\vee`, `\\text{ or }` (and `\\textrm`,
   `\\mathrm`, `\\mbox`), `|` and `\\mid` between two numbers. Inside math the library then reads
   `5 or 6` as the set {5, 6}, as it already reads `$5 \\text{ or } 6$` (incorrect for gold 5,
   correct for gold `5, 6`: `x = 2 \\lor x = 3` now matches gold `2, 3`, which the library
   misses); outside math the hedge rule sees the `or`.

The `math` profile runs steps 1-2 on every response and steps 3-4 only when the final answer
the library found could be read differently by them (a digit group from the answer on, a
symbol from 200 characters before it on), then extracts again: scanning whole long responses
for them cost more than the 5% budget. The light scorers run all four on the whole text.

**Think blocks** (`rules/think.py`; `math`, `gsm8k`, `choice`, `numeric`): the response is
judged on what follows the last `</think>`; nothing before it is ever a candidate or the final
answer. No `<think>` and a `</think>` (the template opened the block in the prompt): the same.
A `<think>` after the last `</think>` (or with none) is an unclosed block, a response cut while
thinking: `no_answer`, reason `unclosed_think: ...`, a rule label counted in
`reward_rule_overrides_total{scorer,rule="unclosed_think"}` and in `extra_logs` /
`reward_extra_info` as `rule/unclosed_think`. Nothing after `</think>` is `no_answer`: an
answer stated only while thinking was never given (a strict grader's reading; verifiers'
`ThinkParser` also reads only what follows). Per item, `extra: {"think": false}` turns this
off (default on; any value other than true/false is an `error`). Only `<think>`/`</think>` as
the templates write them are tags; `<thinking>` is text. `math_verify` does not read tags and
ignores `extra.think`: it stays byte-for-byte the library (`tests/test_parity.py`); use `math`
for reasoning models.

**Hedges by definition: the closing part offers more than one value, in any notation or
condition** (`rules/hedge.py`). New candidates: a value after a condition clause (`if`,
`unless`, `assuming`, `provided`, `supposing`, `in case` ... up to its comma, colon, `then` or
the words stating its value) or after `in which case`, `in the other case`, `under/on/with the
other reading/interpretation/assumption/convention/case/count/view`; a value followed by a
condition that opens its part of the sentence (`5 (6 if we count the start)`, `5; 6 unless
...`); a value alone in parentheses after the answer (`5 (6)`, `5 (6?)`); number words (`six`,
`thirty-one`, `one half`, `two thirds`, `N hundred and M`; `one` only where it stands as a
value: `one of them` is a word) after a lead and right before `or`. A closing part whose first
clause is a condition (`...; without repetition, the answer is 5`) takes in the clause before
it, the other branch. A value its own clause discards (`6 fails`, `is extraneous`, `is
rejected`, `does not work`, `is ruled out`) is not offered: case analyses and self-corrections
after the answer keep their reward. A restatement in words is the same value (`6 (that is,
six)` is paid).

**Golds in scientific notation** are read as their value (`1e-5`, `1E-5`, `2.5e-06`,
`1.5e+10`, `1e20`): the gold goes through the same `read_scientific` as the response, so
`\\boxed{0.00001}` matches gold `1e-5`. **JSON number labels** (`/get_reward`, `/slime/reward`,
and the trainer client's verl/TRL/slime integrations) are written as exact positional decimals
(`format(Decimal(repr(x)), "f")`: `1e-05` → `0.00001`, `1e+20` → `100000000000000000000`,
`0.1` stays `0.1`), never `repr()`'s exponent form. NeMo-Gym's `expected_answer` is a string
field (a JSON number there is refused by validation, as before).

**Where the issue is silent, as a strict grader** (each pinned by `tests/test_hedges_round2.py`):
the answer after the *last* `</think>` (text between two think blocks is thinking); a response
whose only answer is inside the think block has none; conditional alternatives are hedges even
when one branch is the gold; a counterfactual with a value after the answer (`if x were 2, it
would be 4`) is read as an offered value unless its clause discards it (`... which fails`);
`numeric` gets the think handling and text forms too (same reasoning-model format); a value in
a thin-spaced group is one number in the gold as well (`gold 1 000` is 1000).

**Effect on `corpus.jsonl`** (6,526 real responses; `python -m bench.rules_ab` compares
every verdict with the revision before): no verdict of `math` or `gsm8k` changed, so label
agreement is unchanged (99.98% `math`, 100% `gsm8k` rows). Per change: the invisible/digit
pass rewrites 3 responses (0 golds); digit groups are joined in 16 responses and 8 golds (all
already matched, e.g. gold `10{,}000`); no response or gold has a disjunction symbol, a think
tag, or a scientific-notation gold; the new hedge candidates refuse no corpus row. The corpus
shows that the changes are safe on real model output, not that they are needed there: the
hedge corpus (below) is where each class is exercised.

**What is still not caught** (known, documented, some in the hidden set surely):
a number word before a condition (`six if we count the start`: a word is matched only after a
lead or before `or`); alternatives across a line of reasoning with no lead word (`For odd n
it is 6.` after the answer, `when`/`for` clauses are not conditions here, since they are
explanations far more often); values in words beyond `N thousand`, ordinals (`the sixth`),
`a dozen`, Roman numerals; alternatives as a list without `or` (`5, 6`) outside math; hedges
spelled with homoglyphs of letters other than full-width (a Cyrillic o in `or`); `|` between a
number and a letter; a hedge inside the thinking that the answer part then *refers to*
(`</think> The answer is the second one.`: no value, nothing to compare).
"""

# the digit forms the issue names, as the library reads them beside the math profile
DIGIT_FORMS = [
    ("\\boxed{1 000}", "1000"), ("\\boxed{1 000}", "0"), ("\\boxed{1\u2009000}", "1000"),
    ("\\boxed{1\u2009000}", "0"), ("\\boxed{1 200}", "1200"), ("\\boxed{1 200}", "201"),
    ("\\boxed{2 500}", "502"), ("\\boxed{1\\,000}", "1000"), ("\\boxed{1{,}000}", "1000"),
    ("\\boxed{1\u202f000}", "1000"), ("\\boxed{1\u00a0000}", "1000"), ("The answer is 1 000.", "1000"),
    ("\\boxed{\uff15}", "5"), ("\\boxed{0.00001}", "1e-5"), ("\\boxed{0.0000025}", "2.5e-06"),
    ("\\boxed{100000000000000000000}", "1e20"),
]


def _shown(text: str) -> str:
    return "`" + text.encode("ascii", "backslashreplace").decode().replace("|", "\\|") + "`"


def digit_forms(table: Scorers) -> list[str]:
    out = ["## Digit forms and scientific golds: stock math-verify beside `math`", "",
           "| response | gold | `math_verify` (stock) | `math` |", "|---|---|---|---|"]
    for response, gold in DIGIT_FORMS:
        a = table["math_verify"](response, gold, {}).status
        b = table["math"](response, gold, {}).status
        out.append(f"| {_shown(response)} | {_shown(gold)} | {a} | {b} |")
    return [*out, ""]


def class_figures(table: Scorers) -> dict[tuple[str, str, str], Counter[str]]:
    """(class, kind, fold) → rows, refused, paid, lost, library_pays."""
    out: dict[tuple[str, str, str], Counter[str]] = defaultdict(Counter)
    for r in hedge_corpus():
        if "class" not in r:
            continue
        v = table[r["scorer"]](r["response"], r["gold"], {})
        c = out[(r["class"], r["kind"], r["fold"])]
        c["rows"] += 1
        c["refused" if v.status != "correct" else "paid"] += 1
        stock = (table["math_verify"](r["response"], r["gold"], {}).status == "correct"
                 if r["scorer"] == "math" else None)
        c["library_pays"] += bool(stock)
        if r["kind"] == "near_miss" and v.status != "correct" and stock is not False:
            c["lost"] += 1
    return out


def class_section(figs: dict[tuple[str, str, str], Counter[str]]) -> list[str]:
    out = ["## Round 2 hedge corpus, per class", "",
           "`tests/golden/hedge_corpus_r2.py` (21 classes; in each list every fifth template is",
           "held out). *Must refuse* classes include `unclosed_think` and `wrong_digit_groups`",
           "(not hedges, but never paid). *Library pays*: stock math-verify's verdict on the same",
           "`math` rows. *Lost*: a near miss refused where the library pays it (light scorers: any).",
           "The held-out fold was run once before the last change to the rule: `conditional`",
           "held out was then 34 of 60 refused (`under the other reading of the problem it is 6`:",
           "the condition clause did not reach the words stating the value); the rule was",
           "extended, so that template is no longer a blind test.", "",
           "| class | kind | fold | rows | refused | paid | lost | library pays |",
           "|---|---|---|---|---|---|---|---|"]
    for (cls, kind, fold), c in sorted(figs.items(), key=lambda x: (x[0][1], x[0][0], x[0][2])):
        out.append(f"| {cls} | {kind} | {fold} | {c['rows']} | {c['refused']} | {c['paid']} | "
                   f"{c['lost']} | {c['library_pays']} |")
    return [*out, ""]
