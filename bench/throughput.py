"""Throughput: the service over HTTP vs math-verify in-process, same rows, one run.

    $ python -m bench.throughput [--rows N] [--batch 512] [--workers 2] [--shuffle]

Baselines (sequential, one core, in this process): stock math-verify
``verify(parse(gold), parse(response))`` with its own timeouts on (the defaults) and off.
The faster is the per-core limit; "limit" = workers x that rate. The service runs as a real
subprocess (verdict cache off, so repeated runs measure scoring, not the cache) and is fed
batches over HTTP one after another. Prints a table and writes bench/results/throughput.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import httpx
from math_verify import parse, verify

from reward_service.scorers.math_verify_scorer import boxed_gold
from tests.helpers import Service, read_jsonl

OUT = Path(__file__).resolve().parent / "results"


def in_process(rows: list[dict], timeouts: bool) -> tuple[float, list[bool]]:
    kw_parse = {} if timeouts else {"parsing_timeout": None}
    kw_verify = {} if timeouts else {"timeout_seconds": None}
    t0 = time.perf_counter()
    verdicts = [
        bool(verify(parse(boxed_gold(r["gold"]), **kw_parse), parse(r["response"], **kw_parse),
                    **kw_verify))
        for r in rows
    ]
    return time.perf_counter() - t0, verdicts


def service(rows: list[dict], workers: int, batch: int) -> tuple[float, list[bool], dict]:
    items = [{"response": r["response"], "ground_truth": r["gold"], "scorer": "math_verify"}
             for r in rows]
    with Service(REWARD_WORKERS=workers, REWARD_CACHE_ITEMS=0, REWARD_SPARES=1) as svc, \
            httpx.Client(base_url=svc.url, timeout=600) as c:
        c.post("/v1/score", json={"items": items[:64]})  # warm the connection
        verdicts: list[bool] = []
        t0 = time.perf_counter()
        for i in range(0, len(items), batch):
            r = c.post("/v1/score", json={"items": items[i : i + batch]})
            r.raise_for_status()
            verdicts.extend(x["status"] == "correct" for x in r.json()["results"])
        wall = time.perf_counter() - t0
        info = c.get("/v1/info").json()["workers"]
    return wall, verdicts, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=0, help="first N rows of corpus.jsonl (0 = all)")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--shuffle", action="store_true", help="shuffle rows (seed 0)")
    args = ap.parse_args()
    rows = read_jsonl("corpus.jsonl")
    if args.rows:
        rows = rows[: args.rows]
    if args.shuffle:
        random.Random(0).shuffle(rows)
    n = len(rows)
    on_s, on_v = in_process(rows, timeouts=True)
    off_s, off_v = in_process(rows, timeouts=False)
    svc_s, svc_v, info = service(rows, args.workers, args.batch)
    per_core = max(n / on_s, n / off_s)
    limit = args.workers * per_core
    svc_rate = n / svc_s
    table = [
        ("in-process, timeouts on (1 core)", on_s, n / on_s),
        ("in-process, timeouts off (1 core)", off_s, n / off_s),
        (f"service HTTP, {args.workers} workers, batch {args.batch}", svc_s, svc_rate),
    ]
    print(f"{n} rows of corpus.jsonl ({'shuffled' if args.shuffle else 'file order'})")
    print(f"{'':44} {'seconds':>8} {'items/s':>9}")
    for name, secs, rate in table:
        print(f"{name:44} {secs:8.2f} {rate:9.0f}")
    print(f"limit = {args.workers} x per-core = {limit:.0f} items/s; "
          f"service / limit = {svc_rate / limit:.2f}")
    mismatches = sum(a != b for a, b in zip(on_v, svc_v, strict=True))
    print(f"verdict mismatches vs stock (timeouts on): {mismatches}; "
          f"stock on vs off: {sum(a != b for a, b in zip(on_v, off_v, strict=True))}")
    OUT.mkdir(exist_ok=True)
    result = {
        "rows": n, "shuffled": args.shuffle, "workers": args.workers, "batch": args.batch,
        "in_process_timeouts_on_items_s": n / on_s, "in_process_timeouts_off_items_s": n / off_s,
        "service_items_s": svc_rate, "limit_items_s": limit, "ratio_to_limit": svc_rate / limit,
        "verdict_mismatches": mismatches, "pool": info,
    }
    (OUT / "throughput.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
