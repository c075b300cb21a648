"""POST /get_reward (OpenRLHF) and POST /slime/reward (slime) against the real server.

Each test sends exactly what the framework sends: OpenRLHF's ``request_api_wrapper`` posts
``{"query", "prompts", "labels"}`` with ``Content-Type: application/json`` and reads
``rewards``/``scores``/``extra_logs`` with ``torch.as_tensor``; slime's ``remote_rm`` posts
``{"prompt", "response", "label"}`` and takes the JSON reply as the reward.
"""

from __future__ import annotations

import math
import re
import threading

import httpx
import pytest

from reward_service.scorers import RULE_KEYS
from tests.helpers import service, wait_until

QWEN_PROMPT = (
    "<|im_start|>system\nPlease reason step by step, and put your final answer within "
    "\\boxed{}.<|im_end|>\n<|im_start|>user\nJanet has 3 apples and buys 4 more. How many?"
    "<|im_end|>\n<|im_start|>assistant\n"
)
LLAMA3_PROMPT = (
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 1/2 as a decimal?"
    "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
)


def openrlhf_post(client: httpx.Client, data: dict, path: str = "/get_reward") -> httpx.Response:
    """As ``openrlhf/utils/remote_rm_utils.py: request_api_wrapper`` posts (one attempt)."""
    return client.post(path, json=data, headers={"Content-Type": "application/json"})


def is_numeric_vector(values: object, n: int) -> bool:
    """What ``torch.as_tensor(values)`` in OpenRLHF's experience maker needs."""
    return (isinstance(values, list) and len(values) == n
            and all(isinstance(v, int | float) and math.isfinite(v) for v in values))


def test_openrlhf_chat_templated_queries_with_special_tokens(client: httpx.Client) -> None:
    prompts = [QWEN_PROMPT] * 4 + [LLAMA3_PROMPT] * 2
    responses = [
        "3 + 4 = 7. The answer is \\boxed{7}.<|im_end|>",
        "3 + 4 = 8, so \\boxed{8}<|im_end|>\n<|endoftext|><|endoftext|>",  # wrong; right-padded
        "I am not sure.<|im_end|>",  # nothing to extract
        "The answer is \\boxed{7}",  # cut at max length: no end token
        "1/2 = 0.5, so \\boxed{\\frac{1}{2}}<|eot_id|>",
        "It is \\boxed{0.5}<|eot_id|>",
    ]
    queries = [p + r for p, r in zip(prompts, responses, strict=True)]
    queries[1] = "<|endoftext|>" * 5 + queries[1]  # older OpenRLHF: left padding decoded too
    labels = ["7", "7", "7", "7", "0.5", "\\frac{1}{2}"]
    r = openrlhf_post(client, {"query": queries, "prompts": prompts, "labels": labels})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    assert body["scores"] == body["rewards"]
    assert [x["status"] for x in body["results"]] == [
        "correct", "incorrect", "no_answer", "correct", "correct", "correct"]
    assert set(body["extra_logs"]) == {"acc", "no_answer", "bad_ground_truth", "timeout", "error",
                                       "prompt_not_found", *RULE_KEYS}
    for values in (body["rewards"], body["scores"], *body["extra_logs"].values()):
        assert is_numeric_vector(values, len(queries))
    assert body["extra_logs"]["no_answer"] == [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]


