"""Where a worker's time goes, by phase: cProfile over the corpus rows, stock math-verify
(in-process, timeouts off) and the worker's scorers (``math_verify`` and the default ``math``
profile, with the speed patches installed as a worker installs them), each in a fresh
interpreter warmed like every other pass. Cumulative times of the functions that start each
phase, and the functions with the most self time; profiling slows everything, so compare
shares, not rates."""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
from collections.abc import Sequence
from typing import Any

from bench.base import Context, Row, Section

# phase -> predicate on cProfile's (file, line, function) key
_PHASES: list[tuple[str, Any]] = [
    ("extraction regexes (finditer)",
     lambda f, ln, fn: (fn == "<genexpr>" and f.endswith("math_verify/parser.py") and ln > 600)
     or (fn == "ranked" and f.endswith("scorers/patches/tail_scan.py"))),  # the workers' (tail_scan)
    ("LaTeX normalisation", lambda f, ln, fn: fn == "normalize_latex"),
    ("ANTLR parse (lexer + parser)", lambda f, ln, fn: fn == "math" and "PSParser" in f),
    ("latex2sympy visitor + sympy construction",
     lambda f, ln, fn: fn in ("convert_set_relation", "convert_set_elements",
                              "convert_set_elements_relation") and "latex2sympy2" in f),
    ("plain numbers/expressions (extract_expr)", lambda f, ln, fn: fn == "extract_expr"),
    ("verify (sympy comparison)",
     lambda f, ln, fn: fn == "verify" and f.endswith("math_verify/grader.py")),
    ("math rules: hedge scan (closing part, candidates)",
     lambda f, ln, fn: fn == "distinct_candidates" and f.endswith("scorers/rules/hedge.py")),
]
_TOP = 12  # functions listed by self time


def _short(path: str) -> str:
    for marker in ("site-packages/", "/reward_service/"):
        if marker in path:
            return path.split(marker)[-1]
    return path


def _job(rows: Sequence[Row], warm: Sequence[Row], ours: str | None) -> dict[str, Any]:
    import cProfile
    import logging
    import pstats
    import time

    from bench import scenarios as sc

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    if ours:
        scorer = sc.ours_scorer(ours)

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
    top = sorted(stats.items(), key=lambda kv: -kv[1][2])[:_TOP]
    self_s = [(f"{_short(k[0])}:{k[1]}({k[2]})", v[2]) for k, v in top]
    return {"profiled_s": wall, "phases_s": out, "self_s": self_s}


def _profile(rows: Sequence[Row], warm: Sequence[Row], ours: str | None) -> dict[str, Any]:
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        return ex.submit(_job, rows, warm, ours).result()


def run(ctx: Context) -> dict[str, Any]:
    ctx.log("profile by phase: stock, then the worker's scorers (math_verify, math) ...")
    return {"rows": len(ctx.rows), "stock": _profile(ctx.rows, ctx.warm_rows, None),
            "ours": _profile(ctx.rows, ctx.warm_rows, "math_verify"),
            "math": _profile(ctx.rows, ctx.warm_rows, "math")}


def _share(part: float, total: float) -> str:
    return f"{part:.2f} | {part / total:.0%}" if total else f"{part:.2f} | -"


def report(r: dict[str, Any]) -> str:
    st, us, ma = r["stock"], r["ours"], r.get("math")
    runs = [("stock", st), ("ours `math_verify`", us)] + ([("ours `math`", ma)] if ma else [])
    lines = [f"""## Profile by phase

cProfile over {r['rows']} corpus rows in file order, one core, fresh interpreters warmed with
OlympiadBench, the worker's scorers with the speed patches a worker installs (cumulative
seconds of the function that starts each phase; phases can nest a little: the visitor calls
sympy, `extract_expr` can call `parse_expr`; the hedge scan runs only under `math`). Profiling
slows everything: compare the shares and the stock/ours ratio, not the rates.

| phase | {' | '.join(f'{n} s | share' for n, _ in runs)} | stock / ours `math_verify` |
|---|{'---:|---:|' * len(runs)}---:|"""]
    for name, _ in _PHASES:
        a, b = st["phases_s"][name], us["phases_s"][name]
        cells = " | ".join(_share(x["phases_s"][name], x["profiled_s"]) for _, x in runs)
        lines.append(f"| {name} | {cells} | {a / b if b else float('inf'):.1f}x |")
    totals = " | ".join(f"{x['profiled_s']:.2f} | " for _, x in runs)
    lines.append(f"| **total (profiled wall)** | {totals} | "
                 f"{st['profiled_s'] / us['profiled_s']:.1f}x |")
    for n, x in runs[1:]:
        if x.get("self_s"):
            lines += ["", f"Most self time, {n} (seconds, profiled):", ""]
            lines += [f"* `{where}` {sec:.2f}" for where, sec in x["self_s"]]
    return "\n".join(lines) + "\n"


SECTION = Section("profile", run, report)
