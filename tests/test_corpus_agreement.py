"""Agreement of each profile with the labels of ``../shared/data/corpus.jsonl``, through the
service. Every disagreement is listed with a judgement in ``docs/CORRECTNESS.md``
(``python -m bench.correctness``)."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import read_jsonl

pytestmark = pytest.mark.needs_data


@pytest.mark.parametrize("scorer", ["math_verify", "math", "gsm8k"])
def test_agreement_with_corpus_labels(client: httpx.Client, scorer: str) -> None:
    rows = read_jsonl("corpus.jsonl")
    if scorer == "gsm8k":
        rows = [r for r in rows if r["source"].startswith("gsm8k")]
    results = []
    for start in range(0, len(rows), 1024):
        chunk = rows[start : start + 1024]
        items = [{"response": r["response"], "ground_truth": r["gold"], "scorer": scorer}
                 for r in chunk]
        r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
        assert r.status_code == 200, r.text[:500]
        results += r.json()["results"]
    assert len(results) == len(rows)
    assert not [x for x in results if x["status"] in ("timeout", "error")]
    agree = sum((x["status"] == "correct") == r["label"] for x, r in zip(results, rows, strict=True))
    assert agree / len(rows) >= 0.998, (scorer, agree, len(rows))


def test_math_profile_extracts_exactly_what_parse_does() -> None:
    """``math_strict._extract`` is a copy of the library's extraction that also returns where
    the answer was found: its answers equal ``parse``'s on corpus rows."""
    from math_verify import parse

    from reward_service.scorers.math_strict import _extract

    rows = read_jsonl("corpus.jsonl")[::5]
    mismatches = [
        i for i, r in enumerate(rows)
        if [str(x) for x in _extract(r["response"])[0]]
        != [str(x) for x in parse(r["response"], parsing_timeout=None)]  # type: ignore[arg-type]
    ]
    assert mismatches == []