def test_openrlhf_item_without_a_locatable_prompt_is_scored_and_says_how(
        client: httpx.Client) -> None:
    queries = [QWEN_PROMPT + "\\boxed{7}<|im_end|>", "free text with \\boxed{7} and no template"]
    r = openrlhf_post(client, {"query": queries, "prompts": [QWEN_PROMPT, "another prompt"],
                               "labels": ["7", "7"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [1.0, 1.0]
    assert body["extra_logs"]["prompt_not_found"] == [0.0, 1.0]
    assert body["results"][0]["reason"] is None
    assert "whole query was scored" in body["results"][1]["reason"]


def test_openrlhf_0_11_one_sample_with_a_prompt_cut_from_the_left_gets_its_reward(
        svc, client: httpx.Client) -> None:  # type: ignore[no-untyped-def]
    """The issue's reproduction: one query per request (OpenRLHF >= 0.9.1), the plain prompt
    cut from the left to fit max_len. It was a whole-request 422, i.e. a None reward."""
    data = {"query": ["context. What is 6*7?\nAnswer: The answer is 42.<|im_end|>"],
            "prompts": ["Question: Some context. Some context. What is 6*7?\nAnswer: "],
            "labels": ["42"]}
    r = openrlhf_post(client, data)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [1.0]
    assert "prompt was cut from the left" in body["results"][0]["reason"]
    metrics = client.get("/metrics").text
    assert re.search(r'reward_compat_located_total\{how="prompt_suffix"\} [1-9]', metrics)


def test_openrlhf_without_label_key_is_refused_visibly(svc, client: httpx.Client) -> None:  # type: ignore[no-untyped-def]
    """OpenRLHF without --label_key sends "" as every label: a 422 naming the flag, a WARNING
    in the service's log with the reason, and a metric by reason (OpenRLHF itself logs the
    failure at INFO without the body)."""
    data = {"query": [QWEN_PROMPT + "\\boxed{7}<|im_end|>"], "prompts": [QWEN_PROMPT],
            "labels": [""]}
    r = openrlhf_post(client, data)
    assert r.status_code == 422
    [error] = r.json()["detail"]  # every 422 answers a list of {loc, msg, type}
    assert "--label_key" in error["msg"] and error["type"] == "labels_empty"
    assert wait_until(lambda: "framework request refused" in svc.log()
                      and "labels_empty" in svc.log(),
                      timeout_s=30)
    line = next(x for x in svc.log().splitlines() if "framework request refused" in x)
    assert "WARNING" in line and "labels_empty" in line, line
    metrics = client.get("/metrics").text
    assert re.search(r'reward_compat_rejected_total\{reason="labels_empty",route="get_reward"\}'
                     r' [1-9]', metrics), [m for m in metrics.splitlines() if "compat" in m]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"query": ["x"], "prompts": ["x"]}, "'labels' is missing"),
        ({"query": ["a", "b"], "prompts": ["a", "b"], "labels": ["1"]}, "'labels' has 1 entries"),
        ({"query": ["a"], "prompts": ["a", "b"], "labels": ["1"]}, "'prompts' has 2 entries"),
        ({"query": ["a<|im_end|>"], "prompts": ["a"], "labels": [""]}, "every label is empty"),
        ({"query": "not a list", "labels": ["1"]}, "list"),
    ],
)
def test_openrlhf_malformed_requests_are_422_with_a_reason(
        client: httpx.Client, data: dict, match: str) -> None:
    r = openrlhf_post(client, data)
    assert r.status_code == 422, r.text

    assert re.search(match, str(r.json()["detail"])), r.text


def test_openrlhf_options_in_the_url(client: httpx.Client) -> None:
    data = {"query": [QWEN_PROMPT + "3+4 makes 7 apples<|im_end|>"], "prompts": [QWEN_PROMPT],
            "labels": ["7"]}
    r = openrlhf_post(client, data, "/get_reward?scorer=gsm8k&timeout_s=10")
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["scorer"] == "gsm8k" and r.json()["rewards"] == [1.0]
    r = openrlhf_post(client, data, "/get_reward?data_source=openai/gsm8k")
    assert r.json()["results"][0]["scorer"] == "gsm8k"
    assert openrlhf_post(client, data, "/get_reward?scorer=nope").status_code == 422
    r = openrlhf_post(client, data, "/get_reward?timeout_s=-1")
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "timeout_s"]
    r = openrlhf_post(client, data, "/get_reward?scorer=" + "x" * 65)  # not echoed whole
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "scorer"]
    assert openrlhf_post(client, data, "/get_reward?timeout_s=100000").status_code == 422


