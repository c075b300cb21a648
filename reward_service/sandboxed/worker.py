"""A sandboxed scoring worker: the loop one forked process runs until EOF on its task pipe.

Forked by the zygote (``zygote.py``) from a warm, single-threaded template, so math-verify is
already imported and exercised. Life:

1. die with the zygote (PDEATHSIG), which itself dies with the server;
2. in probe mode only (tests), import the test-only probes (``probes.py``) while it still can;
3. apply the sandbox (``sandbox.py``); in strict mode refuse to run if a layer is missing;
4. send READY, then score chunks in the main thread, one result frame per item, until EOF.

It never enforces deadlines itself: the supervisor kills it when an item runs too long.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from reward_service import protocol
from reward_service.sandboxed.sandbox import SandboxConfig, apply_sandbox, report_dict
from reward_service.scorers.base import Verdict, clip

__all__ = ["GOLD_PHASE", "PROBE_PREFIX", "WARMUP", "serve"]

ScoreFn = Callable[[str, str, Mapping[str, Any]], Verdict]
ProbeFn = Callable[[str, str], Verdict]  # (name, argument JSON) -> verdict

# Reserved scorer prefix of a test probe (``__probe__:<name>``): see ``probes.py``.
PROBE_PREFIX = "__probe__:"

WARMUP = (
    ("math_verify", "The answer is $\\boxed{\\frac{1}{2}}$.", "0.5"),
    ("math_verify", "So x = 3, i.e. \\boxed{[1, 2) \\cup \\{3\\}}", "[1,2)\\cup\\{3\\}"),
    ("math_verify", "#### 18", "18"),
    ("math_verify", "$x^2+2x+1$ and $\\sqrt{2}\\pi$, so \\boxed{(x+1)^2}", "x^2+2x+1"),
    ("gsm8k", "16 - 3 - 4 = 9 eggs, 9 * 2 = 18\n#### 18", "18"),
    ("numeric", "\\boxed{0.333}", "1/3"),
    ("choice", "The answer is (B).", "B"),
)


class _GoldPhase:
    """Called by the scorers around the parse of a ground truth they have not parsed before
    (``MathVerifyScorer(on_gold_parse=...)``, built in the zygote): in a worker, a ``phase``
    frame to the supervisor, so that a deadline passed while parsing a ground truth is
    blamed on the ground truth (``bad_ground_truth`` for every item that shares it) and not
    on each response in turn. A no-op in the zygote (no result pipe yet)."""

    fd: int | None = None
    seq: int = -1

    def __call__(self, parsing: bool) -> None:
        if self.fd is not None:
            protocol.write_all(self.fd, protocol.encode(
                {"op": "phase", "seq": self.seq, "phase": "gold" if parsing else "item"}))


GOLD_PHASE = _GoldPhase()


def _score_one(scorers: Mapping[str, ScoreFn], probe: ProbeFn | None, item: list[Any]) -> Verdict:
    _, scorer, response, ground_truth, params = item
    if scorer.startswith(PROBE_PREFIX):
        if probe is None:
            return Verdict("error", reason="probes are disabled")
        return probe(scorer[len(PROBE_PREFIX) :], response)
    fn = scorers.get(scorer)
    if fn is None:
        return Verdict("error", reason=f"unknown scorer {clip(scorer, 50)!r}")
    try:
        return fn(response, ground_truth, params)
    except MemoryError:
        return Verdict("error", reason="memory limit reached")
    except RecursionError:
        return Verdict("error", reason="recursion limit reached")
    except Exception as exc:
        return Verdict("error", reason=clip(f"{type(exc).__name__}: {exc}"))


def serve(
    in_fd: int,
    out_fd: int,
    scorers: Mapping[str, ScoreFn],
    sandbox: SandboxConfig,
    *,
    parent_pid: int,
    probes: bool = False,
) -> int:
    """Sandbox this process, announce READY, score until EOF. Returns the exit code."""
    # test-only code is loaded only in probe mode, and before the sandbox forbids nothing yet
    probe = importlib.import_module("reward_service.sandboxed.probes").verdict if probes else None
    report, refusal = apply_sandbox(sandbox, parent_pid, keep_fds=(in_fd, out_fd))
    if refusal:
        protocol.write_all(out_fd, protocol.encode({"op": "fatal", "reason": refusal}))
        return 3
    ready = {"op": "ready", "pid": os.getpid(), "sandbox": report_dict(report)}
    protocol.write_all(out_fd, protocol.encode(ready))
    GOLD_PHASE.fd = out_fd
    while True:
        msg = protocol.read_frame(in_fd)
        if msg is None:
            return 0
        if msg.get("op") != "score":
            continue
        for item in msg["items"]:
            GOLD_PHASE.seq = item[0]
            t0 = time.perf_counter()
            verdict = _score_one(scorers, probe, item)
            elapsed = time.perf_counter() - t0
            protocol.write_all(
                out_fd,
                protocol.encode(
                    {
                        "op": "result",
                        "seq": item[0],
                        "status": verdict.status,
                        "extracted": verdict.extracted,
                        "extracted_gold": verdict.extracted_gold,
                        "reason": verdict.reason,
                        "elapsed_s": elapsed,
                        "credit": verdict.credit,
                    }
                ),
            )
