"""Measurement functions for the benchmark harness (``python -m bench``). Each returns figures."""

from __future__ import annotations

import concurrent.futures as cf
import http.client
import logging
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import math_verify.parser as mv_parser
import orjson
from math_verify import parse, verify
from sympy import Number
from sympy.parsing import sympy_parser

from reward_service.scorers.math_verify_scorer import boxed_gold
from tests.helpers import Service
from trainer_client.reward_client import RewardClient, RewardClientSettings, Timeout

Row = dict[str, Any]


def stock_verdict(gold: str, response: str, timeouts: bool = True) -> bool:
    """Stock math-verify as users run it in-process (defaults: its own 5 s timeouts on)."""
    if timeouts:
        return bool(verify(parse(boxed_gold(gold)), parse(response)))
    return bool(verify(parse(boxed_gold(gold), parsing_timeout=None),  # type: ignore[arg-type]
                       parse(response, parsing_timeout=None),  # type: ignore[arg-type]
                       timeout_seconds=None))


def assert_stock() -> None:
    """The baselines must run math-verify as shipped: nothing in this process may have
    installed any of the workers' shortcuts (``reward_service/scorers/``)."""
    assert mv_parser.parse_latex_cached.cache_info().maxsize == 20, "math-verify is patched"
    assert mv_parser.Number is Number, "math-verify is patched"
    assert not getattr(mv_parser.get_extraction_regexes, "prefiltered", False), "regexes wrapped"
    assert not getattr(mv_parser.lazy_latex_regex, "guarded", False), "regexes guarded"
    assert not getattr(mv_parser.normalize_latex, "memoised", False), "normalize_latex memoised"
    from latex2sympy2_extended.latex2sympy2 import _Latex2Sympy

    assert not getattr(_Latex2Sympy.create_parser, "two_stage", False), "two-stage parser"
    for fn in (sympy_parser.parse_expr, mv_parser.parse_expr):  # type: ignore[attr-defined]
        assert fn.__module__ == "sympy.parsing.sympy_parser", "parse_expr is patched"


_BARRIER: Any = None  # set in each process of a pair (``_pair_init``)


def _verdict_fn(job: str, arg: Any) -> Callable[[Row], bool]:
    """A row's verdict in this (fresh) process: ``"stock"`` math-verify (``arg``: its own
    timeouts on) or ``"ours"``, the workers' scorer ``arg`` with their patches."""
    if job == "stock":
        assert_stock()
        logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeouts are off" per process
        return lambda r: stock_verdict(r["gold"], r["response"], arg)
    fn = ours_scorer(arg)
    return lambda r: bool(fn(r["response"], r["gold"], {}).status == "correct")


def _timed_job(job: str, rows: Sequence[Row], arg: Any, warm: Sequence[Row],
               ) -> tuple[float, float, list[bool]]:
    """Warm with ``warm``, wait for the other process of a pair (if any), then score ``rows``:
    (start, end, verdicts) on the system-wide monotonic clock."""
    verdict = _verdict_fn(job, arg)
    for r in warm:
        verdict(r)
    if _BARRIER is not None:
        _BARRIER.wait(timeout=600)
    t0 = time.perf_counter()
    verdicts = [verdict(r) for r in rows]
    return t0, time.perf_counter(), verdicts


def _single(job: str, rows: Sequence[Row], arg: Any, warm: Sequence[Row]) -> dict[str, Any]:
    """``_timed_job`` in one fresh interpreter."""
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        t0, t1, verdicts = ex.submit(_timed_job, job, rows, arg, warm).result()
    return {"seconds": t1 - t0, "items_s": len(rows) / (t1 - t0), "verdicts": verdicts}


def in_process(rows: Sequence[Row], timeouts: bool, warm: Sequence[Row]) -> dict[str, Any]:
    """Stock math-verify in a fresh interpreter, first warmed with ``warm`` (as each service
    pass is), then timed on ``rows`` once: no pass may replay rows an earlier pass parsed
    (ANTLR's DFA, sympy's cache and math-verify's memos all remember them)."""
    return _single("stock", rows, timeouts, warm)


