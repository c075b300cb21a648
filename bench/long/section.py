"""Long reasoning responses (``bench/long/rows.py``): items/s and MB/s in-process and through
the service, the per-KB cost of extraction, and what a 32 KB response costs next to the
short original of the same row."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import multiprocessing as mp
import time
from collections.abc import Sequence
from typing import Any

from bench import scenarios as sc
from bench.base import Context, Row, Section
from bench.long import rows as long_set

LONG, LONG_QUICK = 96, 32  # items in the 8-32 KB set
FULL32, FULL32_QUICK = 160, 32  # items padded to 31-32 KB


def _extraction_job(texts: Sequence[str], ours: bool, warm: Sequence[str]) -> list[float]:
    """Milliseconds of ``parse(text)`` for each text, stock or with the workers' shortcuts, in
    this (fresh) interpreter, first warmed with ``warm`` as every pass is."""
    from math_verify import parse

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    if ours:
        from reward_service.scorers.patches import install_patches

        install_patches()  # the workers' shortcuts (building a scorer installs none)
    else:
        sc.assert_stock()
    for text in warm:
        parse(text, parsing_timeout=None)  # type: ignore[arg-type]
    out = []
    for text in texts:
        t0 = time.perf_counter()
        parse(text, parsing_timeout=None)  # type: ignore[arg-type]
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _extraction_ms(texts: Sequence[str], ours: bool, warm: Sequence[Row]) -> list[float]:
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(_extraction_job, texts, ours, [r["response"] for r in warm]).result()


def _slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mx) ** 2 for x in xs)


def _rows(items: Sequence[Row], key: str) -> list[Row]:
    return [{"response": x[key], "gold": x["gold"]} for x in items]


def run(ctx: Context) -> dict[str, Any]:
    ctx.log("long responses: building and verifying the sets with stock math-verify ...")
    built = long_set.build(ctx.rows, LONG_QUICK if ctx.quick else LONG, seed=0)
    items = long_set.verified(built)
    built32 = long_set.build(ctx.rows, FULL32_QUICK if ctx.quick else FULL32, seed=1,
                             lo_kb=31, hi_kb=32)
    items32 = long_set.verified(built32)
    long_rows, short_rows = _rows(items, "response"), _rows(items, "short")
    mb = sum(len(x["response"]) for x in items) / 1e6
    kb = [len(x["response"]) / 1024 for x in items]
    out: dict[str, Any] = {"items": len(items), "built": len(built), "mb": mb,
                           "kb_min": min(kb), "kb_max": max(kb), "kb_mean": sum(kb) / len(kb),
                           "items32": len(items32), "built32": len(built32)}

    ctx.log("long responses: in-process (stock, then ours), per-KB extraction ...")
    before = sc.in_process(long_rows, False, ctx.warm_rows)["items_s"]
    stock_ms = _extraction_ms([x["response"] for x in items], False, ctx.warm_rows)
    ours_ms = _extraction_ms([x["response"] for x in items], True, ctx.warm_rows)
    out["extraction"] = {
        "stock_ms_per_kb": _slope(kb, stock_ms), "ours_ms_per_kb": _slope(kb, ours_ms),
        "stock_ms_mean": sum(stock_ms) / len(stock_ms), "ours_ms_mean": sum(ours_ms) / len(ours_ms),
        # a cost growing faster than the text shows as a rising ms/KB from the shortest
        # third to the longest third
        "ours_ms_per_kb_by_third": _thirds(kb, ours_ms),
        "stock_ms_per_kb_by_third": _thirds(kb, stock_ms)}

    ctx.log("long responses: through the service (2 workers), each pass on a fresh service ...")

    def fresh_pass(rows: Sequence[Row], batch: int) -> dict[str, Any]:
        # a fresh warmed service per pass: the long and the short form of a row share their
        # gold and final answer, so a second pass would find them in the workers' memos
        with ctx.service(2) as svc:
            sc.service_throughput(svc, ctx.warm_rows, 512, timeout_s=30.0)
            return sc.service_throughput(svc, rows, batch, timeout_s=60.0)

    long_pass = fresh_pass(long_rows, 32)
    short_pass = fresh_pass(short_rows, 32)
    # the 32 KB ratio from two alternating pairs (long, short, long, short): each pass is
    # short, and this VM's speed drifts within a run
    pairs = [(fresh_pass(_rows(items32, "response"), 32), fresh_pass(_rows(items32, "short"), 32))
             for _ in range(2)]
    p32 = {"items_s": sum(p["items_s"] for p, _ in pairs) / 2,
           "verdicts": [v for p, _ in pairs for v in p["verdicts"]]}
    s32 = {"items_s": sum(s["items_s"] for _, s in pairs) / 2}
    after = sc.in_process(long_rows, False, ctx.warm_rows)["items_s"]
    limit = 2 * (before + after) / 2
    out["in_process_stock_items_s"] = {"before": before, "after": after}
    out["limit_items_s"] = limit
    out["service"] = {
        "items_s": long_pass["items_s"], "mb_s": mb / long_pass["seconds"],
        "x_limit": long_pass["items_s"] / limit,
        "short_items_s": short_pass["items_s"],
        "mismatches": sum(v != x["stock"] for v, x in zip(long_pass["verdicts"], items,
                                                             strict=True)),
        "statuses": long_pass["statuses"],
        "kb32_items_s": p32["items_s"], "kb32_short_items_s": s32["items_s"],
        "kb32_cost_x_short": s32["items_s"] / p32["items_s"],
        "kb32_pairs_x_short": [s["items_s"] / p["items_s"] for p, s in pairs],
        "kb32_mismatches": sum(v != x["stock"] for v, x in zip(p32["verdicts"], items32 * 2,
                                                              strict=True))}
    return out


def _thirds(kb: Sequence[float], ms: Sequence[float]) -> list[float]:
    pts = sorted(zip(kb, ms, strict=True))
    k = len(pts) // 3
    parts = [pts[:k], pts[k:2 * k], pts[2 * k:]]
    return [sum(m for _, m in p) / sum(x for x, _ in p) for p in parts if p]


def report(r: dict[str, Any]) -> str:
    ex, sv, ip = r["extraction"], r["service"], r["in_process_stock_items_s"]
    thirds = lambda xs: " / ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    return f"""## Long responses

