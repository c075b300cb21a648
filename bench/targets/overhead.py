"""The service's own cost for one item: single-item ``/v1/score`` requests one after another
over one keep-alive ``http.client.HTTPConnection`` (the standard library's client, so the
client's own CPU is small) to the plain service with 2 workers, verdict cache off.

Per request, three clocks: the client's round trip, the server's ``elapsed_s`` (from the
route's start to its reply) and the worker's ``results[0].elapsed_s`` (the scorer alone, in
the worker). Overhead = round trip - worker time, for the same item in the same request;
its split: in the server (server - worker: validation, the job's trip to the worker and back,
the reply) and outside it (round trip - server: the client, the kernel, uvicorn, the
middleware). Also timed: ``GET /healthz`` on the same connection (the HTTP floor: no body, no
worker) and a trivial item (``\\boxed{1}`` against ``1``) next to the corpus rows; and, before
and after, the same client's round trip of the trivial body to bare uvicorn (issue 28: the
service's single-item round trip ≤ 2.0x bare uvicorn's) and to the same app relaying each
request to an echo process (``bench/targets/floor_app.py``'s ``relay``): with the worker's scoring
time added, the floor of any server whose scorer runs in another process.
"""

from __future__ import annotations

import http.client
import statistics
import time
from collections.abc import Sequence
from typing import Any

import orjson

from bench.base import Context, Row, Section

HEADERS = {"content-type": "application/json"}
TRIVIAL = {"response": "\\boxed{1}", "ground_truth": "1", "scorer": "math_verify"}


def _pcts(xs: Sequence[float]) -> dict[str, float]:
    q = statistics.quantiles(xs, n=100, method="inclusive")
    return {"p50": q[49], "p90": q[89], "p99": q[98]}


def score_one(conn: http.client.HTTPConnection, item: dict[str, Any]) -> tuple[float, ...]:
    """(round trip, server, worker) in ms for one single-item request."""
    body = orjson.dumps({"items": [item]})
    t0 = time.perf_counter()
    conn.request("POST", "/v1/score", body=body, headers=HEADERS)
    resp = conn.getresponse()
    payload = resp.read()
    rtt = (time.perf_counter() - t0) * 1000
    if resp.status != 200:
        raise RuntimeError(f"/v1/score answered {resp.status}: {payload[:300]!r}")
    reply = orjson.loads(payload)
    return rtt, reply["elapsed_s"] * 1000, reply["results"][0]["elapsed_s"] * 1000


def _healthz(conn: http.client.HTTPConnection) -> float:
    t0 = time.perf_counter()
    conn.request("GET", "/healthz")
    resp = conn.getresponse()
    resp.read()
    if resp.status != 200:
        raise RuntimeError(f"/healthz answered {resp.status}")
    return (time.perf_counter() - t0) * 1000


