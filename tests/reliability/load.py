"""A bounded load generator for the reliability suite: N async clients on loopback.

Every request carries unique item ids; the generator checks each 200 answers every id of its
request exactly once and in order, and each 503 carries Retry-After. It samples the server's
RSS, open files and threads once a second.

``run_until_gone`` drives the service while it is being stopped: each client records every
attempt (when it started and ended, and how: a full answer, a refused connection, no answer at
all, or a body cut short) and stops once the server refuses connections.
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
import orjson


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

    def check_ok(self, items: list[dict[str, Any]], payload: Any) -> None:
        """Book a 200 answer to ``items``: every id exactly once, in order."""
        ids = [x["id"] for x in items]
        results = payload.get("results") if isinstance(payload, dict) else None
        if not isinstance(results, list):
            self.bad.append(f"200 without results for {ids[0]}")
            return
        got = [x.get("id") for x in results]
        if got != ids:
            self.bad.append(f"ids out of order or missing in {ids[0]}")
        self.sent_ids.update(ids)
        for x in results:
            self.answered[x.get("id")] += 1
            self.statuses[x.get("status")] += 1

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
                stats.check_ok(items, r.json())
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


# --- a run across the server's shutdown ------------------------------------------------------

@dataclass
class Attempt:
    """One request of ``run_until_gone``: monotonic start and end, and how it ended."""

    t0: float
    t1: float
    outcome: str  # "200", "503", "HTTP <code>", "refused", "unanswered", "truncated", "timeout"
    detail: str = ""


@dataclass
class ShutdownStats(LoadStats):
    attempts: list[Attempt] = field(default_factory=list)
    stopping_at: float | None = None  # set by ``during`` just before it stops the server
    exited_at: float | None = None  # set by ``during`` once the server process is gone


async def _client_until_gone(url: str, k: int, hard_until: float, per_request: int,
                             make: ItemMaker, stats: ShutdownStats, timeout_s: float,
                             read_timeout_s: float) -> None:
    """Post batches until the server refuses a connection after ``stats.stopping_at`` is set.

    A response is read as a stream, so that an answer cut short after its headers
    ("truncated") is told apart from a request that got no answer at all ("unanswered": a
    keep-alive connection the server closed, or reset, before reading the request).
    """
    rnd = random.Random(k)
    seq = 0
    async with httpx.AsyncClient(base_url=url, timeout=read_timeout_s) as c:
        while time.monotonic() < hard_until:
            items = [make(rnd, f"c{k}-r{seq}-i{i}") for i in range(per_request)]
            seq += 1
            t0 = time.monotonic()
            outcome, detail = "", ""
            try:
                async with c.stream("POST", "/v1/score",
                                    json={"items": items, "timeout_s": timeout_s}) as r:
                    try:
                        body = await r.aread()
                    except httpx.TransportError as exc:
                        outcome, detail = "truncated", f"{type(exc).__name__}: {exc}"
                    else:
                        outcome = str(r.status_code) if r.status_code in (200, 503) \
                            else f"HTTP {r.status_code}"
                        stats.codes[r.status_code] += 1
                        if r.status_code == 200:
                            try:
                                stats.check_ok(items, orjson.loads(body))
                            except orjson.JSONDecodeError:
                                outcome, detail = "truncated", f"not JSON: {body[-100:]!r}"
                        elif r.status_code == 503:
                            if "retry-after" not in r.headers:
                                stats.bad.append("503 without Retry-After")
                        else:
                            detail = body[:200].decode(errors="replace")
            except httpx.ConnectError as exc:
                outcome, detail = "refused", str(exc)
            except httpx.TimeoutException as exc:
                outcome, detail = "timeout", f"{type(exc).__name__}: {exc}"
            except httpx.TransportError as exc:
                outcome, detail = "unanswered", f"{type(exc).__name__}: {exc}"
            t1 = time.monotonic()
            stats.attempts.append(Attempt(t0, t1, outcome, detail))
            if outcome == "200":
                stats.latencies_ms.append((t1 - t0) * 1000)
            elif outcome == "refused" and stats.stopping_at is not None:
                return  # the listener is closed: this client is done
            else:
                await asyncio.sleep(0.05)


def run_until_gone(url: str, server_pid: int, *, clients: int, max_seconds: float,
                   per_request: int = 16, make: ItemMaker = simple_item, timeout_s: float = 5.0,
                   read_timeout_s: float = 120.0,
                   during: Callable[[ShutdownStats], Any]) -> ShutdownStats:
    """Drive the service until ``during`` (sync, in a thread) has stopped it; at most
    ``max_seconds``. ``during`` sets ``stopping_at`` before it signals the server."""
    stats = ShutdownStats()

    async def main() -> None:
        hard_until = time.monotonic() + max_seconds
        tasks = [asyncio.create_task(_client_until_gone(url, k, hard_until, per_request, make,
                                                        stats, timeout_s, read_timeout_s))
                 for k in range(clients)]
        tasks.append(asyncio.create_task(asyncio.to_thread(during, stats)))
        sampler = asyncio.create_task(_sampler(server_pid, hard_until, stats))
        try:
            await asyncio.gather(*tasks)
        finally:
            sampler.cancel()

    asyncio.run(main())
    return stats