def ours_in_process(rows: Sequence[Row], scorer: str, warm: Sequence[Row]) -> dict[str, Any]:
    """The workers' own scorer (``scorer``, with the patches a worker installs) in a fresh
    interpreter on one core, warmed as the stock passes are: what the service's workers could
    do with nothing else running (no server, no pipes, no client)."""
    return _single("ours", rows, scorer, warm)


def _pair_init(barrier: Any) -> None:
    global _BARRIER
    _BARRIER = barrier


def in_process_pair(rows: Sequence[Row], job: str, arg: Any, warm: Sequence[Row],
                    ) -> dict[str, Any]:
    """Two fresh interpreters at once, one core each in practice, the rows dealt between them
    (even and odd rows, as the service deals a request's items), started together after their
    warm-up; ``items_s`` is the sum of their two rates: what two processes of
    ``job`` (``"stock"`` math-verify, ``arg`` = its timeouts on, or ``"ours"``, ``arg`` = the
    scorer) really do on this machine's two cores. The single-core passes times 2 assume two
    independent cores; on a VM whose two vCPUs share a physical core, or its caches, or its
    power budget, that assumption overstates what two cores can give."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    halves = (rows[0::2], rows[1::2])
    with cf.ProcessPoolExecutor(2, mp_context=ctx, initializer=_pair_init,
                                initargs=(barrier,)) as ex:
        futs = [ex.submit(_timed_job, job, half, arg, warm) for half in halves]
        (a0, a1, va), (b0, b1, vb) = (f.result() for f in futs)
    verdicts: list[bool] = [False] * len(rows)
    verdicts[0::2], verdicts[1::2] = va, vb  # back in the rows' order
    # the two processes' own rates, added: what a pool balancing work between them (as the
    # service's does) could get; the two vCPUs here can differ by 2x, so the wall time of
    # the slower half would understate it
    rate = len(va) / (a1 - a0) + len(vb) / (b1 - b0)
    return {"seconds": max(a1, b1) - min(a0, b0), "items_s": rate, "verdicts": verdicts,
            "seconds_each": [a1 - a0, b1 - b0]}


def ours_scorer(scorer: str) -> Any:
    """The workers' scorer ``scorer`` in this process, built as the zygote builds it (after
    installing the workers' patches, which only a fresh interpreter should get)."""
    from reward_service.scorers.impl import build_scorers
    from reward_service.scorers.patches import install_patches

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    install_patches()
    return build_scorers()[scorer]


def _pool_job(args: tuple[str, str]) -> bool:
    return stock_verdict(args[0], args[1], timeouts=True)


def verl_pattern(rows: Sequence[Row], all_at_once: bool, workers: int = 4,
                 batch: int | None = None) -> dict[str, Any]:
    """verl's pattern: a spawn ProcessPoolExecutor, one ``submit`` per item. ``all_at_once``
    submits every row before waiting; with ``batch`` as well, every row of one ``batch``-row
    slice, waiting for the slice before the next (the shape of the service passes it is set
    against: one ``batch``-item request after another)."""
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=ctx) as ex:
        list(ex.map(_pool_job, [("1", "\\boxed{1}")] * workers * 2))  # start and warm workers
        t0 = time.perf_counter()
        if all_at_once:
            verdicts = []
            step = batch or len(rows)
            for i in range(0, len(rows), step):
                futs = [ex.submit(_pool_job, (r["gold"], r["response"])) for r in rows[i:i + step]]
                verdicts += [f.result() for f in futs]
        else:
            verdicts = [ex.submit(_pool_job, (r["gold"], r["response"])).result() for r in rows]
        wall = time.perf_counter() - t0
    return {"seconds": wall, "items_s": len(rows) / wall, "verdicts": verdicts}


def _items(rows: Sequence[Row], scorer: str = "math_verify") -> list[dict[str, Any]]:
    return [{"response": r["response"], "ground_truth": r["gold"], "scorer": scorer}
            for r in rows]