def test_openrlhf_legacy_request_without_prompts(client: httpx.Client) -> None:
    r = openrlhf_post(client, {"query": [LLAMA3_PROMPT + "\\boxed{0.5}<|eot_id|>"],
                               "labels": ["1/2"]})
    assert r.status_code == 200 and r.json()["rewards"] == [1.0], r.text


def test_openrlhf_empty_batch(client: httpx.Client) -> None:
    r = openrlhf_post(client, {"query": [], "prompts": [], "labels": []})
    assert r.status_code == 200 and r.json()["rewards"] == []


def test_slime_bare_reward_and_status_header(client: httpx.Client) -> None:
    # as slime/rollout/rm_hub/__init__.py: remote_rm posts this and returns `await resp.json()`
    payload = {"prompt": QWEN_PROMPT, "response": "So \\boxed{7}.", "label": "7"}
    r = client.post("/slime/reward", json=payload)
    assert r.status_code == 200, r.text
    assert r.json() == 1.0 and r.headers["x-reward-status"] == "correct"
    r = client.post("/slime/reward", json={**payload, "response": "no idea<|im_end|>"})
    assert r.json() == 0.0 and r.headers["x-reward-status"] == "no_answer"
    # int labels and chat-message prompts are what slime datasets carry
    r = client.post("/slime/reward", json={"prompt": [{"role": "user", "content": "3+4?"}],
                                           "response": "#### 7", "label": 7})
    assert r.json() == 1.0


def test_slime_details_for_reward_key(client: httpx.Client) -> None:
    r = client.post("/slime/reward?details=true&scorer=gsm8k",
                    json={"prompt": "p", "response": "3 + 4 = 7\n#### 7", "label": "7"})
    assert r.status_code == 200, r.text
    assert r.json() == {"score": 1.0, "acc": 1.0, "pred": "7", "status": "correct", "reason": None}


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"prompt": "p", "response": "x"}, "--label-key"),
        ({"prompt": "p", "response": "x", "label": None}, "--label-key"),
        ({"prompt": "p", "label": "1"}, "response"),
        ({"prompt": "p", "response": "x", "label": {"a": 1}}, "label is a dict"),
    ],
)
def test_slime_malformed_is_422(client: httpx.Client, payload: dict, match: str) -> None:
    r = client.post("/slime/reward", json=payload)
    assert r.status_code == 422, r.text
    assert match in str(r.json()["detail"])


def test_limits_and_auth_are_the_same_as_v1_score() -> None:
    with service(REWARD_API_TOKEN="s3cret", REWARD_MAX_ITEMS="4",
                 REWARD_MAX_RESPONSE_CHARS="200", REWARD_WORKERS="1", REWARD_SPARES="0") as svc:
        good = {"query": ["a\\boxed{1}"], "prompts": ["a"], "labels": ["1"]}
        slime = {"prompt": "p", "response": "\\boxed{1}", "label": "1"}
        with httpx.Client(base_url=svc.url, timeout=60) as c:
            assert c.post("/get_reward", json=good).status_code == 401
            assert c.post("/slime/reward", json=slime).status_code == 401
            c.headers["Authorization"] = "Bearer s3cret"
            assert c.post("/get_reward", json=good).json()["rewards"] == [1.0]
            assert c.post("/slime/reward", json=slime).json() == 1.0
            five = {k: v * 5 for k, v in good.items()}
            r = c.post("/get_reward", json=five)
            assert r.status_code == 413 and "at most 4" in r.text
            long = {"query": ["a" + "x" * 300], "prompts": ["a"], "labels": ["1"]}
            r = c.post("/get_reward", json=long)
            assert r.status_code == 413 and "query[0]" in r.text
            r = c.post("/slime/reward", json={**slime, "response": "x" * 300})
            assert r.status_code == 413


HANG = "\\boxed{\\frac{10^{1300000}}{7^{1300000}}}"  # seconds inside C; killed at the deadline


