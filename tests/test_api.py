"""The HTTP contract, against the real server and real workers (session fixture ``svc``)."""

from __future__ import annotations

import httpx
import pytest

from reward_service.server.schemas import ScoreResponse
from tests.helpers import service


def _score(client: httpx.Client, items: list[dict], **body: object) -> httpx.Response:
    return client.post("/v1/score", json={"items": items, **body})


def test_results_in_order_with_ids_and_statuses(client: httpx.Client) -> None:
    items = [
        {"response": "So the answer is $\\boxed{\\frac{1}{2}}$.", "ground_truth": "0.5", "id": "a"},
        {"response": "I get 17.\n#### 17", "ground_truth": "18", "data_source": "openai/gsm8k",
         "id": "b"},
        {"response": "I don't know.", "ground_truth": "42", "id": "c"},
        {"response": "\\boxed{3}", "ground_truth": "", "id": "d"},
        {"response": "The answer is (C).", "ground_truth": "C", "scorer": "choice", "id": "e"},
        {"response": "about \\boxed{3.14159}", "ground_truth": "3.1416", "scorer": "numeric",
         "extra": {"rel_tol": 1e-4}, "id": "f"},
    ]
    r = _score(client, items)
    assert r.status_code == 200, r.text
    body = r.json()
    got = [(x["id"], x["status"], x["score"], x["scorer"]) for x in body["results"]]
    assert got == [
        ("a", "correct", 1.0, "math"),  # the default math profile
        ("b", "incorrect", 0.0, "gsm8k"),
        ("c", "no_answer", 0.0, "math"),
        ("d", "bad_ground_truth", 0.0, "math"),
        ("e", "correct", 1.0, "choice"),
        ("f", "correct", 1.0, "numeric"),
    ]
    assert body["count"] == 6
    assert body["statuses"]["correct"] == 3
    first = body["results"][0]
    assert first["extracted"] == "\\frac{1}{2}" and first["scorer_version"].startswith("2.3")
    assert first["elapsed_s"] > 0
    assert body["results"][1]["extracted"] == "17"


def test_gsm8k_format_score_travels_from_the_worker(client: httpx.Client) -> None:
    """``extra.format_score`` is scored in the sandboxed worker and its credit comes back in
    ``score`` with the status unchanged; a bad value is that item's ``error``, not a 4xx."""
    wrong = {"response": "9 * 2 = 17\n#### 17", "ground_truth": "18", "scorer": "gsm8k"}
    r = _score(client, [{**wrong, "extra": {"format_score": 0.2}}, wrong,
                        {**wrong, "extra": {"format_score": 2}}])
    assert r.status_code == 200, r.text
    got = [(x["status"], x["score"]) for x in r.json()["results"]]
    assert got == [("incorrect", 0.2), ("incorrect", 0.0), ("error", 0.0)]
    assert "format_score" in r.json()["results"][2]["reason"]


def test_reply_is_exactly_a_score_response(client: httpx.Client) -> None:
    """The hot path serialises plain dicts, not models: every field of ``ScoreResponse`` and
    ``ItemResult`` must be there, with its type, and nothing else."""
    items = [
        {"response": "\\boxed{2}", "ground_truth": "2", "id": "x"},
        {"response": "\\boxed{2}", "ground_truth": "2"},  # duplicate: dedup, then the cache
        {"response": "no answer here", "ground_truth": "2"},
        {"response": "\\boxed{2}", "ground_truth": ""},
        {"response": "#### 3", "ground_truth": "4", "scorer": "gsm8k"},
    ]
    for _ in range(2):  # the second time from the verdict cache (cached: true)
        r = _score(client, items)
        assert r.status_code == 200 and r.headers["content-type"] == "application/json"
        raw = r.json()
        assert ScoreResponse.model_validate_json(r.content).model_dump(mode="json") == raw
    assert [x["cached"] for x in raw["results"]][:2] == [True, True]


def test_score_alias_path(client: httpx.Client) -> None:
    r = client.post("/score", json={"items": [{"response": "#### 7", "ground_truth": "7",
                                               "scorer": "gsm8k"}]})
    assert r.status_code == 200
    assert r.json()["results"][0]["status"] == "correct"


