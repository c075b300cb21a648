"""One ``POST /verify`` per item, all dispatched at once, the way NeMo-Gym's rollout collection
sends them: its ``ServerClient`` (aiohttp, keep-alive, at most 1,024 connections per host:
``global_aiohttp_connector_limit_per_host`` in ``nemo_gym/server_utils.py``) and no bound of
its own unless the user sets one (``num_samples_in_parallel: Optional[int] = None`` in
``nemo_gym/rollout_collection.py``; with None no semaphore is made). The same driver sends the
same bodies to NeMo-Gym's server and to ours.

Each item's time runs from its dispatch to its reply; a pass is cut at ``cap_s`` of wall time
and every item still waiting then is ``unanswered`` (a hang is a figure, not a stuck bench).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp
import orjson

from bench.peers.capped import capped_pass
from bench.peers.items import Answer, Pass, Row

#: NeMo-Gym's per-host connection budget (``GlobalAIOHTTPAsyncClientConfig``).
NEMO_GYM_PER_HOST = 1024


def verify_body(row: Row) -> bytes:
    """The body NeMo-Gym's simple agent posts to ``/verify`` (``body.model_dump() |
    {"response": model_response_json}``): the task row (``responses_create_params``,
    ``question``, ``expected_answer``) and the model's Responses-API object with the answer as
    one ``output_text`` part of one assistant message."""
    return orjson.dumps({
        "responses_create_params": {"input": [{"role": "user", "content": "Solve the problem."}]},
        "question": "Solve the problem.",
        "expected_answer": row["gold"],
        "response": {
            "id": "resp", "created_at": 0, "model": "policy", "object": "response",
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
            "output": [{"type": "message", "id": "msg", "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": row["response"],
                                     "annotations": []}]}]}})


Classify = Callable[[int, dict[str, Any] | None, str], Answer]


async def _drive(url: str, bodies: Sequence[bytes], classify: Classify, cap_s: float,
                 limit_per_host: int) -> Pass:
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=limit_per_host)
    timeout = aiohttp.ClientTimeout(total=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(i: int) -> Answer:
            try:
                async with session.post(url + "/verify", data=bodies[i],
                                        headers={"content-type": "application/json"}) as resp:
                    raw = await resp.read()
                    payload = orjson.loads(raw) if resp.status == 200 else None
                    return classify(resp.status, payload, raw[:300].decode(errors="replace"))
            except (aiohttp.ClientError, orjson.JSONDecodeError, OSError) as e:
                return Answer("error", detail=f"{type(e).__name__}: {e}"[:200])

        return await capped_pass(len(bodies), one, cap_s)


def drive(url: str, rows: Sequence[Row], classify: Classify, cap_s: float,
          limit_per_host: int = NEMO_GYM_PER_HOST) -> Pass:
    """Every row as its own ``POST url/verify``, all at once; ``classify(status, json or None,
    first bytes of the body)`` turns each reply into an :class:`Answer`."""
    bodies = [verify_body(r) for r in rows]
    return asyncio.run(_drive(url, bodies, classify, cap_s, limit_per_host))


def ours_classify(status: int, payload: dict[str, Any] | None, text: str) -> Answer:
    """Our ``/verify``: the per-item ``status`` says timeout and error apart from verdicts."""
    if payload is None:
        return Answer("error", detail=f"HTTP {status}: {text}")
    st = payload.get("status")
    if st == "timeout":
        return Answer("timeout", detail=payload.get("reason"))
    if st == "error":
        return Answer("error", detail=payload.get("reason"))
    return Answer("verdict", correct=payload.get("reward") == 1.0,
                  extracted=payload.get("extracted_answer"), detail=st)
