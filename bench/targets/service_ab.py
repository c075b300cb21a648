"""The whole service at two revisions, A/B, on the shuffled corpus (issue 40's drift question).

    $ python -m bench.targets.service_ab --a a9b89b3^ --b a9b89b3          # 5 pairs, 3,000 rows
    $ python -m bench.targets.service_ab --a main --b HEAD --pairs 7 --rows 6526

Each revision's tree is exported with ``git archive`` into a temporary folder and served from
there (``python -m reward_service serve``, that tree first on ``PYTHONPATH``: its own server,
pool and scorers), 2 workers, verdict cache off, on a loopback port. ``--pairs`` pairs of
passes, alternating which side goes first (ABBA...), each pass on a freshly started service,
warmed with the 675 OlympiadBench reference solutions as every bench pass is, then the rows
(the first and last ``--rows / 2`` corpus rows, shuffled, seed 0) in 512-item requests one
after another through ``RewardClient``, scorer ``math``. Printed: items/s of every pass and
B ÷ A per pair, median [min, max]: passes run next to each other share the machine's state,
so a difference larger than the pairs' spread is the code's, not this VM's drift.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

import httpx

from bench import scenarios as sc
from bench.base import warm_rows
from tests.helpers import ROOT, free_port, read_jsonl

BATCH = 512


class TreeService:
    """``python -m reward_service serve`` from the tree at ``path`` (started with ``with``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.url = f"http://127.0.0.1:{free_port()}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> TreeService:
        port = self.url.rsplit(":", 1)[1]
        env = {**os.environ, "PYTHONPATH": str(self.path), "REWARD_HOST": "127.0.0.1",
               "REWARD_PORT": port, "REWARD_WORKERS": "2", "REWARD_SPARES": "1",
               "REWARD_CACHE_ITEMS": "0", "REWARD_MAX_ITEMS": "16384",
               "REWARD_LOG_LEVEL": "warning"}
        self.proc = subprocess.Popen([sys.executable, "-m", "reward_service", "serve"],
                                     cwd=self.path, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(self.url + "/readyz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"service of {self.path} did not come up")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def export(rev: str, into: Path) -> Path:
    """``rev``'s tree (``reward_service`` and what it needs to start) in ``into``."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "reward_service"],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(tar)) as t:
        t.extractall(into, filter="data")
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="revision A (e.g. the commit before a change)")
    ap.add_argument("--b", required=True, help="revision B")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--rows", type=int, default=3000)
    args = ap.parse_args()
    corpus = read_jsonl("corpus.jsonl")
    half = args.rows // 2
    picked = corpus[:half] + corpus[-(args.rows - half):]
    rows = [{"response": r["response"], "gold": r["gold"]} for r in picked]
    random.Random(0).shuffle(rows)
    warm = warm_rows(read_jsonl)
    rates: dict[str, list[float]] = {"a": [], "b": []}
    with tempfile.TemporaryDirectory(prefix="service-ab-") as tmp:
        os.chmod(tmp, 0o755)  # the sandboxed workers run as another uid
        trees = {k: export(getattr(args, k), Path(tmp) / k) for k in ("a", "b")}
        for i in range(args.pairs):
            for side in ("ab" if i % 2 == 0 else "ba"):
                with TreeService(trees[side]) as svc:
                    sc.service_throughput(svc, warm, BATCH, timeout_s=10.0, scorer="math")
                    got = sc.service_throughput(svc, rows, BATCH, scorer="math")["items_s"]
                rates[side].append(got)
                print(f"pair {i + 1} {side.upper()} ({getattr(args, side)}): {got:.0f} items/s",
                      flush=True)
    ratios = [b / a for a, b in zip(rates["a"], rates["b"], strict=True)]
    print(f"A {args.a}: median {statistics.median(rates['a']):.0f} items/s "
          f"[{min(rates['a']):.0f}-{max(rates['a']):.0f}]; B {args.b}: median "
          f"{statistics.median(rates['b']):.0f} [{min(rates['b']):.0f}-{max(rates['b']):.0f}]; "
          f"B ÷ A per pair: median {statistics.median(ratios):.3f} "
          f"[{min(ratios):.3f}-{max(ratios):.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