def _pass(conn: http.client.HTTPConnection, items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    rtt, server, worker, floor = [], [], [], []
    for item in items:
        a, b, c = score_one(conn, item)
        rtt.append(a)
        server.append(b)
        worker.append(c)
        floor.append(_healthz(conn))
    return {
        "n": len(items),
        "round_trip_ms": _pcts(rtt),
        "worker_ms": _pcts(worker),
        "overhead_ms": _pcts([a - c for a, c in zip(rtt, worker, strict=True)]),
        "in_server_ms": _pcts([b - c for b, c in zip(server, worker, strict=True)]),
        "outside_server_ms": _pcts([a - b for a, b in zip(rtt, server, strict=True)]),
        "healthz_ms": _pcts(floor),
    }


def bare_round_trip_ms(n: int, app: str = "app") -> dict[str, float]:
    """The same client's round trip of the trivial single-item body to bare uvicorn (the
    zero-cost app of ``bench/targets/floor_app.py``: httptools, uvloop, a fixed reply), ``n`` times on
    one keep-alive connection: the baseline of issue 28's round-trip target. With ``app``
    ``"relay"``: the same app after a round trip to an echo process, the floor of any server
    that scores out of its own process."""
    from bench.targets.per_sample import _floor_server

    body = orjson.dumps({"items": [TRIVIAL]})
    with _floor_server(app) as (url, _):
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        times = []
        try:
            for i in range(n + 50):  # the first 50: connection up, caches warm
                t0 = time.perf_counter()
                conn.request("POST", "/v1/score", body=body, headers=HEADERS)
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    raise RuntimeError(f"bare uvicorn answered {resp.status}")
                if i >= 50:
                    times.append((time.perf_counter() - t0) * 1000)
        finally:
            conn.close()
    return _pcts(times)


def run(ctx: Context) -> dict[str, Any]:
    n = 300 if ctx.quick else 1000
    bare = [bare_round_trip_ms(n)]
    relay = [bare_round_trip_ms(n, "relay")]
    rows: Sequence[Row] = ctx.rows[:n]
    items = [{"response": r["response"], "ground_truth": r["gold"], "scorer": "math_verify"}
             for r in rows]
    ctx.log(f"overhead: {n} single-item requests over keep-alive http.client ...")
    with ctx.service(2) as svc:
        host, port = svc.url.split("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=60)
        try:
            for r in ctx.warm_rows[:50]:  # connection up, workers warm
                score_one(conn, {"response": r["response"], "ground_truth": r["gold"]})
            corpus = _pass(conn, items)
            trivial = _pass(conn, [TRIVIAL] * n)
        finally:
            conn.close()
    relay.append(bare_round_trip_ms(n, "relay"))
    bare.append(bare_round_trip_ms(n))
    ratios = [trivial["round_trip_ms"]["p50"] / b["p50"] for b in bare]
    # the floor of the target: the relay's round trip, plus the worker's own scoring of the
    # trivial item, over bare uvicorn's (each pair: before, after)
    worker = trivial["worker_ms"]["p50"]
    floor = [(r["p50"] + worker) / b["p50"] for r, b in zip(relay, bare, strict=True)]
    return {"corpus": corpus, "trivial": trivial, "target_p50_ms": 0.5, "bare_round_trip_ms": bare,
            "relay_round_trip_ms": relay, "round_trip_x_bare": ratios,
            "floor_x_bare": floor}


def report(r: dict[str, Any]) -> str:
    rows = (("overhead_ms", "**overhead = round trip - worker**"),
            ("in_server_ms", "  in the server (server elapsed - worker)"),
            ("outside_server_ms", "  outside it (round trip - server elapsed)"),
            ("round_trip_ms", "round trip"), ("worker_ms", "worker (scorer alone)"),
            ("healthz_ms", "`GET /healthz` on the same connection"))
    lines = [f"""## Single-item overhead (keep-alive `http.client`, plain service, 2 workers)

{r['corpus']['n']} single-item `/v1/score` requests one after another on one keep-alive
connection, verdict cache off; per request the worker's own scoring time (`results[0].elapsed_s`)
is subtracted from the round trip. Target: p50 overhead <= {r['target_p50_ms']} ms.

| ms | corpus rows p50 | p90 | p99 | trivial item p50 | p90 | p99 |
|---|---:|---:|---:|---:|---:|---:|"""]
    for key, label in rows:
        c, t = r["corpus"][key], r["trivial"][key]
        lines.append(f"| {label} | {c['p50']:.2f} | {c['p90']:.2f} | {c['p99']:.2f} | "
                     f"{t['p50']:.2f} | {t['p90']:.2f} | {t['p99']:.2f} |")
    if "bare_round_trip_ms" in r:
        b, x = [v["p50"] for v in r["bare_round_trip_ms"]], r["round_trip_x_bare"]
        lines.append(f"\nBare uvicorn (`bench/targets/floor_app.py`), the same client and trivial body: "
                     f"round trip p50 {b[0]:.2f} ms before the service's passes, {b[1]:.2f} ms "
                     f"after; the service's trivial round trip ÷ it: {x[0]:.2f}x, {x[1]:.2f}x "
                     f"(issue 28's target ≤ 2.0x).")
    if "relay_round_trip_ms" in r:
        rl, fx = [v["p50"] for v in r["relay_round_trip_ms"]], r["floor_x_bare"]
        lines.append(f"The same app after a round trip to an echo process (`relay`: no parsing, "
                     f"no scoring) {rl[0]:.2f} / {rl[1]:.2f} ms; with the worker's own scoring "
                     f"of the trivial item (p50 {r['trivial']['worker_ms']['p50']:.3f} ms) added, "
                     f"the floor of any server that scores out of its own process is "
                     f"{fx[0]:.2f}x / {fx[1]:.2f}x bare uvicorn.")
    met = r["corpus"]["overhead_ms"]["p50"] <= r["target_p50_ms"]
    lines.append(f"\nTarget p50 <= {r['target_p50_ms']} ms: **{'met' if met else 'not met'}** "
                 f"({r['corpus']['overhead_ms']['p50']:.2f} ms on corpus rows).")
    return "\n".join(lines) + "\n"


SECTION = Section("overhead", run, report)
