"""Issue 18's headline ratios, for both math profiles: the service (2 workers, batch 512, one
request after another, a fresh warmed service per pass) against the in-process limit measured
in fresh interpreters right before and right after that pass (limit = before + after, i.e. 2
cores x their mean), on the corpus in file order and shuffled, with the scorer a user gets by
default (``math``) and the library's verdicts (``math_verify``). Each pass also counts its
verdict mismatches against stock math-verify (``math_verify`` only: ``math`` differs on
purpose, see docs/CORRECTNESS.md).

Inside the same bracket, the workers' own scorer runs in-process on one core (fresh
interpreter, the workers' patches): 2 x that rate is the most any service could get from two
workers of this scorer on two cores with nothing else running (no server, pipes or client),
so "scorer ceiling" = that ÷ the limit bounds the service's ratio from above."""

from __future__ import annotations

import random
from typing import Any

from bench import scenarios as sc
from bench.sections import Context, Section

SCORERS = ("math_verify", "math")
BATCH = 512


def run(ctx: Context) -> dict[str, Any]:
    rows = list(ctx.rows)
    shuffled = rows[:]
    random.Random(0).shuffle(shuffled)
    out: dict[str, Any] = {"rows": len(rows), "batch": BATCH, "passes": {}}
    for order, subset in (("file order", rows), ("shuffled", shuffled)):
        for scorer in SCORERS:
            ctx.log(f"targets: {scorer}, {order} ...")
            before = sc.in_process(subset, False, ctx.warm_rows)
            ours = sc.ours_in_process(subset, scorer, ctx.warm_rows)
            with ctx.service(2) as svc:
                sc.service_throughput(svc, ctx.warm_rows, BATCH, timeout_s=10.0, scorer=scorer)
                got = sc.service_throughput(svc, subset, BATCH, scorer=scorer)
            after = sc.in_process(subset, False, ctx.warm_rows)
            limit = before["items_s"] + after["items_s"]
            mismatches = (sum(a != b for a, b in zip(got["verdicts"], before["verdicts"],
                                                     strict=True))
                          if scorer == "math_verify" else None)
            out["passes"][f"{scorer}, {order}"] = {
                "before_items_s": before["items_s"], "after_items_s": after["items_s"],
                "limit_items_s": limit, "service_items_s": got["items_s"],
                "x_limit": got["items_s"] / limit, "mismatches": mismatches,
                "ours_items_s": ours["items_s"], "ceiling_x_limit": 2 * ours["items_s"] / limit,
                "ours_mismatches": sum(a != b for a, b in zip(ours["verdicts"],
                                                              got["verdicts"], strict=True))}
    return out


def report(r: dict[str, Any]) -> str:
    lines = [
        "## Headline ratios, both profiles (issue 18's targets)",
        "",
        f"{r['rows']} corpus rows, 2 workers, batch {r['batch']}, each pass on a fresh warmed "
        "service, bracketed by stock in-process passes (1 core, timeouts off, fresh "
        "interpreters); limit = before + after. Targets: 3.0x in file order, 4.0x shuffled. "
        "\"ours in-process\": the workers' own scorer on one core in the same bracket; "
        "scorer ceiling = 2 x that ÷ the limit, the most two workers of this scorer could give "
        "on two cores with no server, pipes or client. Mismatches: the service against stock "
        "math-verify (`math_verify` only; `math` differs on purpose), and in brackets the "
        "service against its own scorer in-process.",
        "",
        "| scorer, rows | in-process before / after | limit | ours in-process | scorer ceiling "
        "| service | x limit | mismatches |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, p in r["passes"].items():
        mm = "" if p["mismatches"] is None else str(p["mismatches"])
        mm += f" ({p['ours_mismatches']})" if "ours_mismatches" in p else ""
        ceiling = (f"{p['ours_items_s']:.0f} | {p['ceiling_x_limit']:.2f}"
                   if "ours_items_s" in p else " | ")
        lines.append(f"| {name} | {p['before_items_s']:.0f} / {p['after_items_s']:.0f} | "
                     f"{p['limit_items_s']:.0f} | {ceiling} | {p['service_items_s']:.0f} | "
                     f"**{p['x_limit']:.2f}** | {mm} |")
    return "\n".join(lines) + "\n"


SECTION = Section("targets", run, report)
