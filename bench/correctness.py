"""Scoring correctness figures, and ``docs/CORRECTNESS.md``.

    $ python -m bench.correctness                # prints the figures, rewrites docs/CORRECTNESS.md
    $ python -m bench.correctness --no-write     # prints only

In-process, one core: every row of ``../shared/data/corpus.jsonl`` through the ``math_verify``
and ``math`` profiles (and ``gsm8k`` on the GSM8K rows), agreement with the corpus labels,
every disagreement with a hand-written judgement (``JUDGEMENTS`` below: a new disagreement
has none and is flagged), the rows where the two math profiles differ, the speed of each
profile, and Math-Verify's own test cases (``tests/golden/math_verify_cases.jsonl``) right
per profile against stock math-verify. The service-level checks of the same figures are
``tests/test_golden.py`` and ``tests/test_corpus_agreement.py``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from math_verify import parse, verify

from reward_service.scorers.impl import build_scorers
from reward_service.scorers.math_verify_scorer import boxed_gold
from reward_service.scorers.registry import SCORERS

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "data" / "corpus.jsonl"
MV_CASES = ROOT / "tests" / "golden" / "math_verify_cases.jsonl"
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


# Math-Verify cases the ``math`` profile gets "wrong": (gold, start of pred) → judgement.
MV_JUDGEMENTS: dict[tuple[str, str], str] = {
    ("1,22", "1.22"): (
        "Gold ambiguity. Wrapped in \\boxed{} (as verl and both profiles do) `1,22` is the "
        "set {1, 22}; the library's test reads it as the decimal-comma number 1.22, which "
        "raw `parse` does. MATH golds like `1,2` are lists, so we keep the list reading."
    ),
    ("$9$", "Answer $ \n 9 \n $"): (
        "Their test expects no extraction because their config has no expression extractor; "
        "with default extraction the answer 9 is found, and 9 is right."
    ),
    ("$9$", "Answer \\( \n 9 \n \\)"): "As above.",
    ("$1 - \\frac{1}{\\mathrm{e}}$", "$1 + \\frac{1}{\\mathrm{e}}$"): (
        "The expected verdict is itself a false positive (1 - 1/e is not 1 + 1/e): raw "
        "`parse` fails on both and keeps only the `1`, so the library calls them equal. "
        "Boxed, the gold does not parse and nothing matches, which is the right outcome."
    ),
}


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


def math_verify_suite() -> dict:
    cases = [json.loads(line) for line in MV_CASES.open()]
    table = build_scorers()
    right: dict = {"cases": len(cases), "stock_raw_gold": 0, "stock_boxed_gold": 0, "missed": []}
    for c in cases:
        pred = parse(c["pred"])
        right["stock_raw_gold"] += bool(verify(parse(c["gold"]), pred)) == c["expected"]
        right["stock_boxed_gold"] += bool(verify(parse(boxed_gold(c["gold"])), pred)) == c["expected"]
        for name in PROFILES:
            v = table[name](c["pred"], c["gold"], {})
            right[name] = right.get(name, 0) + ((v.status == "correct") == c["expected"])
            if name == "math" and (v.status == "correct") != c["expected"]:
                right["missed"].append((c, v))
    return right


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


def render(rows: list[dict], fig: dict, rate: dict[str, float], suite: dict) -> str:
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
        "Every case the `math` profile gets wrong:",
        "",
        "| gold | response | expected | `math` | judgement |",
        "|---|---|---|---|---|",
        *(
            f"| `{_cell(c['gold'], 30)}` | `{_cell(c['pred'], 40)}` | {c['expected']} | {v.status} | "
            + next((j for (g, p), j in MV_JUDGEMENTS.items() if c["gold"] == g and c["pred"].startswith(p)),
                   "**not yet judged**")
            + " |"
            for c, v in suite["missed"]
        ),
        "",
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
    args = ap.parse_args()
    rows = _rows()
    fig = corpus_figures(rows)
    rate = speed(rows)
    suite = math_verify_suite()
    for name, (agree, n) in fig["agreement"].items():
        print(f"{name:12s} agreement {agree}/{n} = {agree / n:.4%}")
    for name, r in rate.items():
        print(f"{name:12s} {r:.0f} items/s (in-process, one core)")
    print("math-verify cases right:", {k: v for k, v in suite.items() if k != "missed"})
    if not args.no_write:
        DOC.write_text(render(rows, fig, rate, suite))
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
