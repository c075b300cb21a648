"""Our service on each peer's contract: a fresh service (2 workers, verdict cache off) per
pass, first warmed as every bench pass is (``bench/base.warm_rows``), then the pass's rows:

* NeMo-Gym's: ``POST /verify``, one request per item, all at once (``verify_driver``), our
  route's default scorer ``math_verify`` (the library NeMo-Gym's server runs);
* verifiers': ``AsyncRewardClient`` as an environment scores rollouts, one ``score([item])``
  per rollout, all awaited together (the client coalesces concurrent calls into shared
  requests, ``coalesce_window_s``), scorer ``math_verify``.

Each item's time runs from its call to its answer; a pass is cut at ``cap_s``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from bench import scenarios as sc
from bench.base import plain_service
from bench.peers import verify_driver
from bench.peers.capped import capped_pass
from bench.peers.items import Answer, Pass, Row
from trainer_client.errors import RewardClientError
from trainer_client.reward_client import AsyncRewardClient, ScoreResult

SCORER = "math_verify"
WORKERS = 2


def _answer(r: ScoreResult) -> Answer:
    if r.status in ("timeout", "error"):
        return Answer(r.status, detail=r.reason)  # type: ignore[arg-type]
    return Answer("verdict", correct=r.status == "correct", extracted=r.extracted,
                  detail=r.status)


def verify_pass(rows: Sequence[Row], warm: Sequence[Row], cap_s: float) -> Pass:
    """NeMo-Gym's contract on a fresh service."""
    with plain_service(WORKERS) as svc:
        sc.service_throughput(svc, warm, 512, timeout_s=10.0, scorer=SCORER)
        return verify_driver.drive(svc.url, rows, verify_driver.ours_classify, cap_s)


async def _client_pass(url: str, rows: Sequence[Row], cap_s: float) -> Pass:
    async with AsyncRewardClient(url) as client:
        await client.score([{"response": "\\boxed{1}", "ground_truth": "1", "scorer": SCORER}])

        async def one(i: int) -> Answer:
            try:
                (r,) = await client.score([{"response": rows[i]["response"],
                                            "ground_truth": rows[i]["gold"], "scorer": SCORER}])
            except RewardClientError as e:
                return Answer("error", detail=f"{type(e).__name__}: {e}"[:200])
            return _answer(r)

        return await capped_pass(len(rows), one, cap_s)


def client_pass(rows: Sequence[Row], warm: Sequence[Row], cap_s: float) -> Pass:
    """verifiers' contract (an async scoring call per rollout) on a fresh service."""
    with plain_service(WORKERS) as svc:
        sc.service_throughput(svc, warm, 512, timeout_s=10.0, scorer=SCORER)
        return asyncio.run(_client_pass(svc.url, rows, cap_s))
