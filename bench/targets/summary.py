"""The performance targets (issue 28's, as issue 40 restated them on the floors measured beside
them), each a ratio measured in one run against something that shares the same cores, with its
bracket and whether it is met: read from the figures of the sections that
measure them (``make bench`` prints this table last and puts it in docs/PERFORMANCE.md; a
``--only`` run prints the rows its sections give).

A row's values are the ratio against each of its baseline's passes (the baseline runs before
and after the measured pass, or the measured pass runs between two of them): the ratio shown
is their median, the bracket their range. A target is met when the median meets it; "whole
bracket" says that even the worst of them does.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Target:
    name: str
    at_least: bool  # >= goal (else <= goal)
    goal: float
    values: Sequence[float]
    how: str  # what was measured against what

    @property
    def ratio(self) -> float:
        return statistics.median(self.values)

    def meets(self, x: float) -> bool:
        return x >= self.goal if self.at_least else x <= self.goal

    @property
    def verdict(self) -> str:
        worst = min(self.values) if self.at_least else max(self.values)
        if self.meets(worst):
            return "**yes** (whole bracket)"
        return "yes (median; the bracket straddles it)" if self.meets(self.ratio) else "**no**"


def _targets(t: dict[str, Any]) -> list[Target]:
    out = []
    for scorer in ("math", "math_verify"):  # file order: issue 28's target, met since
        p = t["passes"].get(f"{scorer}, file order")
        if p and "x_stock_pair_each" in p:
            out.append(Target(f"file order, `{scorer}`: service ÷ stock pair", True, 3.0,
                              p["x_stock_pair_each"],
                              f"{t['rows']} rows, 2 workers, batch {t['batch']}; the stock "
                              "pair before and after the service pass"))
    for scorer in ("math", "math_verify"):
        p = t["passes"].get(f"{scorer}, shuffled")
        if p and "x_stock_pair_passes" in p:  # issue 40: the median of fresh passes
            xs = p["x_stock_pair_passes"]
            out.append(Target(f"shuffled, `{scorer}`: service ÷ stock pair, median of "
                              f"{len(xs)} fresh passes", True, 6.0, xs,
                              f"{t['rows']} rows, 2 workers, batch {t['batch']}; each pass ÷ "
                              "the mean of the stock pair right before and after it; bracket = "
                              "min-max of the passes"))
        elif p and "x_stock_pair_each" in p:
            out.append(Target(f"shuffled, `{scorer}`: service ÷ stock pair", True, 6.0,
                              p["x_stock_pair_each"], f"{t['rows']} rows, one pass; the stock "
                              "pair before and after it"))
    p = t["passes"].get("math, file order")
    if p and "x_verl_batched_each" in p:  # issue 40: like for like, the target's measure
        x = p["x_verl_each"]
        out.append(Target("service ÷ verl PR #5839's pattern (`math`, file order)", True, 6.0,
                          p["x_verl_batched_each"], "spawn ProcessPoolExecutor(4) fed as the "
                          f"service is: one {t['batch']}-item slice after another (each slice's "
                          "items submitted at once), before and after the service pass; with "
                          "every row submitted at once (the pool's best case, not like for like) "
                          + "/".join(f"{v:.2f}" for v in x) + "x"))
    elif p and "x_verl_each" in p:
        out.append(Target("service ÷ verl PR #5839's pattern (`math`, file order)", True, 6.0,
                          p["x_verl_each"], "spawn ProcessPoolExecutor(4), every item "
                          "submitted at once, before and after the service pass"))
    return out


def _per_sample(ps: dict[str, Any]) -> list[Target]:
    """Issue 40's restatement: per-sample throughput as a share of the ceiling measured
    beside it, and the server's CPU per one-item request against the relay app's (the floor
    of any server that scores out of its own process)."""
    if "batched_items_s_each" not in ps:
        return []
    lean = ps["items_s"]["raw_lean"]
    how = (f"{ps['rows']} rows, {ps['callers']} callers, one item per request, a new "
           "connection each (raw HTTP/1.1 client)")
    zero = ps.get("floor", {}).get("raw_lean", {}).get("ceiling_x_batched")
    relay = ps.get("relay_ceiling_x_batched")
    out = []
    ceiling, which = (relay, "the relay app's") if relay is not None else (zero, "the zero-cost app's")
    if ceiling is not None:
        xs = [lean / b for b in ps["batched_items_s_each"]]
        out.append(Target("per-sample ÷ batched, as a share of this machine's ceiling", True,
                          0.85, [x / ceiling for x in xs],
                          how + "; per-sample ÷ batched "
                          + "/".join(f"{x:.2f}" for x in xs) + " (batched first and last); "
                          f"the ceiling for any server from {which} CPU: {ceiling:.2f}x"
                          + (f" (from the zero-cost app's: {zero:.2f}x)"
                             if relay is not None and zero is not None else "")))
    if "relay_server_ms_each" in ps:
        relays = ps["relay_server_ms_each"]
        out.append(Target("server CPU per one-item request ÷ the relay app's", False, 1.5,
                          [ps["server_ms_per_request"] / r for r in relays],
                          how + f"; the service {ps['server_ms_per_request']:.3f} ms, the relay "
                          "app (the zero-cost app with one round trip to an echo process per "
                          "request) " + ", ".join(f"{r:.3f}" for r in relays)
                          + " ms (before, after), CPU from /proc" + _relay_floor(ps)))
    return out


def _relay_floor(ps: dict[str, Any]) -> str:
    """The relay app's CPU over the zero-cost app's, each pair measured one after the other:
    how far the floor itself is from a server that does nothing."""
    relay = ps.get("relay_server_ms_each")
    if relay is None:
        return ""
    floors = [r / f for r, f in zip(relay, ps["floor_server_ms_each"], strict=True)]
    return ("; the relay ÷ the zero-cost app "
            + ", ".join(f"{f:.3f}" for f in ps["floor_server_ms_each"]) + " ms: "
            + "/".join(f"{x:.2f}" for x in floors) + "x")


def _overhead(ov: dict[str, Any]) -> list[Target]:
    """Issue 40's restatement: the trivial item's round trip against the relay's round trip
    plus the worker's own scoring of it (each relay pass, before and after)."""
    if "relay_round_trip_ms" not in ov:
        return []
    rt, worker = ov["trivial"]["round_trip_ms"]["p50"], ov["trivial"]["worker_ms"]["p50"]
    relays = [r["p50"] for r in ov["relay_round_trip_ms"]]
    return [Target("single-item round trip ÷ the relay + scoring floor", False, 1.3,
                   [rt / (r + worker) for r in relays],
                   f"p50 of {ov['trivial']['n']} trivial single-item requests, keep-alive "
                   f"http.client: the service {rt:.3f} ms; the `relay` app's round trip "
                   + "/".join(f"{r:.3f}" for r in relays) + f" ms (before, after) plus the "
                   f"worker's scoring {worker:.3f} ms"
                   + (f"; ÷ bare uvicorn: {'/'.join(f'{x:.2f}' for x in ov['round_trip_x_bare'])}x"
                      if "round_trip_x_bare" in ov else ""))]


