"""Scoring correctness figures, and ``docs/CORRECTNESS.md``.

    $ python -m bench.correctness                # prints the figures, rewrites docs/CORRECTNESS.md
    $ python -m bench.correctness --no-write     # prints only

In-process, one core: every row of ``../shared/data/corpus.jsonl`` through the ``math_verify``
and ``math`` profiles (and ``gsm8k`` on the GSM8K rows), agreement with the corpus labels,
every disagreement with a hand-written judgement (``JUDGEMENTS`` in ``judgements.py``: a new disagreement
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

from bench.correctness import r2 as correctness_r2
from bench.correctness import r3 as correctness_r3
from bench.correctness.doc import cost_section, render
from bench.correctness.judgements import PROFILES
from reward_service.scorers import rule_of
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.math_verify_scorer import boxed_gold
from reward_service.scorers.patches import install_patches
from tests.golden.hedge_corpus import generate as hedge_corpus
from tests.helpers import DATA

ROOT = Path(__file__).resolve().parents[2]
CORPUS = DATA / "corpus.jsonl"
MV_CASES = ROOT / "tests" / "golden" / "math_verify_cases.jsonl"
MV_OTHERS = ROOT / "tests" / "golden" / "math_verify_cases_other_settings.jsonl"
GOLDEN = ROOT / "tests" / "golden" / "cases.jsonl"
DOC = ROOT / "docs" / "CORRECTNESS.md"


def _rows() -> list[dict]:
    with CORPUS.open() as fh:
        return [json.loads(line) for line in fh]


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
        DOC.write_text(render(rows, fig, rate, suite, hedges, round2, golden_differences(),
                              round3))
        print(f"wrote {DOC}")


if __name__ == "__main__":
    main()
