"""Golden regression suite (``tests/golden/``): known false positives and negatives of
math-verify with the verdict each profile must give, and Math-Verify's own test cases
replayed through the real service.

* ``golden/cases.jsonl``: one row per case, ``expect`` maps profile → status; ``source`` says
  where the case comes from (a Math-Verify issue, the corpus, DESIGN.md, our probing).
* ``golden/math_verify_cases.jsonl``: written by ``golden/extract_math_verify_cases.py``
  from the math-verify 0.9.0 sdist (what it skips, and why, is in its docstring).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from reward_service.scorers import rule_of
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.patches import install_patches
from tests.stock import stock_verdicts

GOLDEN = Path(__file__).with_name("golden")
CASES = [json.loads(line) for line in (GOLDEN / "cases.jsonl").open()]
MV_CASES = [json.loads(line) for line in (GOLDEN / "math_verify_cases.jsonl").open()]
install_patches()  # what a worker runs (verdicts do not depend on it: tests/test_parity.py)
S = build_scorers()


def _score(client: httpx.Client, items: list[dict]) -> list[dict]:
    r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
    assert r.status_code == 200, r.text[:500]
    results = r.json()["results"]
    assert [x["id"] for x in results] == [x["id"] for x in items]
    return results


@pytest.mark.parametrize(
    ("scorer", "case"),
    [(scorer, c) for c in CASES for scorer in c["expect"]],
    ids=lambda x: x if isinstance(x, str) else (x["note"] or x["response"])[:40],
)
def test_golden_case(scorer: str, case: dict) -> None:
    v = S[scorer](case["response"], case["gold"], {})
    assert v.status == case["expect"][scorer], (v, case["source"])


def test_golden_suite_covers_each_rule() -> None:
    reasons = " | ".join(
        S["math"](c["response"], c["gold"], {}).reason or "" for c in CASES if "math" in c["expect"]
    )
    for rule in ("hedged", "different exact values", "does not pin down", "percent", "rescued",
                 "units differ"):
        assert rule in reasons
    assert len(CASES) >= 60


def test_golden_cases_through_the_service(client: httpx.Client) -> None:
    items = [
        {"response": c["response"], "ground_truth": c["gold"], "scorer": scorer, "id": f"{i}:{scorer}"}
        for i, c in enumerate(CASES) for scorer in c["expect"]
    ]
    results = _score(client, items)
    wrong = [
        (x["id"], x["status"], x["reason"])
        for x, item in zip(results, items, strict=True)
        if x["status"] != CASES[int(item["id"].split(":")[0])]["expect"][item["scorer"]]
    ]
    assert wrong == []
    # an overridden verdict says why, and the result carries what was extracted
    hedge = next(x for x in results if x["scorer"] == "math" and (x["reason"] or "").startswith("hedged"))
    assert hedge["extracted"] and hedge["extracted_gold"] and hedge["scorer_version"].startswith("2.")


def test_info_reports_the_profiles(client: httpx.Client) -> None:
    info = client.get("/v1/info").json()
    text = json.dumps(info)
    assert '"math"' in text and '"math_verify"' in text and "2.3+math-verify.0.9.0" in text


def test_math_verify_own_cases_through_the_service(client: httpx.Client) -> None:
    """Both profiles get at least as many of the library's own cases right as the library
    with default configs (measured here, in-process, on the same cases)."""
    pairs = [(c["gold"], c["pred"]) for c in MV_CASES]  # stock: a fresh interpreter
    raw = stock_verdicts(pairs, box_gold=False)
    stock_raw = sum(v == c["expected"] for v, c in zip(raw, MV_CASES, strict=True))
    stock_boxed = stock_verdicts(pairs)
    right: dict[str, int] = {}
    for scorer in ("math_verify", "math"):
        items = [
            {"response": c["pred"], "ground_truth": c["gold"], "scorer": scorer, "id": str(i)}
            for i, c in enumerate(MV_CASES)
        ]
        results = _score(client, items)
        assert not [x for x in results if x["status"] in ("timeout", "error")]
        ok = [x["status"] == "correct" for x in results]
        right[scorer] = sum(o == c["expected"] for o, c in zip(ok, MV_CASES, strict=True))
        if scorer == "math_verify":  # parity: item by item what stock math-verify says
            assert ok == stock_boxed
    stock = sum(s == c["expected"] for s, c in zip(stock_boxed, MV_CASES, strict=True))
    assert len(MV_CASES) >= 250
    assert right["math_verify"] == stock
    assert right["math"] >= stock
    # The library on the raw gold (no \boxed{} wrapping) gets 2 more: a decimal-comma gold
    # "1,22" (boxed it is the set {1, 22}) and "1 - 1/e" vs "1 + 1/e" expected equal (a
    # parse failure of both, see docs/CORRECTNESS.md). math may not fall further behind.
    assert right["math"] >= stock_raw - 2, (right, stock_raw)


def test_math_overrides_the_library_only_with_a_reason() -> None:
    """Over every golden and Math-Verify case: where ``math`` and ``math_verify`` differ, the
    ``math`` verdict names the rule; a veto never turns incorrect into correct."""
    pairs = [(c["response"], c["gold"]) for c in CASES] + [(c["pred"], c["gold"]) for c in MV_CASES]
    differ = 0
    for response, gold in pairs:
        a, b = S["math_verify"](response, gold, {}), S["math"](response, gold, {})
        if a.status != b.status:
            differ += 1
            assert b.reason, (response[:80], gold, a, b)
            assert rule_of(b.reason) is not None, b.reason
            if b.status == "correct":
                assert rule_of(b.reason) in ("rescued", "percent", "scientific", "variable"), b.reason
        assert b.extracted == a.extracted or b.status in ("bad_ground_truth", "no_answer") \
            or gold.strip().startswith("$") or rule_of(b.reason) == "scientific"
    assert differ >= 15
