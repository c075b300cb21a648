"""scorer=math_verify gives exactly the verdict of in-process stock math-verify."""

from __future__ import annotations

import httpx
import pytest
from math_verify import parse, verify

from reward_service.scorers.math_verify_scorer import boxed_gold
from tests.helpers import read_jsonl

pytestmark = pytest.mark.needs_data


def test_verdicts_identical_to_in_process_math_verify(client: httpx.Client) -> None:
    rows = read_jsonl("corpus.jsonl")[::10]  # 653 rows, every source, groups partly kept
    assert len(rows) >= 500
    stock = [bool(verify(parse(boxed_gold(r["gold"])), parse(r["response"]))) for r in rows]
    items = [{"response": r["response"], "ground_truth": r["gold"], "scorer": "math_verify",
              "id": str(i)} for i, r in enumerate(rows)]
    r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
    assert r.status_code == 200, r.text[:500]
    results = r.json()["results"]
    assert [x["id"] for x in results] == [str(i) for i in range(len(rows))]
    assert not [x for x in results if x["status"] in ("timeout", "error")]
    mismatches = [
        (i, rows[i]["gold"], stock[i], x["status"])
        for i, x in enumerate(results)
        if (x["status"] == "correct") != stock[i]
    ]
    assert mismatches == []
    # the corpus is a real mix, not all one verdict
    assert 0.2 < sum(stock) / len(stock) < 0.9
