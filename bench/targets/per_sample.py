"""Per-sample callers against batched ones, in one run (a ``make bench`` section; alone:
``python -m bench --only per_sample``, or ``python -m bench.targets.per_sample [--rows N]``, which
prints JSON).

Each pass gets a freshly started service (2 workers, verdict cache off, warmed like the others
in ``bench/__main__.py``) and scores the same corpus rows:

* ``batched``: ``RewardClient.score`` of all rows (512-item requests, 4 in flight): the
  baseline every ratio is taken against;
* ``raw_per_request``: OpenRLHF ≥ 0.9.1's pattern: 256 concurrent callers, each posting one
  sample to ``/get_reward`` on a new aiohttp session (OpenRLHF's own client library), one
  after another;
* ``raw_lean``: the same requests (one sample, a new TCP connection each, 256 callers) from
  a minimal load generator (asyncio streams, HTTP/1.1 ``Connection: close``): what the
  *service* sustains under that pattern. The trainer's aiohttp client costs this 2-core
  machine ~0.5 ms of CPU per request, taken from the service's cores here but not on a
  real cluster, where OpenRLHF's reward callers run on the trainer's nodes;
* ``coalesced_async``: 256 concurrent ``compute_score_async`` calls (the verl adapter, as
  verl's reward loop awaits it), which :class:`AsyncRewardClient` packs into shared requests;
* ``sync_threads``: the sync ``compute_score`` from verl's executor (``run_in_executor``: 6
  threads here), one request per sample.

Every figure is items/s; ratios are against ``batched`` of the same run (the better of its
two passes, first and last: this VM drifts). Each pass also records the CPU seconds of the
client (this process), the server process and the workers (the zygote and its children).
Targets (issue 14): coalesced ≥ 0.6x batched, raw per-request ≥ 0.4x, the async adapter
never slower than sync.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from bench.base import Context, Section
from tests.helpers import ROOT, Service, descendants_of, read_jsonl, total_cpu_seconds
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


def raw_lean(url: str, rows: list[dict[str, Any]]) -> float:
    host, port = url.removeprefix("http://").rsplit(":", 1)

    async def one(row: dict[str, Any]) -> None:  # OpenRLHF's request, from a lean client
        body = json.dumps({"query": ["Q: ?\n" + row["response"]], "prompts": ["Q: ?\n"],
                           "labels": [row["gold"]]}).encode()
        head = (f"POST /get_reward?scorer=math_verify HTTP/1.1\r\nHost: {host}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n").encode()
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(head + body)
            reply = await reader.read()
        finally:
            writer.close()
        status = reply[:12]
        if status != b"HTTP/1.1 200" or b'"rewards":[' not in reply:
            raise RuntimeError(f"/get_reward answered {reply[:200]!r}")

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


PASSES = {"batched": batched, "raw_per_request": raw_per_request, "raw_lean": raw_lean,
          "coalesced_async": coalesced_async, "sync_threads": sync_threads}


def run_passes(rows: list[dict[str, Any]], warm: list[dict[str, str]]) -> dict[str, Any]:
    """Every pass on a fresh service; ``batched`` first and last (this VM drifts)."""
    rates: dict[str, float] = {}
    batched_each: list[float] = []
    cpu: dict[str, dict[str, float]] = {}
    for name in ["batched", "raw_per_request", "raw_lean", "coalesced_async", "sync_threads",
                 "batched"]:
        with _svc() as svc:
            _warm(svc, warm)
            assert svc.proc is not None
            server, workers = [svc.proc.pid], descendants_of(svc.proc.pid)
            before = (time.process_time(), total_cpu_seconds(server), total_cpu_seconds(workers))
            rate = PASSES[name](svc.url, rows)
            after = (time.process_time(), total_cpu_seconds(server), total_cpu_seconds(workers))
        if name == "batched":
            batched_each.append(rate)
        if rate > rates.get(name, 0.0):
            rates[name] = rate
            cpu[name] = {k: round(b - a, 4) for k, a, b in
                         zip(("client", "server", "workers"), before, after, strict=True)}
        print(f"per-sample bench: {name} {rate:.0f} items/s", file=sys.stderr, flush=True)
    base = rates["batched"]
    return {"rows": len(rows), "callers": CALLERS, "items_s": rates, "cpu_s": cpu,
            "batched_items_s_each": batched_each,
            "ratio_to_batched": {k: v / base for k, v in rates.items() if k != "batched"},
            "targets": {"coalesced_async": 0.6, "raw_per_request": 0.4}}


@contextlib.contextmanager
def _floor_server(app: str = "app") -> Iterator[tuple[str, int]]:
    """uvicorn serving ``bench/targets/floor_app.py``'s ``app`` (the zero-cost app) or ``relay`` (its
    round trip to an echo process) on a free loopback port: (url, pid)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", f"bench.targets.floor_app:{app}", "--host", "127.0.0.1",
         "--port", str(port), "--loop", "uvloop", "--http", "httptools", "--log-level",
         "warning", "--no-access-log"], cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while True:  # up when it accepts a connection
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the floor app did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def floor_cpu_ms(name: str, rows: list[dict[str, Any]], app: str = "app") -> tuple[float, float]:
    """CPU ms per request of the caller and of the zero-cost app's server (or the ``relay``
    app's, its echo process not counted), pattern ``name``."""
    with _floor_server(app) as (url, pid):
        before = (time.process_time(), total_cpu_seconds([pid]))
        PASSES[name](url, rows)
        after = (time.process_time(), total_cpu_seconds([pid]))
    return ((after[0] - before[0]) / len(rows) * 1000, (after[1] - before[1]) / len(rows) * 1000)