def _ray(r: dict[str, Any]) -> list[Target]:
    out = []
    for key, shape in (("handle_client_defaults", "2 replicas x 1 worker"),
                       ("handle1_client_defaults", "1 replica x 2 workers")):
        h = r.get(key)
        if not h:
            continue
        passes = h.get("passes_cpu_ratio")
        name = f"Ray handle client ({shape}): CPU per item, plain service ÷ handle"
        if passes:  # issue 40: the median of fresh passes
            out.append(Target(f"{name}, median of {len(passes)} fresh passes", True, 0.85, passes,
                              f"{r['rows']} rows, RewardClient defaults (512-item requests, 4 "
                              "in flight); each pass on fresh replicas ÷ the plain service (2 "
                              "workers) before and after the Serve block; bracket = min-max of "
                              "the passes"))
        else:
            out.append(Target(name, True, 0.85, h["cpu_ratio_bracket"],
                              f"{r['rows']} rows, one pass; the plain service before and after"))
    return out


def _peers(r: dict[str, Any]) -> list[Target]:
    """Issue 40: ours ≥ 5x each peer's items/s on the peer's own contract (the hostile-mix
    target is in the peers' own table: it is counts, not a ratio)."""
    out = []
    for p in r["peers"]:
        if not p["ran"]:
            continue
        out.append(Target(f"ours ÷ {p['name']} ({p['contract']}), items/s", True, 5.0,
                          p["x_peer_each"], f"{r['rows']} rows; the peer's pass between two of "
                          "ours, fresh processes"))
        if "x_peer_boxed_each" in p:
            out.append(Target(f"ours ÷ {p['name']} on the rows it scores (a `\\boxed{{}}`), "
                              "items/s", True, 5.0, p["x_peer_boxed_each"],
                              f"{p['boxed_rows']} corpus rows with a box (without one the peer "
                              "answers 0 unparsed); bracketed the same way"))
    return out


def targets(res: dict[str, Any]) -> list[Target]:
    """Every target whose section is in ``res`` (section name -> its figures)."""
    out: list[Target] = []
    for name, read in (("targets", _targets), ("per_sample", _per_sample),
                       ("overhead", _overhead), ("ray", _ray), ("peers", _peers)):
        if name in res:
            out += read(res[name])
    return out


def report(res: dict[str, Any]) -> str:
    rows = targets(res)
    if not rows:
        return ""
    lines = ["## Performance targets (issue 28's, restated by issue 40)", "",
             "Each a ratio measured in this run against a baseline that shares the same cores; "
             "ratio = the median of the ratios against each baseline pass, bracket = their "
             "range (for a median of fresh passes: the passes' min-max). This 2-vCPU VM drifts "
             "20-30% within minutes, and other processes may share it during a run.", "",
             "| target | ratio | bracket | met? | measured |", "|---|---:|---:|---|---|"]
    for t in rows:
        sign = "≥" if t.at_least else "≤"
        lines.append(f"| {t.name} {sign} {t.goal:g}x | **{t.ratio:.2f}** | "
                     f"{min(t.values):.2f}-{max(t.values):.2f} | {t.verdict} | {t.how} |")
    return "\n".join(lines) + "\n"
