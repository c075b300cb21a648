"""NeMo-Gym's math resource server contract (``POST /verify``) against the real service.

A replay: NeMo-Gym's wheel needs Python >= 3.12 (this project runs 3.11), so the request is
built as its agents build it, from NeMo-Gym 0.4.0's source: the task row of
``resources_servers/math_with_judge/data/example.jsonl`` (``responses_create_params``,
``question``, ``expected_answer``) plus ``response``, an OpenAI Responses-API object shaped as
``math_with_judge/tests/test_app.py: _create_response`` builds it. The reply must be what
``LibraryJudgeMathVerifyResponse`` holds: the request echoed, ``reward``,
``extracted_answer``, ``library_reward``, ``judge_evaluations``.
"""

from __future__ import annotations

import json

import httpx
import pytest

QUESTION = "What is 1/2 + 1/4?"


def verify_body(*texts: str, expected: str = "\\frac{3}{4}") -> dict:
    content = [{"type": "output_text", "text": t, "annotations": []} for t in texts]
    return {
        "responses_create_params": {"input": [{"role": "user", "content": QUESTION}]},
        "question": QUESTION,
        "expected_answer": expected,
        "agent_ref": {"name": "math_simple_agent"},  # another field of the row: echoed back
        "response": {
            "id": "resp_1", "created_at": 1234.5, "model": "policy", "object": "response",
            "output": [
                {"id": "rs_1", "type": "reasoning", "summary": [
                    {"type": "summary_text", "text": "maybe \\boxed{7}"}]},  # not scored
                {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                 "content": content},
            ],
            "parallel_tool_calls": False, "tool_choice": "none", "tools": [],
        },
    }


@pytest.mark.parametrize(("texts", "reward"), [
    (("1/2 + 1/4 = ", "\\boxed{\\frac{3}{4}}"), 1.0),  # output_text parts are joined
    (("It is \\boxed{0.75}",), 1.0),
    (("It is \\boxed{1}",), 0.0),
])
def test_verify_scores_the_message_text_and_echoes_the_request(
        client: httpx.Client, texts: tuple[str, ...], reward: float) -> None:
    body = verify_body(*texts)
    r = client.post("/verify", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["reward"] == out["library_reward"] == reward
    assert out["judge_evaluations"] is None
    assert out["status"] == ("correct" if reward else "incorrect")
    for key in ("responses_create_params", "question", "expected_answer", "agent_ref"):
        assert out[key] == body[key]
    assert out["response"]["output"] == body["response"]["output"]


def test_seed_session_and_a_malformed_response(client: httpx.Client) -> None:
    assert client.post("/seed_session", json={}).json() == {}
    body = verify_body("x")
    body["response"]["output"] = "not a list"
    r = client.post("/verify", json=body)
    assert r.status_code == 422 and "output" in r.text
    body["response"] = {}  # no output at all
    assert client.post("/verify", json=body).status_code == 422
    del body["expected_answer"]
    assert client.post("/verify", json=body).status_code == 422


def test_odd_values_in_echoed_fields_are_echoed_not_a_500(client: httpx.Client) -> None:
    body = verify_body("It is \\boxed{0.75}")
    body["note"] = "\ud800"  # a lone surrogate: valid JSON, not Unicode text
    body["response"]["output"].append({"type": "message", "content": 5})  # no content list
    r = client.post("/verify", content=json.dumps(body),  # ASCII-escaped, as JSON allows
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["note"] == "\ud800" and r.json()["reward"] == 1.0
