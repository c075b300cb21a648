"""Per-sample callers against batched ones, in one run (``make bench``, or alone:
``python -m bench.per_sample [--rows N]``, which prints JSON).

Each pass gets a freshly started service (2 workers, verdict cache off, warmed like the others
in ``bench/__main__.py``) and scores the same corpus rows:

* ``batched``: ``RewardClient.score`` of all rows (512-item requests, 4 in flight): the
  baseline every ratio is taken against;
* ``raw_per_request``: OpenRLHF ≥ 0.9.1's pattern: 256 concurrent callers, each posting one
  sample to ``/get_reward`` on a new aiohttp session (OpenRLHF's own client library), one
  after another;
* ``coalesced_async``: 256 concurrent ``compute_score_async`` calls (the verl adapter, as
  verl's reward loop awaits it), which :class:`AsyncRewardClient` packs into shared requests;
* ``sync_threads``: the sync ``compute_score`` from verl's executor (``run_in_executor``: 6
  threads here), one request per sample.

Every figure is items/s; ratios are against ``batched`` of the same run. Targets (issue 14):
coalesced ≥ 0.6x batched, raw per-request ≥ 0.4x, the async adapter never slower than sync.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.helpers import Service, read_jsonl
from trainer_client.integrations import _common, verl
from trainer_client.reward_client import RewardClient, RewardClientSettings, Timeout

CALLERS = 256


def _svc() -> Service:
    return Service(REWARD_WORKERS=2, REWARD_SPARES=1, REWARD_CACHE_ITEMS=0,
                   REWARD_MAX_ITEMS=16384, REWARD_LOG_LEVEL="warning")


def _warm(svc: Service, warm: list[dict[str, str]]) -> None:
    settings = RewardClientSettings(urls=(svc.url,), chunk_size=512, timeout=Timeout(read=600))
    with RewardClient(settings) as client:
        client.score([{"response": r["response"], "ground_truth": r["gold"],
                       "scorer": "math_verify"} for r in warm])


def batched(url: str, rows: list[dict[str, Any]]) -> float:
    settings = RewardClientSettings(urls=(url,), chunk_size=512, max_concurrency=4,
                                    timeout=Timeout(read=600))
    items = [{"response": r["response"], "ground_truth": r["gold"], "scorer": "math_verify"}
             for r in rows]
    with RewardClient(settings) as client:
        t0 = time.perf_counter()
        client.score(items)
        return len(rows) / (time.perf_counter() - t0)


async def _callers(rows: list[dict[str, Any]], one: Any) -> float:
    queue = iter(range(len(rows)))

    async def caller() -> None:
        for i in queue:
            await one(rows[i])

    t0 = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(CALLERS)))
    return len(rows) / (time.perf_counter() - t0)


def raw_per_request(url: str, rows: list[dict[str, Any]]) -> float:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=180)

    async def one(row: dict[str, Any]) -> None:  # openrlhf/utils/agent.py, one try
        data = {"query": ["Q: ?\n" + row["response"]], "prompts": ["Q: ?\n"],
                "labels": [row["gold"]]}
        async with aiohttp.ClientSession(timeout=timeout) as session, \
                session.post(f"{url}/get_reward?scorer=math_verify", json=data) as response:
            response.raise_for_status()
            await response.json()

    return asyncio.run(_callers(rows, one))


def coalesced_async(url: str, rows: list[dict[str, Any]]) -> float:
    async def one(row: dict[str, Any]) -> None:
        await verl.compute_score_async(data_source="lighteval/MATH", solution_str=row["response"],
                                       ground_truth=row["gold"], url=url, scorer="math_verify")

    async def run() -> float:
        try:
            return await _callers(rows, one)
        finally:
            await _common.aclose_clients()

    return asyncio.run(run())


def sync_threads(url: str, rows: list[dict[str, Any]]) -> float:
    def one(row: dict[str, Any]) -> None:
        verl.compute_score(data_source="lighteval/MATH", solution_str=row["response"],
                           ground_truth=row["gold"], url=url, scorer="math_verify")

    threads = min(32, (os.cpu_count() or 1) + 4)  # asyncio's default executor, as verl uses it
    with ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        list(pool.map(one, rows))
        rate = len(rows) / (time.perf_counter() - t0)
    _common.close_clients()
    return rate


PASSES = {"batched": batched, "raw_per_request": raw_per_request,
          "coalesced_async": coalesced_async, "sync_threads": sync_threads}


def run(rows: list[dict[str, Any]], warm: list[dict[str, str]]) -> dict[str, Any]:
    """Every pass on a fresh service; ``batched`` first and last (this VM drifts)."""
    rates: dict[str, float] = {}
    for name in ["batched", "raw_per_request", "coalesced_async", "sync_threads", "batched"]:
        with _svc() as svc:
            _warm(svc, warm)
            rate = PASSES[name](svc.url, rows)
        rates[name] = max(rates.get(name, 0.0), rate)
        print(f"per-sample bench: {name} {rate:.0f} items/s", file=sys.stderr, flush=True)
    base = rates["batched"]
    return {"rows": len(rows), "callers": CALLERS, "items_s": rates,
            "ratio_to_batched": {k: v / base for k, v in rates.items() if k != "batched"},
            "targets": {"coalesced_async": 0.6, "raw_per_request": 0.4}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2048)
    args = ap.parse_args()
    rows = read_jsonl("corpus.jsonl")[:args.rows]
    warm = [{"response": r["solution"][0] if isinstance(r["solution"], list) else r["solution"],
             "gold": r["final_answer"][0].strip("$")}
            for r in read_jsonl("qwen25math_olympiadbench_test.jsonl")]
    print(json.dumps(run(rows, warm), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
