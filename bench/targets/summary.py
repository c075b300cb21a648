"""Issue 28's targets, each a ratio measured in one run against something that shares the same
cores, with its bracket and whether it is met: read from the figures of the sections that
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
    for order, goal in (("file order", 3.0), ("shuffled", 6.0)):
        for scorer in ("math", "math_verify"):
            p = t["passes"].get(f"{scorer}, {order}")
            if p and "x_stock_pair_each" in p:
                out.append(Target(f"{order}, `{scorer}`: service ÷ stock pair", True, goal,
                                  p["x_stock_pair_each"],
                                  f"{t['rows']} rows, 2 workers, batch {t['batch']}; the stock "
                                  "pair before and after the service pass"))
    p = t["passes"].get("math, file order")
    if p and "x_verl_each" in p:
        out.append(Target("service ÷ verl PR #5839's pattern (`math`, file order)", True, 6.0,
                          p["x_verl_each"], "spawn ProcessPoolExecutor(4), every item "
                          "submitted at once, before and after the service pass"))
    return out


def _per_sample(ps: dict[str, Any]) -> list[Target]:
    if "batched_items_s_each" not in ps:
        return []
    lean = ps["items_s"]["raw_lean"]
    how = (f"{ps['rows']} rows, {ps['callers']} callers, one item per request, a new "
           "connection each (raw HTTP/1.1 client)")
    ceiling = ps.get("floor", {}).get("raw_lean", {}).get("ceiling_x_batched")
    # what no server could pass here: the callers, the server and the workers share the cores
    bound = (f"; this machine's ceiling for any server, from the zero-cost app's CPU: "
             f"{ceiling:.2f}x" if ceiling is not None else "")
    if "relay_ceiling_x_batched" in ps:  # with the relay app's CPU (scoring out of process)
        bound += f", from the relay app's: {ps['relay_ceiling_x_batched']:.2f}x"
    return [Target("per-sample ÷ batched", True, 0.45,
                   [lean / b for b in ps["batched_items_s_each"]],
                   how + "; batched first and last" + bound),
            Target("server CPU per one-item request ÷ zero-cost ASGI app's", False, 1.5,
                   [ps["server_ms_per_request"] / f for f in ps["floor_server_ms_each"]],
                   how + f"; the service {ps['server_ms_per_request']:.3f} ms, the app "
                   + ", ".join(f"{f:.3f}" for f in ps["floor_server_ms_each"])
                   + " ms (before, after), CPU from /proc" + _relay_floor(ps))]


def _relay_floor(ps: dict[str, Any]) -> str:
    """The server-CPU floor of any server that scores out of its own process: the relay
    app's CPU over the zero-cost app's, each pair measured one after the other."""
    relay = ps.get("relay_server_ms_each")
    if relay is None:
        return ""
    floors = [r / f for r, f in zip(relay, ps["floor_server_ms_each"], strict=True)]
    return ("; the zero-cost app with one round trip to an echo process per request "
            "(`relay`, one frame each, no packing) "
            + ", ".join(f"{r:.3f}" for r in relay) + " ms, "
            + "/".join(f"{x:.2f}" for x in floors) + "x")


def _overhead(ov: dict[str, Any]) -> list[Target]:
    if "round_trip_x_bare" not in ov:
        return []
    return [Target("single-item round trip ÷ bare uvicorn's", False, 2.0, ov["round_trip_x_bare"],
                   f"p50 of {ov['trivial']['n']} trivial single-item requests, keep-alive "
                   "http.client; bare uvicorn before and after" + (
                       "; the floor of any server that scores out of its own process (the "
                       "`relay` app's round trip plus the worker's scoring) "
                       + "/".join(f"{x:.2f}" for x in ov["floor_x_bare"]) + "x"
                       if "floor_x_bare" in ov else ""))]


def _ray(r: dict[str, Any]) -> list[Target]:
    out = []
    for key, shape in (("handle_client_defaults", "2 replicas x 1 worker"),
                       ("handle1_client_defaults", "1 replica x 2 workers")):
        h = r.get(key)
        if h:
            name = "Ray handle client: CPU per item, plain service ÷ handle"
            out.append(Target(name if key == "handle_client_defaults" else f"{name} ({shape})",
                              True, 0.85, h["cpu_ratio_bracket"],
                              f"{r['rows']} rows, RewardClient defaults (512-item requests, 4 in "
                              f"flight); {shape} vs the plain service (2 workers) before and "
                              "after"))
    return out


def targets(res: dict[str, Any]) -> list[Target]:
    """Every target whose section is in ``res`` (section name -> its figures)."""
    out: list[Target] = []
    for name, read in (("targets", _targets), ("per_sample", _per_sample),
                       ("overhead", _overhead), ("ray", _ray)):
        if name in res:
            out += read(res[name])
    return out


def report(res: dict[str, Any]) -> str:
    rows = targets(res)
    if not rows:
        return ""
    lines = ["## Issue 28's targets", "",
             "Each a ratio measured in this run against a baseline that shares the same cores; "
             "ratio = the median of the ratios against each baseline pass, bracket = their "
             "range. This 2-vCPU VM drifts 20-30% within minutes, and other processes may share "
             "it during a run.", "",
             "| target | ratio | bracket | met? | measured |", "|---|---:|---:|---|---|"]
    for t in rows:
        sign = "≥" if t.at_least else "≤"
        lines.append(f"| {t.name} {sign} {t.goal:g}x | **{t.ratio:.2f}** | "
                     f"{min(t.values):.2f}-{max(t.values):.2f} | {t.verdict} | {t.how} |")
    return "\n".join(lines) + "\n"