def test_duplicates_are_scored_once_and_cached(client: httpx.Client) -> None:
    item = {"response": "x = \\boxed{1234567}", "ground_truth": "1234567"}
    r = _score(client, [item] * 5)
    results = r.json()["results"]
    assert [x["status"] for x in results] == ["correct"] * 5
    again = _score(client, [item]).json()["results"][0]
    assert again["cached"] is True and again["status"] == "correct"


@pytest.mark.parametrize(
    ("content", "headers", "code"),
    [
        (b"{not json", {"content-type": "application/json"}, 422),
        (b'{"items": "nope"}', {"content-type": "application/json"}, 422),
        (b'{"items": [{"response": 5, "ground_truth": "1"}]}', {"content-type": "application/json"}, 422),
        (b'{"items": [{"response": "a"}]}', {"content-type": "application/json"}, 422),
        (b'{"items": [], "extra_field": 1}', {"content-type": "application/json"}, 422),
        (b'{"items": [{"response": "\xff\xfe", "ground_truth": "1"}]}', {"content-type": "application/json"}, 422),
    ],
    ids=["malformed", "items-not-list", "wrong-type", "missing-field", "unknown-field", "bad-utf8"],
)
def test_malformed_requests_get_422(
    client: httpx.Client, content: bytes, headers: dict[str, str], code: int
) -> None:
    r = client.post("/v1/score", content=content, headers=headers)
    assert r.status_code == code, r.text
    assert "detail" in r.json()


def test_validation_errors_do_not_echo_input(client: httpx.Client) -> None:
    big = "Z" * 100_000
    r = client.post("/v1/score", json={"items": [{"response": big, "ground_truth": 1}]})
    assert r.status_code == 422
    assert len(r.content) < 5_000


def test_unknown_scorer_negative_and_huge_timeout(client: httpx.Client) -> None:
    r = _score(client, [{"response": "1", "ground_truth": "1", "scorer": "nope"}])
    assert r.status_code == 422 and "unknown scorer" in r.text
    r = _score(client, [{"response": "1", "ground_truth": "1"}], timeout_s=-1)
    assert r.status_code == 422
    r = _score(client, [{"response": "1", "ground_truth": "1"}], timeout_s=0)
    assert r.status_code == 422
    r = _score(client, [{"response": "1", "ground_truth": "1"}], timeout_s=10_000)
    assert r.status_code == 422 and "timeout_s" in r.text


@pytest.mark.parametrize("timeout_s", [True, False, "1.5", "5", [1], {"s": 1}],
                         ids=["true", "false", "string", "digit-string", "list", "object"])
def test_timeout_s_must_be_a_json_number(client: httpx.Client, timeout_s: object) -> None:
    # found by the schema fuzzer (tests/reliability/test_schema_fuzz.py): pydantic's lax mode
    # read `true` as 1.0 and "1.5" as 1.5, accepting a body the schema (a number) calls invalid
    r = _score(client, [{"response": "1", "ground_truth": "1"}], timeout_s=timeout_s)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "timeout_s"]


def test_timeout_s_integer_or_float(client: httpx.Client) -> None:
    for timeout_s in (2, 2.5):
        r = _score(client, [{"response": "\\boxed{1}", "ground_truth": "1"}], timeout_s=timeout_s)
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["status"] == "correct"


def test_openapi_documents_what_metrics_and_readyz_answer(client: httpx.Client) -> None:
    # found by the schema fuzzer: /metrics was documented as application/json
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    assert client.get("/metrics").headers["content-type"].startswith("text/plain")
    ready = paths["/readyz"]["get"]["responses"]
    assert {"200", "503"} <= set(ready)
    assert set(ready["503"]["content"]) == {"application/json"}


def test_empty_batch_and_empty_strings(client: httpx.Client) -> None:
    r = _score(client, [])
    assert r.status_code == 200 and r.json()["results"] == []
    r = _score(client, [{"response": "", "ground_truth": "5"},
                        {"response": "", "ground_truth": "5", "scorer": "gsm8k"}])
    assert [x["status"] for x in r.json()["results"]] == ["no_answer", "no_answer"]