def test_overload_is_503_with_retry_after_on_every_protocol() -> None:
    with service(REWARD_MAX_QUEUE_ITEMS="2", REWARD_MAX_ITEMS="2", REWARD_WORKERS="1",
                 REWARD_SPARES="0") as svc:
        reply: dict[str, httpx.Response] = {}

        def hold() -> None:  # two hanging items fill the queue until their deadline
            items = [{"response": HANG, "ground_truth": g} for g in ("1", "2")]  # not deduped
            with httpx.Client(timeout=60) as c:
                reply["r"] = c.post(svc.url + "/v1/score",
                                    json={"items": items, "timeout_s": 4})

        t = threading.Thread(target=hold)
        t.start()
        assert wait_until(lambda: httpx.get(svc.url + "/v1/info", timeout=5).json()
                          ["workers"]["outstanding_items"] >= 2, 30.0)
        with httpx.Client(base_url=svc.url, timeout=30) as c:
            r1 = c.post("/get_reward", json={"query": ["q\\boxed{1}"], "prompts": ["q"],
                                             "labels": ["1"]})
            r2 = c.post("/slime/reward", json={"response": "\\boxed{1}", "label": "1"})
        t.join(timeout=60)
    for r in (r1, r2):
        assert r.status_code == 503, r.text
        assert int(r.headers["retry-after"]) >= 1
    assert [x["status"] for x in reply["r"].json()["results"]] == ["timeout", "timeout"]


def test_routes_are_documented_in_openapi(client: httpx.Client) -> None:
    r = client.get("/openapi.json")
    assert r.status_code == 200
    paths = r.json()["paths"]
    assert "/get_reward" in paths and "/slime/reward" in paths
    params = {p["name"] for p in paths["/get_reward"]["post"]["parameters"]}
    assert params == {"scorer", "data_source", "timeout_s"}


@pytest.mark.parametrize("route", ["/get_reward", "/slime/reward"])
def test_a_response_of_many_end_tokens_does_not_stall_the_server(svc, route: str) -> None:  # type: ignore[no-untyped-def]
    """``"\\boxed{5}" + "</s>" * 480000`` (1.9 MB) took the token-at-a-time stripping 15.6 s on
    the event loop: /healthz (and the deadline watchdog) waited that long. Stripping is one
    linear pass now; /healthz keeps answering while such requests are processed."""
    import time

    tail = "</s>" * 480_000
    if route == "/get_reward":
        body: dict = {"query": [QWEN_PROMPT + "\\boxed{5}" + tail], "prompts": [QWEN_PROMPT],
                      "labels": ["5"]}
    else:
        body = {"prompt": "p", "response": "\\boxed{5}" + tail, "label": "5"}
    replies: list[httpx.Response] = []

    def send() -> None:
        with httpx.Client(base_url=svc.url, timeout=120.0) as c:
            for _ in range(2):
                replies.append(c.post(route, json=body))

    worker = threading.Thread(target=send)
    slowest = 0.0
    with httpx.Client(base_url=svc.url, timeout=60.0) as probe:
        probe.get("/healthz")  # connection up before the load starts
        worker.start()
        while worker.is_alive():
            t0 = time.perf_counter()
            assert probe.get("/healthz").status_code == 200
            slowest = max(slowest, time.perf_counter() - t0)
    worker.join()
    assert [r.status_code for r in replies] == [200, 200], replies[0].text[:300]
    rewards = [r.json()["rewards"][0] if route == "/get_reward" else r.json() for r in replies]
    assert rewards == [1.0, 1.0]
    assert slowest < 3.0, f"/healthz took {slowest:.1f} s while the requests were processed"


@pytest.mark.parametrize("route", ["/get_reward", "/slime/reward"])
@pytest.mark.parametrize(("raw", "reason"), [
    (b"[" * 2000 + b"]" * 2000, "nested too deeply"),
    (b'{"query": ["\xff"], "labels": ["1"]}', "not valid UTF-8"),
])
def test_compat_routes_name_why_a_body_cannot_be_parsed(client: httpx.Client, route: str,
                                                       raw: bytes, reason: str) -> None:
    """A 2,000-deep array was answered "not valid UTF-8": the parser's reason is given now."""
    r = client.post(route, content=raw, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text[:300]
    assert reason in r.text, r.text[:300]
