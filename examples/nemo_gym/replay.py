"""Verify rollouts exactly as NeMo-Gym's math environment does, against a running service.

    $ REWARD_SERVICE_URL=http://127.0.0.1:8000 python examples/nemo_gym/replay.py

NeMo-Gym's agents post the task row plus the model's Responses-API ``response`` to the
resources server's ``/verify`` (``resources_servers/math_with_judge/app.py``) and read
``reward`` from the reply, which echoes the request. Point the math environment's resources
server at the service's address to use it instead of ``math_with_judge``.
"""

from __future__ import annotations

import os

import httpx

url = os.environ.get("REWARD_SERVICE_URL", "http://127.0.0.1:8000").split(",")[0]
rows = [("What is 6*7?", "42", "6*7 = \\boxed{42}"), ("What is 6*7?", "42", "\\boxed{41}"),
        ("Half of 1?", "\\frac{1}{2}", "It is \\boxed{0.5}")]


def verify_request(question: str, expected: str, text: str) -> dict:
    return {
        "responses_create_params": {"input": [{"role": "user", "content": question}]},
        "question": question, "expected_answer": expected,
        "response": {"id": "resp", "created_at": 0.0, "model": "policy", "object": "response",
                     "output": [{"id": "msg", "type": "message", "role": "assistant",
                                 "status": "completed",
                                 "content": [{"type": "output_text", "text": text,
                                              "annotations": []}]}],
                     "parallel_tool_calls": False, "tool_choice": "none", "tools": []},
    }


with httpx.Client(timeout=120) as client:
    rewards = []
    for row in rows:
        r = client.post(f"{url}/verify", json=verify_request(*row))
        r.raise_for_status()
        rewards.append(r.json()["reward"])
print("rewards:", rewards)
assert rewards == [1.0, 0.0, 1.0]
