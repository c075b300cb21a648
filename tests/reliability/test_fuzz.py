"""Property tests: random text through real sandboxed workers, random JSON at the API."""

from __future__ import annotations

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import Service

LATEX_BITS = ["\\boxed{", "}", "{", "\\frac{", "}{", "^", "_", "\\sqrt{", "$", "\\(", "\\)",
              "\\left(", "\\right)", "x", "=", "1", "0", ",", ".", "%", "\\pi", "\\infty",
              "\\in", "[", ")", "####", " or ", "\\cup", "\\{", "\\}", "e", "-", "9" * 30]
latexish = st.lists(st.sampled_from(LATEX_BITS) | st.text(max_size=5), max_size=40).map("".join)
text = st.text(max_size=300) | latexish
SCORERS = ["math_verify", "gsm8k", "numeric", "choice"]
STATUSES = {"correct", "incorrect", "no_answer", "bad_ground_truth", "timeout", "error"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
item_like = st.fixed_dictionaries(
    {}, optional={"response": json_values | text, "ground_truth": json_values | text,
                  "scorer": st.sampled_from([*SCORERS, "nope", ""]) | json_values,
                  "id": json_values, "extra": json_values, "data_source": json_values},
)
body_like = st.fixed_dictionaries(
    {}, optional={"items": st.lists(item_like, max_size=4) | json_values,
                  "timeout_s": json_values},
) | json_values


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(st.tuples(text, text, st.sampled_from(SCORERS)), min_size=1, max_size=8))
def test_random_text_always_gets_a_status_by_its_deadline(svc: Service, items: list) -> None:
    body = {"items": [{"response": r, "ground_truth": g, "scorer": s} for r, g, s in items],
            "timeout_s": 1.0}
    r = httpx.post(svc.url + "/v1/score", json=body, timeout=60)
    assert r.status_code == 200, r.text[:300]
    results = r.json()["results"]
    assert len(results) == len(items)
    for x in results:
        assert x["status"] in STATUSES
        assert x["score"] == (1.0 if x["status"] == "correct" else 0.0)
        assert x["elapsed_s"] <= 1.5


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=body_like)
def test_random_json_bodies_never_get_a_5xx(svc: Service, body: object) -> None:
    r = httpx.post(svc.url + "/v1/score", json=body, timeout=60)
    assert r.status_code in (200, 413, 422), (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