def test_nul_bytes_and_odd_unicode_are_per_item_statuses(client: httpx.Client) -> None:
    items = [
        {"response": "\x00\x00 \\boxed{4} \x00", "ground_truth": "4"},
        {"response": "\ud7ff \U0001f600 \u202e \\boxed{\x00}", "ground_truth": "4"},
        {"response": "#### 4\x00", "ground_truth": "4\x00", "scorer": "gsm8k"},
    ]
    r = _score(client, items)
    assert r.status_code == 200, r.text
    statuses = [x["status"] for x in r.json()["results"]]
    assert statuses[0] == "correct"
    assert all(s in {"correct", "incorrect", "no_answer", "bad_ground_truth", "error"}
               for s in statuses)


@pytest.mark.parametrize(
    ("route", "body", "loc"),
    [
        ("/v1/score", r'{"items": [{"response": "\\boxed{5}\ud800", "ground_truth": "5"}]}',
         ["body", "items", 0, "response"]),
        ("/v1/score", r'{"items": [{"response": "5", "ground_truth": "\udfff5"}]}',
         ["body", "items", 0, "ground_truth"]),
        ("/v1/score", r'{"items": [{"response": "1", "ground_truth": "1", "id": "\udc00"}]}',
         ["body", "items", 0, "id"]),
        ("/v1/score", r'{"items": [{"response": "(A)", "ground_truth": "A", "scorer": "choice",'
                      r' "extra": {"choices": ["\ud800", "A"]}}]}', ["body", "items", 0, "extra"]),
        ("/v1/score", r'{"items": [{"response": "1", "ground_truth": "1", "scorer": "\ud800"}]}',
         ["body", "items", 0, "scorer"]),
        ("/get_reward", r'{"query": ["Q: A: \\boxed{5}"], "prompts": ["Q: "], "labels": ["5\ud800"]}',
         ["body", "labels", 0]),
        ("/get_reward", r'{"query": ["Q: A: \\boxed{5}\ud800"], "prompts": ["Q: "], "labels": ["5"]}',
         ["body", "query", 0]),
        ("/slime/reward", r'{"prompt": "x", "response": "\\boxed{5}", "label": "5\ud800"}',
         ["body", "label"]),
        ("/slime/reward", r'{"prompt": "x", "response": "\\boxed{5}\ud800", "label": "5"}',
         ["body", "response"]),
    ],
)
def test_lone_surrogates_get_422_naming_the_field(
    client: httpx.Client, route: str, body: str, loc: list[object]
) -> None:
    """JSON may carry ``\\ud800`` escapes that are not Unicode text. They cannot be scored
    (nor sent to a worker): the request gets a 422 naming the field, never a 500."""
    r = client.post(route, content=body.encode(), headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert [d["loc"] for d in detail] == [loc] and detail[0]["type"] == "string_unicode"


def test_a_lone_surrogate_in_an_unused_field_is_harmless(client: httpx.Client) -> None:
    body = r'{"prompt": "\ud800", "response": "\\boxed{5}", "label": "5"}'
    r = client.post("/slime/reward", content=body.encode(),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json() == 1.0


BIG = 123456789012345678901234567890  # over 64 bits: orjson would make it a float


@pytest.mark.parametrize(("route", "body"), [
    ("/get_reward", {"query": [f"Q: \\boxed{{{BIG}}}"], "prompts": ["Q: "], "labels": [BIG]}),
    ("/slime/reward", {"response": f"\\boxed{{{BIG}}}", "label": BIG}),
])
def test_an_integer_over_64_bits_keeps_every_digit(client: httpx.Client, route: str,
                                                   body: dict) -> None:
    """A label sent as a JSON integer of 30 digits is that integer, not 1.2345678901234568e+29
    (orjson parses integers over 64 bits as floats: the lean routes use the standard library
    for such a body)."""
    r = client.post(route, json=body)
    assert r.status_code == 200, r.text
    reward = r.json()["rewards"][0] if route == "/get_reward" else r.json()
    assert reward == 1.0, r.text


def test_too_many_items_gets_413(client: httpx.Client) -> None:
    items = [{"response": "1", "ground_truth": "1"}] * 200_000
    r = _score(client, items)
    assert r.status_code == 413, r.text[:300]
    assert "items" in r.json()["detail"]


@pytest.mark.parametrize("route", ["/v1/score", "/get_reward"])
def test_too_many_items_are_refused_on_their_count(client: httpx.Client, route: str) -> None:
    """413 on the decoded body's count, before any item is validated (a 7 MB body of 200,000
    items held the event loop 0.32 s in validation before its 413). Shown by an invalid first
    item: too many items answer 413, not that item's 422; the control, the same invalid item in
    a small request, is the 422."""
    n = 20_000  # over the default REWARD_MAX_ITEMS (16,384)

    def body(count: int) -> dict[str, object]:
        if route == "/v1/score":
            return {"items": [{"response": 5, "ground_truth": "1"}]
                    + [{"response": "1", "ground_truth": "1"}] * (count - 1)}
        return {"query": [5] + ["Q: 1"] * (count - 1), "prompts": ["Q: "] * count,
                "labels": ["1"] * count}

    r = client.post(route, json=body(n))
    assert r.status_code == 413 and f"{n} items" in r.json()["detail"], r.text[:300]
    ctl = client.post(route, json=body(2))
    assert ctl.status_code == 422, ctl.text[:300]
    assert ctl.json()["detail"][0]["loc"][:3] in (["body", "items", 0], ["body", "query", 0])


def test_20mb_response_gets_413(client: httpx.Client) -> None:
    r = _score(client, [{"response": "9" * 20_000_000, "ground_truth": "1"}])
    assert r.status_code == 413, r.text[:300]
    assert "response" in r.json()["detail"]


def _counted(client: httpx.Client, route: str, code: int) -> float:
    """``reward_http_requests_total{route, code}`` as /metrics shows it now."""
    want = f'reward_http_requests_total{{code="{code}",route="{route}"}} '
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(want):
            return float(line[len(want):])
    return 0.0


def test_body_over_limit_gets_413_before_parsing(client: httpx.Client) -> None:
    """Refused by the body limit, before any route runs, and still answered and counted by
    the one renderer under the route's template (they were not counted at all)."""
    before = _counted(client, "/v1/score", 413)
    r = client.post("/v1/score", content=b"x" * (65 * 1024 * 1024),
                    headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert "larger than" in r.json()["detail"]
    assert _counted(client, "/v1/score", 413) == before + 1
    before = _counted(client, "unmatched", 413)
    r = client.post("/no/such/route", content=b"x" * (65 * 1024 * 1024))
    assert r.status_code == 413 and _counted(client, "unmatched", 413) == before + 1


def test_health_ready_info_metrics(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["ready"] is True
    info = client.get("/v1/info").json()
    assert {s["name"] for s in info["scorers"]} == {"math", "math_verify", "gsm8k", "numeric",
                                                     "choice"}
    assert info["limits"]["max_items"] > 0
    assert info["sandbox"]["mode"] == "strict"
    assert set(info["sandbox"]["layers"]) == {"clean_env", "rlimits", "netns", "landlock", "uid",
                                              "seccomp"}
    assert info["workers"]["active"] == 2
    _score(client, [{"response": "\\boxed{2}", "ground_truth": "2"}])
    text = client.get("/metrics").text
    assert 'reward_items_total{scorer="math",status="correct"}' in text
    assert 'reward_workers{state="active"} 2.0' in text
    assert client.get("/docs").status_code == 200
    assert "/v1/score" in client.get("/openapi.json").json()["paths"]


def test_bearer_token() -> None:
    with service(REWARD_API_TOKEN="s3cret-token", REWARD_WORKERS=1, REWARD_SPARES=0) as svc:
        item = {"items": [{"response": "\\boxed{1}", "ground_truth": "1"}]}
        with httpx.Client(base_url=svc.url, timeout=30) as c:
            assert c.post("/v1/score", json=item).status_code == 401
            bad = c.post("/v1/score", json=item, headers={"Authorization": "Bearer nope"})
            assert bad.status_code == 401 and bad.headers["www-authenticate"] == "Bearer"
            ok = c.post("/v1/score", json=item, headers={"Authorization": "Bearer s3cret-token"})
            assert ok.status_code == 200
            for path in ("/v1/info", "/metrics"):
                assert c.get(path).status_code == 401
            for path in ("/docs", "/openapi.json", "/redoc"):  # not served with a token
                assert c.get(path).status_code == 401  # refused on its headers (issue 27)
                assert c.get(path, headers={"Authorization": "Bearer s3cret-token"}
                             ).status_code == 404
            assert c.get("/healthz").status_code == 200
            assert c.get("/readyz").status_code == 200
        assert "s3cret-token" not in svc.log()
