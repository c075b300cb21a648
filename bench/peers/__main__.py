"""``make bench-peers`` (``python -m bench.peers [--quick]``): the peers section alone; writes
``bench/results/peers.json`` and puts its table in docs/PERFORMANCE.md (replacing the one a
previous run put there)."""

from __future__ import annotations

import argparse
import json
import sys
import time

from bench.base import HAND_MARKER, Context, plain_service, warm_rows
from bench.peers.report import HEADING, report
from bench.peers.run import run
from bench.peers.venvs import ROOT
from tests.helpers import read_jsonl

RESULTS = ROOT / "bench" / "results"
DOC = ROOT / "docs" / "PERFORMANCE.md"


def put_in_doc(text: str) -> None:
    """Replace the peers section of docs/PERFORMANCE.md (from its heading to the next ``## ``
    heading), or add it before the hand-maintained part."""
    doc = DOC.read_text()
    start = doc.find(HEADING)
    if start >= 0:
        end = doc.find("\n## ", start + len(HEADING))
        end = doc.find(HAND_MARKER, start) if end < 0 else end + 1
        doc = doc[:start] + text + "\n" + doc[end:] if end >= 0 else doc[:start] + text
    else:
        at = doc.find(HAND_MARKER)
        doc = doc[:at] + text + "\n" + doc[at:] if at >= 0 else doc + "\n" + text
    DOC.write_text(doc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="200 rows, 120 s cap (a smoke run)")
    ap.add_argument("--rows", type=int, default=None, help="rows (default 2000; --quick 200)")
    ap.add_argument("--cap", type=float, default=None, help="wall-clock cap of a pass, s")
    ap.add_argument("--no-doc", action="store_true", help="leave docs/PERFORMANCE.md alone")
    args = ap.parse_args()
    ctx = Context(rows=[], warm_rows=warm_rows(read_jsonl), quick=args.quick,
                  log=lambda m: print(m, file=sys.stderr, flush=True), service=plain_service)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    figures = {**run(ctx, args.rows, args.cap), "started": started, "quick": args.quick}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "peers.json").write_text(json.dumps(figures, indent=2))
    text = report(figures)
    if not (args.no_doc or args.quick or args.rows):  # only the full run's figures go in the doc
        put_in_doc(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
