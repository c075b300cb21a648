"""A bounded load generator for the reliability suite: N async clients on loopback.

Every request carries unique item ids; the generator checks each 200 answers every id of its
request exactly once and in order, and each 503 carries Retry-After. It samples the server's
RSS, open files and threads once a second.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class LoadStats:
    sent_ids: set[str] = field(default_factory=set)  # ids of requests answered 200
    answered: Counter[str] = field(default_factory=Counter)
    codes: Counter[int] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    latencies_ms: list[float] = field(default_factory=list)
    samples: list[dict[str, float]] = field(default_factory=list)
    transport_errors: int = 0
    bad: list[str] = field(default_factory=list)  # contract violations seen

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies_ms) or [0.0]
        q = statistics.quantiles(lat, n=100) if len(lat) > 1 else [lat[0]] * 99
        first, last = (self.samples[0], self.samples[-1]) if self.samples else ({}, {})
        return {
            "requests": sum(self.codes.values()),
            "codes": dict(self.codes),
            "items_answered": sum(self.answered.values()),
            "items_lost": len(self.sent_ids - set(self.answered)),
            "items_duplicated": sum(1 for c in self.answered.values() if c > 1),
            "statuses": dict(self.statuses),
            "p50_ms": q[49],
            "p99_ms": q[98],
            "server_rss_mb": (first.get("rss_mb"), last.get("rss_mb")),
            "server_fds": (first.get("fds"), last.get("fds")),
            "server_threads": (first.get("threads"), last.get("threads")),
            "transport_errors": self.transport_errors,
            "violations": self.bad[:10],
        }


def proc_sample(pid: int) -> dict[str, float]:
    page = os.sysconf("SC_PAGE_SIZE")
    with open(f"/proc/{pid}/statm") as fh:
        rss = int(fh.read().split()[1]) * page / 2**20
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    return {"rss_mb": rss, "fds": fds, "threads": threads}


ItemMaker = Callable[[random.Random, str], dict[str, Any]]


def simple_item(rnd: random.Random, item_id: str) -> dict[str, Any]:
    k = rnd.randrange(10**6)
    right = rnd.random() < 0.7
    return {"id": item_id, "ground_truth": str(k),
            "response": f"... so the answer is $\\boxed{{{k if right else k + 1}}}$ ({item_id})"}


async def _client(url: str, k: int, until: float, per_request: int, make: ItemMaker,
                  stats: LoadStats, timeout_s: float) -> None:
    rnd = random.Random(k)
    seq = 0
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:
        while time.monotonic() < until:
            items = [make(rnd, f"c{k}-r{seq}-i{i}") for i in range(per_request)]
            seq += 1
            t0 = time.perf_counter()
            try:
                r = await c.post("/v1/score", json={"items": items, "timeout_s": timeout_s})
            except httpx.TransportError:
                stats.transport_errors += 1
                await asyncio.sleep(0.1)
                continue
            stats.latencies_ms.append((time.perf_counter() - t0) * 1000)
            stats.codes[r.status_code] += 1
            if r.status_code == 200:
                ids = [x["id"] for x in items]
                got = [x["id"] for x in r.json()["results"]]
                if got != ids:
                    stats.bad.append(f"ids out of order or missing in {ids[0]}")
                stats.sent_ids.update(ids)
                for x in r.json()["results"]:
                    stats.answered[x["id"]] += 1
                    stats.statuses[x["status"]] += 1
            elif r.status_code == 503:
                if "retry-after" not in r.headers:
                    stats.bad.append("503 without Retry-After")
                await asyncio.sleep(0.05)
            else:
                stats.bad.append(f"HTTP {r.status_code}: {r.text[:200]}")


async def _sampler(pid: int, until: float, stats: LoadStats) -> None:
    while time.monotonic() < until:
        try:
            stats.samples.append(proc_sample(pid))
        except OSError:
            return
        await asyncio.sleep(1.0)


def run_load(url: str, server_pid: int, *, clients: int, seconds: float, per_request: int = 16,
             make: ItemMaker = simple_item, timeout_s: float = 5.0,
             during: Callable[[], Any] | None = None) -> LoadStats:
    """Drive the service for ``seconds``; ``during`` (sync, run in a thread) injects faults."""
    stats = LoadStats()

    async def main() -> None:
        until = time.monotonic() + seconds
        tasks = [asyncio.create_task(_client(url, k, until, per_request, make, stats, timeout_s))
                 for k in range(clients)]
        tasks.append(asyncio.create_task(_sampler(server_pid, until, stats)))
        if during is not None:
            tasks.append(asyncio.create_task(asyncio.to_thread(during)))
        await asyncio.gather(*tasks)

    asyncio.run(main())
    return stats
