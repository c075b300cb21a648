"""Where a worker's time goes, by phase: cProfile over the corpus rows, stock math-verify
(in-process, timeouts off) and the worker's scorer (``math_verify`` profile), each in a fresh
interpreter warmed like every other pass. Cumulative times of the functions that start each
phase; profiling slows everything, so compare shares, not rates."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
from collections.abc import Sequence
from typing import Any

from bench.sections import Context, Row, Section

# phase -> predicate on cProfile's (file, line, function) key
_PHASES: list[tuple[str, Any]] = [
    ("extraction regexes (finditer)",
     lambda f, ln, fn: f.endswith("math_verify/parser.py") and fn == "<genexpr>" and ln > 600),
    ("LaTeX normalisation", lambda f, ln, fn: fn == "normalize_latex"),
    ("ANTLR parse (lexer + parser)", lambda f, ln, fn: fn == "math" and "PSParser" in f),
    ("latex2sympy visitor + sympy construction",
     lambda f, ln, fn: fn in ("convert_set_relation", "convert_set_elements",
                              "convert_set_elements_relation") and "latex2sympy2" in f),
    ("plain numbers/expressions (extract_expr)", lambda f, ln, fn: fn == "extract_expr"),
    ("verify (sympy comparison)",
     lambda f, ln, fn: fn == "verify" and f.endswith("math_verify/grader.py")),
]


def _job(rows: Sequence[Row], warm: Sequence[Row], ours: bool) -> dict[str, Any]:
    import cProfile
    import logging
    import pstats
    import time

    from bench import scenarios as sc

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    if ours:
        from reward_service.scorers.math_verify_scorer import MathVerifyScorer

        scorer = MathVerifyScorer()

        def one(r: Row) -> None:
            scorer(r["response"], r["gold"], {})
    else:
        sc.assert_stock()

        def one(r: Row) -> None:
            sc.stock_verdict(r["gold"], r["response"], timeouts=False)
    for r in warm:
        one(r)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for r in rows:
        one(r)
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    out = {name: sum(v[3] for k, v in stats.items() if pred(*k)) for name, pred in _PHASES}
    return {"profiled_s": wall, "phases_s": out}


def _profile(rows: Sequence[Row], warm: Sequence[Row], ours: bool) -> dict[str, Any]:
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(_job, rows, warm, ours).result()


def run(ctx: Context) -> dict[str, Any]:
    ctx.log("profile by phase: stock, then the worker's scorer ...")
    return {"rows": len(ctx.rows), "stock": _profile(ctx.rows, ctx.warm_rows, False),
            "ours": _profile(ctx.rows, ctx.warm_rows, True)}


def report(r: dict[str, Any]) -> str:
    st, us = r["stock"], r["ours"]
    lines = [f"""## Profile by phase

cProfile over {r['rows']} corpus rows in file order, one core, fresh interpreters warmed with
OlympiadBench (cumulative seconds of the function that starts each phase; phases can nest a
little: the visitor calls sympy, `extract_expr` can call `parse_expr`). Profiling slows
everything: compare the shares and the stock/ours ratio, not the rates.

| phase | stock s | share | ours s | share | stock / ours |
|---|---:|---:|---:|---:|---:|"""]
    for name, _ in _PHASES:
        a, b = st["phases_s"][name], us["phases_s"][name]
        lines.append(f"| {name} | {a:.2f} | {a / st['profiled_s']:.0%} | {b:.2f} | "
                     f"{b / us['profiled_s']:.0%} | {a / b if b else float('inf'):.1f}x |")
    lines.append(f"| **total (profiled wall)** | {st['profiled_s']:.2f} | | {us['profiled_s']:.2f} "
                 f"| | {st['profiled_s'] / us['profiled_s']:.1f}x |")
    return "\n".join(lines) + "\n"


SECTION = Section("profile", run, report)
