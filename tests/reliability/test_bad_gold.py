"""Issue 27, item 6: one gold that cannot be parsed in time costs one deadline per worker, not
one per item, and the items come back ``bad_ground_truth`` naming the gold, not ``timeout``
blaming each response.

A live service (2 workers), a request of a GRPO group whose 8 samples share the gold
``2^{2^{2^{2^{20}}}}`` (the library evaluates the power while parsing it) plus one clean item,
``timeout_s`` 1. The defence: the worker's ``phase`` frames and the scheduler's memory of such
golds (``server/pool/bad_golds.py``). The control turns the memory off
(``REWARD_BAD_GOLD_MEMORY_S=0``): every sample of the group pays its own deadline (each is
still ``bad_ground_truth``: the worker said it was parsing the gold when it was stopped).
Counted, not timed: the workers killed for a deadline (``reward_worker_restarts_total``).
"""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import Service

BAD_GOLD = "2^{2^{2^{2^{20}}}}"
GROUP = [{"response": f"So the answer is \\boxed{{{i}}}.", "ground_truth": BAD_GOLD}
         for i in range(8)]  # the default profile, math
CLEAN = {"response": "The answer is \\boxed{7}.", "ground_truth": "7"}


def _timeout_kills(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith('reward_worker_restarts_total{reason="timeout"}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _score(svc: Service) -> tuple[list[dict], float]:
    with httpx.Client(base_url=svc.url, timeout=120) as client:
        before = _timeout_kills(client)
        r = client.post("/v1/score", json={"items": [*GROUP, CLEAN], "timeout_s": 1})
        assert r.status_code == 200, r.text
        return r.json()["results"], _timeout_kills(client) - before


@pytest.mark.parametrize("memory_s", [600, 0], ids=["defended", "control"])
def test_a_gold_too_slow_to_parse_costs_one_deadline_per_worker(memory_s: int) -> None:
    with Service(REWARD_BAD_GOLD_MEMORY_S=memory_s, REWARD_SPARES=2) as svc:
        results, kills = _score(svc)
        group, clean = results[:-1], results[-1]
        assert clean["status"] == "correct", clean  # the neighbour is unaffected
        if memory_s:
            assert {r["status"] for r in group} == {"bad_ground_truth"}, group
            assert all("could not be parsed" in r["reason"] for r in group), group
            assert kills <= 2, kills  # one deadline per worker at most (2 workers)
            # a later request with that gold is answered without reaching a worker
            again, kills_again = _score(svc)
            assert {r["status"] for r in again[:-1]} == {"bad_ground_truth"}
            assert kills_again == 0
        else:  # each item is still blamed on its gold, but each paid its own deadline
            assert {r["status"] for r in group} == {"bad_ground_truth"}, group
            assert kills == len(GROUP), kills
