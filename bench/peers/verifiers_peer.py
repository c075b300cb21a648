"""``verifiers`` 0.4.0's math scorer raced in N processes, one per core, each calling it in its
main thread (``verifiers_worker.py``, run by the peer's own venv): fresh processes, each warmed
first, the rows dealt between them (row i to process i mod N), started together.

verifiers has no server and no timeout of its own beyond math-verify's ``signal.alarm`` (5 s
for each parse and the verify), and ``verify_boxed_math_answer`` catches every exception: an
item whose alarm fired comes back 0.0 like a wrong answer. Items that came back 0.0 after at
least ``TIMEOUT_S`` are counted as ``timeout`` (its own alarm fired; the caller sees a verdict
of 0). A process that dies (the kernel's OOM killer, a crash in C) fails the item it was on
(``error``) and leaves the rest of its share ``unanswered``; a pass cut at its wall-clock cap
leaves whatever was not scored ``unanswered``.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.peers.items import Answer, Pass, Row
from bench.peers.venvs import PeerVenv

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 5.0  # verify_boxed_math_answer(timeout_seconds=5), its default


class _Racer:
    """One worker process and the lines it has printed so far (read by a thread)."""

    def __init__(self, venv: PeerVenv, job: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([str(venv.python), "-I", str(HERE / "verifiers_worker.py"),
                                      str(job)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, text=True)
        self.lines: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.finished = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("ready"):
                self.ready.set()
            else:
                self.lines.append(msg)
        self.finished.set()  # stdout closed: the process ended (or was killed)
        self.ready.set()

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.finished.wait(10)


def race(venv: PeerVenv, rows: Sequence[Row], warm: Sequence[Row], procs: int,
         cap_s: float) -> Pass:
    """One pass: ``procs`` fresh processes score ``rows`` (dealt round-robin); the rate is the
    sum of each process's own rate (as ``bench/scenarios.in_process_pair`` adds them)."""
    with tempfile.TemporaryDirectory(prefix="peers-vf-") as tmp:
        racers = []
        for k in range(procs):
            job = Path(tmp) / f"job{k}.json"
            job.write_text(json.dumps({"items": [[r["response"], r["gold"]] for r in rows[k::procs]],
                                       "warm": [[r["response"], r["gold"]] for r in warm]}))
            racers.append(_Racer(venv, job))
        try:
            for r in racers:
                if not r.ready.wait(600) or r.finished.is_set():
                    raise RuntimeError(f"verifiers worker did not start (exit {r.proc.poll()})")
            t0 = time.monotonic()
            for r in racers:
                r.go()
            deadline = t0 + cap_s
            for r in racers:
                r.finished.wait(max(0.0, deadline - time.monotonic()))
            wall = time.monotonic() - t0
            ended = [r.finished.is_set() for r in racers]  # before the cap: done, or died
        finally:
            for r in racers:
                r.stop()
    answers: list[Answer] = [Answer("unanswered")] * len(rows)
    rate = 0.0
    died = []
    for k, (r, ended_itself) in enumerate(zip(racers, ended, strict=True)):
        share = range(k, len(rows), procs)
        got = {m["i"]: m for m in r.lines if "i" in m}
        start = next((m["start"] for m in r.lines if "start" in m), None)
        end = next((m["end"] for m in r.lines if "end" in m), None)
        for j, i in enumerate(share):
            m = got.get(j)
            if m is None:
                answers[i] = Answer("unanswered", detail=f"no answer within {cap_s:.0f} s")
                continue
            timed_out = m["score"] == 0.0 and m["s"] >= TIMEOUT_S
            answers[i] = Answer("timeout" if timed_out else "verdict",
                                correct=None if timed_out else m["score"] == 1.0,
                                extracted=m["extracted"], seconds=m["s"])
        if end is None and ended_itself:  # died on its own before the cap
            died.append(r.proc.returncode)
            lost = next((i for j, i in enumerate(share) if j not in got), None)
            if lost is not None:
                answers[lost] = Answer("error", detail=f"process died ({r.proc.returncode})")
        if start is not None and got:
            last = end if end is not None else start + sum(m["s"] for m in got.values())
            rate += len(got) / max(last - start, 1e-9)
    return Pass(answers, wall, rate_items_s=rate,
                notes={"processes": procs, "cut_at_cap": not all(ended), "died": died})
