"""A sandboxed scoring worker: ``python -m reward_service.worker CONFIG_JSON``.

Started by the supervisor (``pool.py``) as a fresh interpreter (never a fork of the threaded
server), in its own session so the supervisor can SIGKILL its process group. Life:

1. die with the parent (PDEATHSIG), import every scorer and warm it up while still able to;
2. apply the sandbox (``sandbox.py``); in strict mode refuse to run if a layer is missing;
3. send READY, then score chunks in the main thread, one result frame per item, until EOF.

It never enforces deadlines itself: the supervisor kills it when an item runs too long.
"""

from __future__ import annotations

import gc
import os
import sys
import time
from typing import Any

import orjson

from reward_service import protocol
from reward_service.probes import PROBE_PREFIX, run_probe
from reward_service.sandbox import SandboxConfig, apply_sandbox, report_dict, set_parent_death_signal
from reward_service.scorers.base import Verdict, clip

__all__ = ["main"]

_WARMUP = (
    ("math_verify", "The answer is $\\boxed{\\frac{1}{2}}$.", "0.5"),
    ("math_verify", "So x = 3, i.e. \\boxed{[1, 2) \\cup \\{3\\}}", "[1,2)\\cup\\{3\\}"),
    ("math_verify", "#### 18", "18"),
    ("gsm8k", "16 - 3 - 4 = 9 eggs, 9 * 2 = 18\n#### 18", "18"),
    ("numeric", "\\boxed{0.333}", "1/3"),
    ("choice", "The answer is (B).", "B"),
)


def _verdict_frame(seq: int, verdict: Verdict, elapsed: float) -> bytes:
    return protocol.encode(
        {
            "op": "result",
            "seq": seq,
            "status": verdict.status,
            "extracted": verdict.extracted,
            "extracted_gold": verdict.extracted_gold,
            "reason": verdict.reason,
            "elapsed_s": elapsed,
        }
    )


def _score_one(scorers: dict[str, Any], probes: bool, item: list[Any]) -> Verdict:
    _, scorer, response, ground_truth, params = item
    if scorer.startswith(PROBE_PREFIX):
        if not probes:
            return Verdict("error", reason="probes are disabled")
        blocked, detail = run_probe(scorer[len(PROBE_PREFIX) :])
        return Verdict("correct" if blocked else "incorrect", reason=detail)
    fn = scorers.get(scorer)
    if fn is None:
        return Verdict("error", reason=f"unknown scorer {clip(scorer, 50)!r}")
    try:
        return fn(response, ground_truth, params)  # type: ignore[no-any-return]
    except MemoryError:
        return Verdict("error", reason="memory limit reached")
    except RecursionError:
        return Verdict("error", reason="recursion limit reached")
    except Exception as exc:
        return Verdict("error", reason=clip(f"{type(exc).__name__}: {exc}"))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cfg = orjson.loads(args[0])
    in_fd, out_fd, parent = cfg["in_fd"], cfg["out_fd"], cfg["parent_pid"]
    set_parent_death_signal(parent)

    from reward_service.scorers.impl import build_scorers  # heavy: math-verify, sympy

    scorers = build_scorers()
    for scorer, response, gold in _WARMUP:
        scorers[scorer](response, gold, {})
    gc.collect()
    gc.freeze()  # the warm heap is long-lived: keep the collector off it

    sandbox_cfg = SandboxConfig(**cfg["sandbox"])
    report, refusal = apply_sandbox(sandbox_cfg, parent)
    if refusal:
        protocol.write_all(out_fd, protocol.encode({"op": "fatal", "reason": refusal}))
        return 3
    protocol.write_all(
        out_fd, protocol.encode({"op": "ready", "pid": os.getpid(),
                                 "sandbox": report_dict(report)})
    )
    probes = bool(cfg.get("probes", False))
    while True:
        msg = protocol.read_frame(in_fd)
        if msg is None:
            return 0
        if msg.get("op") != "score":
            continue
        for item in msg["items"]:
            t0 = time.perf_counter()
            verdict = _score_one(scorers, probes, item)
            protocol.write_all(out_fd, _verdict_frame(item[0], verdict, time.perf_counter() - t0))


if __name__ == "__main__":
    sys.exit(main())
