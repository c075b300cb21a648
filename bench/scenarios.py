"""Measurement functions for the benchmark harness (``python -m bench``). Each returns figures."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

import httpx
from math_verify import parse, verify

from reward_service.scorers.math_verify_scorer import boxed_gold
from tests.helpers import Service

Row = dict[str, Any]


def stock_verdict(gold: str, response: str, timeouts: bool = True) -> bool:
    """Stock math-verify as users run it in-process (defaults: its own 5 s timeouts on)."""
    if timeouts:
        return bool(verify(parse(boxed_gold(gold)), parse(response)))
    return bool(verify(parse(boxed_gold(gold), parsing_timeout=None),  # type: ignore[arg-type]
                       parse(response, parsing_timeout=None),  # type: ignore[arg-type]
                       timeout_seconds=None))


def in_process(rows: Sequence[Row], timeouts: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    verdicts = [stock_verdict(r["gold"], r["response"], timeouts) for r in rows]
    wall = time.perf_counter() - t0
    return {"seconds": wall, "items_s": len(rows) / wall, "verdicts": verdicts}


def _pool_job(args: tuple[str, str]) -> bool:
    return stock_verdict(args[0], args[1], timeouts=True)


def verl_pattern(rows: Sequence[Row], all_at_once: bool, workers: int = 4) -> dict[str, Any]:
    """verl's pattern: a spawn ProcessPoolExecutor, one ``submit`` per item."""
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as ex:
        list(ex.map(_pool_job, [("1", "\\boxed{1}")] * workers * 2))  # start and warm workers
        t0 = time.perf_counter()
        if all_at_once:
            futs = [ex.submit(_pool_job, (r["gold"], r["response"])) for r in rows]
            verdicts = [f.result() for f in futs]
        else:
            verdicts = [ex.submit(_pool_job, (r["gold"], r["response"])).result() for r in rows]
        wall = time.perf_counter() - t0
    return {"seconds": wall, "items_s": len(rows) / wall, "verdicts": verdicts}


def _items(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [{"response": r["response"], "ground_truth": r["gold"], "scorer": "math_verify"}
            for r in rows]


def service_throughput(
    svc: Service, rows: Sequence[Row], batch: int, timeout_s: float | None = None
) -> dict[str, Any]:
    items = _items(rows)
    verdicts: list[bool] = []
    statuses: dict[str, int] = {}
    body_extra = {"timeout_s": timeout_s} if timeout_s else {}
    with httpx.Client(base_url=svc.url, timeout=600) as c:
        c.post("/v1/score", json={"items": items[:2]})  # connection up
        t0 = time.perf_counter()
        for i in range(0, len(items), batch):
            r = c.post("/v1/score", json={"items": items[i : i + batch], **body_extra})
            r.raise_for_status()
            for x in r.json()["results"]:
                verdicts.append(x["status"] == "correct")
                statuses[x["status"]] = statuses.get(x["status"], 0) + 1
        wall = time.perf_counter() - t0
    return {"seconds": wall, "items_s": len(rows) / wall, "verdicts": verdicts,
            "statuses": statuses}


def latency(svc: Service, rows: Sequence[Row], n: int) -> dict[str, Any]:
    """Single-item requests one after another: HTTP vs the same items in-process."""
    items = _items(rows[:n])
    http_ms, local_ms = [], []
    with httpx.Client(base_url=svc.url, timeout=60) as c:
        c.post("/v1/score", json={"items": items[:1]})
        for it in items:
            t0 = time.perf_counter()
            c.post("/v1/score", json={"items": [it]}).raise_for_status()
            http_ms.append((time.perf_counter() - t0) * 1000)
    for r in rows[:n]:
        t0 = time.perf_counter()
        stock_verdict(r["gold"], r["response"], timeouts=False)
        local_ms.append((time.perf_counter() - t0) * 1000)

    def pct(xs: list[float], q: float) -> float:
        return statistics.quantiles(xs, n=100)[int(q) - 1]

    return {
        "http_p50_ms": pct(http_ms, 50), "http_p99_ms": pct(http_ms, 99),
        "in_process_p50_ms": pct(local_ms, 50), "in_process_p99_ms": pct(local_ms, 99),
        "overhead_p50_ms": pct(http_ms, 50) - pct(local_ms, 50),
    }


def worker_rss_mb(svc: Service) -> list[float]:
    """Resident memory of each worker (the zygote's children), in MB."""
    from tests.helpers import children_of

    assert svc.proc is not None
    page = os.sysconf("SC_PAGE_SIZE")
    out = []
    for zygote in children_of(svc.proc.pid):
        for pid in children_of(zygote):
            try:
                with open(f"/proc/{pid}/statm") as fh:
                    out.append(int(fh.read().split()[1]) * page / 2**20)
            except OSError:
                continue
    return out