{r['items']} responses of {r['kb_min']:.1f}-{r['kb_max']:.1f} KB (mean {r['kb_mean']:.1f} KB,
{r['mb']:.2f} MB) built by `bench/long/rows.py` (seed 0) from corpus rows: reasoning padding
before the row's own solution; kept only where stock math-verify gives the long response the
verdict it gives the original ({r['items']} of {r['built']} kept). Stock in-process (1 core,
timeouts off, fresh interpreter) before/after the service pass: {ip['before']:.1f} /
{ip['after']:.1f} items/s; limit = 2 x their mean = {r['limit_items_s']:.1f} items/s.

| | items/s | MB/s | x limit |
|---|---:|---:|---:|
| stock in-process, 1 core (mean of the bracket) | {r['limit_items_s'] / 2:.1f} | {r['mb'] * r['limit_items_s'] / 2 / r['items']:.2f} | 0.50 |
| service, 2 workers, batch 32 | {sv['items_s']:.1f} | {sv['mb_s']:.2f} | {sv['x_limit']:.2f} |
| service, same rows without the padding (original answers) | {sv['short_items_s']:.0f} | | |

* Verdicts, service vs stock on the long set: **{sv['mismatches']}** mismatches
  (32 KB set: {sv['kb32_mismatches']}).
* Extraction (`parse(response)`), per KB (least-squares slope over the set): stock
  {ex['stock_ms_per_kb']:.2f} ms/KB, ours {ex['ours_ms_per_kb']:.2f} ms/KB; mean per response
  stock {ex['stock_ms_mean']:.1f} ms, ours {ex['ours_ms_mean']:.1f} ms. ms/KB by size third
  (shortest → longest): stock {thirds(ex['stock_ms_per_kb_by_third'])}, ours
  {thirds(ex['ours_ms_per_kb_by_third'])} (a cost growing faster than the text would make
  these rise from left to right).
* A 31-32 KB response ({r['items32']} items, 32 per request) through the service costs
  **{sv['kb32_cost_x_short']:.1f}x** the short original of the same row
  ({sv['kb32_items_s']:.1f} vs {sv['kb32_short_items_s']:.0f} items/s, the means of two
  alternating pairs of passes, each on a fresh service; the pairs alone:
  {' and '.join(f"{x:.1f}x" for x in sv.get('kb32_pairs_x_short', []))}).
"""


SECTION = Section("long", run, report)
