"""scorer=math_verify gives exactly the verdict of in-process stock math-verify, item by item,
on every row of ``corpus.jsonl`` (the workers run with memos and shortcuts installed; the
reference runs in a fresh interpreter without them, see ``tests/stock.py``)."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import read_jsonl
from tests.stock import stock_verdicts

pytestmark = pytest.mark.needs_data


def test_verdicts_identical_to_in_process_math_verify(client: httpx.Client) -> None:
    rows = read_jsonl("corpus.jsonl")
    assert len(rows) >= 6500
    stock = stock_verdicts([(r["gold"], r["response"]) for r in rows])
    items = [{"response": r["response"], "ground_truth": r["gold"], "scorer": "math_verify",
              "id": str(i)} for i, r in enumerate(rows)]
    results = []
    for i in range(0, len(items), 2048):
        r = client.post("/v1/score", json={"items": items[i : i + 2048], "timeout_s": 30})
        assert r.status_code == 200, r.text[:500]
        results += r.json()["results"]
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


def test_verdicts_identical_on_olympiad_latex(client: httpx.Client) -> None:
    """OlympiadBench reference solutions against their final answers: harder LaTeX than the
    corpus (matrices, intervals, expressions with parameters) through the same shortcuts."""
    rows = read_jsonl("qwen25math_olympiadbench_test.jsonl")
    pairs = [(r["final_answer"][0].strip("$"), r["solution"][0]) for r in rows]
    stock = stock_verdicts(pairs)
    items = [{"response": pred, "ground_truth": gold, "scorer": "math_verify"}
             for gold, pred in pairs]
    r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
    assert r.status_code == 200, r.text[:500]
    results = r.json()["results"]
    assert not [x for x in results if x["status"] in ("timeout", "error")]
    mismatches = [(i, pairs[i][0], stock[i], x["status"]) for i, x in enumerate(results)
                  if (x["status"] == "correct") != stock[i]]
    assert mismatches == []
    assert 0.2 < sum(stock) / len(stock) < 0.95
