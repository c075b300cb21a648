"""The Ray bench's handle-client passes (``bench/ray_serve/section.py``): the Serve app called through
its deployment handle with ``RayRewardClient`` (no HTTP proxy), and its figures against the plain
service's passes before and after: issue 28's target, CPU per item ≥ 0.85x the plain service's.
"""

from __future__ import annotations

import statistics
from typing import Any


def cpu_per_item(p: dict[str, Any], n: int) -> float:
    """CPU ms per item, every process of the service (workers, servers, proxy, Ray)."""
    return sum(p["cpu_s"].values()) * 1000 / n


def busy(p: dict[str, Any]) -> float:
    """Share of the pass the 2 workers spent on CPU (their CPU seconds / 2 x wall)."""
    return sum(v for k, v in p["cpu_s"].items() if k.startswith("workers")) / (2 * p["seconds"])


class HandleTarget:
    """The Serve app through its deployment handle: ``scenarios.service_throughput`` calls it
    with ``RayRewardClient`` (no HTTP proxy), built with the options the HTTP client gets."""

    def __init__(self, app_name: str) -> None:
        self.app_name = app_name

    def client(self, **options: Any) -> Any:
        from trainer_client.reward_client import RayClientSettings, RayRewardClient

        return RayRewardClient(RayClientSettings(app_name=self.app_name, reply_timeout_s=600,
                                                 **options))


def handle_figures(p: dict[str, Any], plain: tuple[dict[str, Any], dict[str, Any]],
                    n: int) -> dict[str, Any]:
    """The handle client's pass against the plain service's passes before and after it: CPU
    ratio = plain CPU per item / handle CPU per item, the service's processes only (the
    target) and with each caller's own CPU added; the bracket is the ratio against each."""
    per = cpu_per_item(p, n)
    with_client = per + p["client_cpu_s"] * 1000 / n
    ratios = [cpu_per_item(x, n) / per for x in plain]
    return {"items_s": p["items_s"], "plain_items_s": [x["items_s"] for x in plain],
            "ratio": p["items_s"] / statistics.mean(x["items_s"] for x in plain),
            "cpu_ms_per_item": per, "client_cpu_ms_per_item": p["client_cpu_s"] * 1000 / n,
            "plain_cpu_ms_per_item": [cpu_per_item(x, n) for x in plain],
            "plain_client_cpu_ms_per_item": [x["client_cpu_s"] * 1000 / n for x in plain],
            "cpu_ratio": statistics.median(ratios), "cpu_ratio_bracket": [min(ratios), max(ratios)],
            "cpu_ratio_with_client": statistics.median(
                (cpu_per_item(x, n) + x["client_cpu_s"] * 1000 / n) / with_client for x in plain),
            "cpu_s": p["cpu_s"], "seconds": p["seconds"], "workers_busy": busy(p),
            "mismatches": sum(a != b for a, b in zip(p["verdicts"], plain[0]["verdicts"],
                                                     strict=True))}


def handle_report(r: dict[str, Any], patterns: list[str]) -> list[str]:
    if "handle_client_defaults" not in r:
        return []
    lines = ["", "Through the deployment handle (`RayRewardClient`, no HTTP proxy), each pattern on "
             "fresh replicas, against the two plain passes; CPU ratio = plain CPU per item / "
             "handle CPU per item, the services' processes (target ≥ 0.85), bracket = against "
             "each plain pass; \"with callers\" adds each caller's own CPU (httpx; the handle's "
             "serialisation and Ray's threads in the caller):", "",
             "| client pattern | handle items/s | x plain items/s | CPU ms/item plain (before, "
             "after), handle | CPU ratio [bracket] | caller CPU ms/item plain, handle | CPU ratio "
             "with callers | verdict mismatches |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for prefix, shape in (("handle", "2 replicas x 1 worker"),
                          ("handle1", "1 replica x 2 workers")):
        for name in patterns:
            if f"{prefix}_{name}" in r:
                lines.append(_row(r[f"{prefix}_{name}"], f"{name}, {shape}"))
    return lines


def _row(v: dict[str, Any], label: str) -> str:
    pl, lo_hi = v["plain_cpu_ms_per_item"], v["cpu_ratio_bracket"]
    return (f"| {label} | {v['items_s']:.0f} | {v['ratio']:.2f} | {pl[0]:.3f}, {pl[1]:.3f}, "
            f"{v['cpu_ms_per_item']:.3f} | **{v['cpu_ratio']:.2f}** [{lo_hi[0]:.2f}-{lo_hi[1]:.2f}]"
            f" | {statistics.mean(v['plain_client_cpu_ms_per_item']):.3f}, "
            f"{v['client_cpu_ms_per_item']:.3f} | {v['cpu_ratio_with_client']:.2f} | "
            f"{v['mismatches']} |")