def _ceiling_items_s(client_ms: float, server_ms: float, workers_ms: float) -> float:
    """One-item requests a second this machine's cores allow when each costs the caller, the
    server and the workers these CPU ms (all three share the cores)."""
    return (os.cpu_count() or 1) * 1000 / (client_ms + server_ms + workers_ms)


def floor(rows: list[dict[str, Any]], measured: dict[str, Any]) -> dict[str, Any]:
    """The raw patterns against a zero-cost app: CPU ms per request of the caller and of the
    server (uvicorn and the kernel's TCP work), and the ceiling that leaves on this machine:
    every request also needs the workers' CPU per item (the batched pass's), and caller,
    server and workers share its cores, so no service could exceed
    ``cores / (caller + floor server + workers per item)``."""
    out: dict[str, Any] = {}
    cpu = measured["cpu_s"]["batched"]
    workers_ms = cpu["workers"] / len(rows) * 1000
    for name in ("raw_per_request", "raw_lean"):
        client_ms, server_ms = floor_cpu_ms(name, rows)
        ceiling = _ceiling_items_s(client_ms, server_ms, workers_ms)
        out[name] = {"client_ms": client_ms, "server_ms": server_ms, "workers_ms": workers_ms,
                     "ceiling_items_s": ceiling,
                     "ceiling_x_batched": ceiling / measured["items_s"]["batched"]}
    return out


def run(ctx: Context) -> dict[str, Any]:
    ctx.log("per-sample callers vs batched (bench/targets/per_sample.py) ...")
    rows = list(ctx.rows[:300] if ctx.quick else ctx.rows)
    # the lean pattern's zero-cost floor before the passes too: issue 28's server CPU per
    # request is a ratio to it, bracketed by the floor before and after; beside it each time
    # the relay app (the zero-cost app plus one round trip to an echo process per request),
    # that target's floor for a server that scores out of its own process
    lean_before = floor_cpu_ms("raw_lean", rows)[1]
    relay_before = floor_cpu_ms("raw_lean", rows, "relay")[1]
    out = run_passes(rows, list(ctx.warm_rows))
    ctx.log("per-sample: the raw patterns against a zero-cost app (the floor) ...")
    out["floor"] = floor(rows, out)
    out["floor_server_ms_each"] = [lean_before, out["floor"]["raw_lean"]["server_ms"]]
    out["relay_server_ms_each"] = [relay_before, floor_cpu_ms("raw_lean", rows, "relay")[1]]
    lean = out["floor"]["raw_lean"]
    relay = statistics.median(out["relay_server_ms_each"])
    out["relay_ceiling_x_batched"] = _ceiling_items_s(
        lean["client_ms"], relay, lean["workers_ms"]) / out["items_s"]["batched"]
    out["server_ms_per_request"] = out["cpu_s"]["raw_lean"]["server"] * 1000 / len(rows)
    return out


_LABELS = {
    "raw_per_request": "OpenRLHF ≥ 0.9.1: one sample per `/get_reward`, new aiohttp session each",
    "raw_lean": "the same requests from a lean load generator (new connection each)",
    "coalesced_async": "verl `compute_score_async` (AsyncRewardClient coalesces)",
    "sync_threads": "verl `compute_score` from 6 executor threads",
}


def report(r: dict[str, Any]) -> str:
    rows = r["rows"]
    lines = [f"""## Per-sample callers vs batched

{rows} corpus rows, {r['callers']} concurrent callers, each pass on a fresh warmed service
(2 workers, verdict cache off); ratio = items/s ÷ the batched pass of the same run (the
better of the first and the last). CPU seconds are per pass: the caller (this process), the
server process, the workers.

| caller pattern | items/s | x batched | target | CPU s: client / server / workers |
|---|---:|---:|---:|---|"""]
    cpu = r.get("cpu_s", {})

    def split(name: str) -> str:
        c = cpu.get(name)
        return f"{c['client']:.2f} / {c['server']:.2f} / {c['workers']:.2f}" if c else ""

    lines.append(f"| batched (512-item requests, 4 in flight) | {r['items_s']['batched']:.0f} "
                 f"| 1.00 | | {split('batched')} |")
    for name, label in _LABELS.items():
        if name not in r["items_s"]:
            continue
        target = r["targets"].get(name)
        lines.append(f"| {label} | {r['items_s'][name]:.0f} | "
                     f"{r['ratio_to_batched'][name]:.2f} | "
                     f"{f'≥ {target:.1f}' if target else ''} | {split(name)} |")
    fl = r.get("floor")
    if fl:
        lines += ["", "The raw patterns against a zero-cost app (`bench/targets/floor_app.py`: uvicorn "
                  "with httptools and uvloop, a fixed reply), CPU ms per request; the ceiling "
                  "is what this machine's cores allow any service once the workers' CPU per "
                  "item (batched pass) is added, as the callers share the cores here:", "",
                  "| caller pattern | caller ms | floor server ms | workers ms/item | "
                  "ceiling items/s | ceiling x batched |", "|---|---:|---:|---:|---:|---:|"]
        for name, f in fl.items():
            lines.append(f"| {_LABELS[name]} | {f['client_ms']:.3f} | {f['server_ms']:.3f} | "
                         f"{f['workers_ms']:.3f} | {f['ceiling_items_s']:.0f} | "
                         f"**{f['ceiling_x_batched']:.2f}** |")
    return "\n".join(lines) + "\n"


SECTION = Section("per_sample", run, report)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2048)
    args = ap.parse_args()
    rows = read_jsonl("corpus.jsonl")[:args.rows]
    warm = [{"response": r["solution"][0] if isinstance(r["solution"], list) else r["solution"],
             "gold": r["final_answer"][0].strip("$")}
            for r in read_jsonl("qwen25math_olympiadbench_test.jsonl")]
    print(json.dumps(run_passes(rows, warm), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