def service_throughput(
    svc: Service, rows: Sequence[Row], batch: int, timeout_s: float | None = None,
    *, chunk: int | None = None, in_flight: int = 1, scorer: str = "math_verify",
) -> dict[str, Any]:
    """The service as a trainer calls it: our ``RewardClient``, one ``score`` call per
    ``batch`` rows, one call after another. By default each call is one request; with
    ``chunk`` a call is split into requests of ``chunk`` items, ``in_flight`` at a time.
    ``scorer``: ``math_verify`` (the stock library's verdicts) or ``math`` (the default).
    A ``svc`` with a ``client(**options)`` method gives its own client (a Ray Serve handle
    client: ``bench/ray_serve/section.py``), built with the same options; else ``RewardClient`` on
    ``svc.url``."""
    items = _items(rows, scorer)
    options = {"chunk_size": chunk or batch, "max_concurrency": in_flight,
               "item_timeout_s": timeout_s}
    make = getattr(svc, "client", None)
    verdicts: list[bool] = []
    statuses: dict[str, int] = {}
    with (make(**options) if make is not None else RewardClient(RewardClientSettings(
            urls=(svc.url,), timeout=Timeout(read=600), **options))) as client:
        client.score(items[:2])  # connection up
        t0 = time.perf_counter()
        for i in range(0, len(items), batch):
            for x in client.score(items[i : i + batch]):
                verdicts.append(x.status == "correct")
                statuses[x.status] = statuses.get(x.status, 0) + 1
        wall = time.perf_counter() - t0
    return {"seconds": wall, "items_s": len(rows) / wall, "verdicts": verdicts,
            "statuses": statuses}


def latency(svc: Service, rows: Sequence[Row], n: int) -> dict[str, Any]:
    """Single-item requests one after another, each followed by the same item in-process, so
    both see the same machine state. HTTP is timed with two clients: the standard library's
    keep-alive ``http.client`` (the service's own overhead) and httpx (what our client uses;
    its pure-Python HTTP stack adds its own CPU per request)."""
    items = _items(rows[:n])
    host, port = svc.url.split("//", 1)[1].rsplit(":", 1)
    raw = http.client.HTTPConnection(host, int(port), timeout=60)
    headers = {"content-type": "application/json"}
    times: dict[str, list[float]] = {"http": [], "httpx": [], "in_process": []}
    with httpx.Client(base_url=svc.url, timeout=60) as c:
        c.post("/v1/score", json={"items": items[:1]}).raise_for_status()
        for r, it in zip(rows[:n], items, strict=True):
            body = orjson.dumps({"items": [it]})
            t0 = time.perf_counter()
            raw.request("POST", "/v1/score", body=body, headers=headers)
            resp = raw.getresponse()
            payload = resp.read()
            times["http"].append((time.perf_counter() - t0) * 1000)
            assert resp.status == 200, payload[:300]
            t0 = time.perf_counter()
            c.post("/v1/score", content=body, headers=headers).raise_for_status()
            times["httpx"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            stock_verdict(r["gold"], r["response"], timeouts=False)
            times["in_process"].append((time.perf_counter() - t0) * 1000)
    raw.close()
    alone = []
    for r in rows[:n]:
        t0 = time.perf_counter()
        stock_verdict(r["gold"], r["response"], timeouts=False)
        alone.append((time.perf_counter() - t0) * 1000)

    def pct(xs: list[float], q: int) -> float:
        return statistics.quantiles(xs, n=100)[q - 1]

    out: dict[str, Any] = {}
    for name, xs in times.items():
        out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = pct(xs, 50), pct(xs, 99)
    out["in_process_alone_p50_ms"] = pct(alone, 50)
    out["overhead_p50_ms"] = out["http_p50_ms"] - out["in_process_p50_ms"]
    out["httpx_overhead_p50_ms"] = out["httpx_p50_ms"] - out["in_process_p50_ms"]
    return out


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
