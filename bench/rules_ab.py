"""CPU per item of a profile's rules, this tree against another revision, in one process (A/B).

    $ python -m bench.rules_ab                  # math profile, against main, all corpus rows
    $ python -m bench.rules_ab --base HEAD~3 --scorer gsm8k --pairs 9
    $ python -m bench.rules_ab --base 2a777e4 --pick 65e1910 43f050f --pairs 21  # issue 26

The base revision's ``reward_service`` is exported with ``git archive`` into a temporary
folder and imported as the package ``rs_base`` (its imports renamed), so both sides are the
exact code of their revision, in the same interpreter, on the same process-wide library
patches (``install_patches``, unchanged between them unless the diff says otherwise). Each
side scores every row of ``../shared/data/corpus.jsonl`` once to warm its gold cache; then
``--pairs`` pairs of passes, alternating which side goes first (ABBA...), each pass timed in
CPU seconds (``time.process_time``). Printed: CPU per item of each side (median), and the
ratio new/base per pair as median [min, max]. The ratio of passes run next to each other is
what counts: this VM's speed drifts 20-30% within minutes. Also printed: how many verdicts
(status) differ between the two sides on the rows.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from reward_service.scorers.impl import build_scorers
from reward_service.scorers.patches import install_patches
from tests.helpers import DATA

ROOT = Path(__file__).resolve().parents[1]
CORPUS = DATA / "corpus.jsonl"

Scorer = Callable[[str, str, dict[str, Any]], Any]
# the modules of the process-wide library patches (and what they import): shared when same
PATCH_MODULES = {"patches", "regex_prefilter", "tail_scan", "parse_cache", "fast_parse",
                 "fast_regex", "regex_tree", "sympy_namespace", "warmup"}


def _renamed(text: str) -> str:
    return re.sub(r"\breward_service\b", "rs_base", text)


def base_scorers(rev: str, into: Path, picks: Sequence[str] = ()) -> dict[str, Scorer]:
    """The scorer table of ``rev``'s ``reward_service`` (with the changes of the commits
    ``picks`` applied to it, in order), imported as ``rs_base``.

    A module whose source is the same in both trees (the library patches, unchanged by a
    rules change) is shared, not loaded twice: the process-wide patches are this tree's, and
    a second copy would not recognise their pattern objects (``tail_scan`` tests
    ``isinstance(pattern, Prefiltered)``) and would take slower paths. Only the patch modules
    (:data:`PATCH_MODULES`) are shared; every rule and scorer module is the base's own."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "reward_service"],
                         check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    for pick in picks:  # e.g. a speed-up of the same round that the base should share
        diff = subprocess.run(["git", "-C", str(ROOT), "diff", f"{pick}^", pick, "--",
                               "reward_service"], check=True, capture_output=True).stdout
        subprocess.run(["git", "apply", "-p1"], cwd=into, input=diff, check=True)
    (into / "reward_service").rename(into / "rs_base")
    for path in (into / "rs_base").rglob("*.py"):
        path.write_text(_renamed(path.read_text()))
        mine = ROOT / "reward_service" / path.relative_to(into / "rs_base")
        name = ".".join(path.relative_to(into).with_suffix("").parts)
        shared = sys.modules.get(name.replace("rs_base", "reward_service", 1))
        if path.stem in PATCH_MODULES and shared is not None and mine.exists() \
                and _renamed(mine.read_text()) == path.read_text():
            sys.modules[name] = shared
    sys.path.insert(0, str(into))
    impl = importlib.import_module("rs_base.scorers.impl")
    own = sorted(m for m, mod in sys.modules.items() if mod.__name__.startswith("rs_base."))
    print(f"modules of {rev[:12]} loaded as rs_base: {', '.join(m[8:] for m in own)}")
    table: dict[str, Scorer] = impl.build_scorers()
    return table


def timed(fn: Scorer, rows: list[dict]) -> tuple[float, list[str]]:
    t = time.process_time()
    statuses = [fn(r["response"], r["gold"], {}).status for r in rows]
    return time.process_time() - t, statuses


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="",
                    help="the revision to compare with (default: the merge base of HEAD and main)")
    ap.add_argument("--pick", nargs="*", default=[], metavar="REV",
                    help="commits whose reward_service changes are applied to the base first")
    ap.add_argument("--scorer", default="math")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--rows", type=int, default=0, help="only the first N rows (0: all)")
    args = ap.parse_args()
    install_patches()
    base = args.base or subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
                                       check=True, capture_output=True, text=True).stdout.strip()
    rows = [json.loads(line) for line in CORPUS.open()]
    if args.scorer == "gsm8k":
        rows = [r for r in rows if r["source"].startswith("gsm8k")]
    rows = rows[: args.rows] if args.rows else rows
    with tempfile.TemporaryDirectory() as tmp:
        new = build_scorers()[args.scorer]
        sides = {"base": base_scorers(base, Path(tmp), args.pick)[args.scorer], "new": new}
        verdicts = {name: timed(fn, rows)[1] for name, fn in sides.items()}  # warm-up
        times: dict[str, list[float]] = {"base": [], "new": []}
        for i in range(args.pairs):
            for name in (("base", "new") if i % 2 == 0 else ("new", "base")):
                times[name].append(timed(sides[name], rows)[0])
    ratios = [n / b for n, b in zip(times["new"], times["base"], strict=True)]
    differ = sum(a != b for a, b in zip(verdicts["base"], verdicts["new"], strict=True))
    per_item = {k: statistics.median(v) / len(rows) * 1e6 for k, v in times.items()}
    picked = f" + {' '.join(p[:12] for p in args.pick)}" if args.pick else ""
    print(f"{args.scorer} profile, {len(rows)} corpus rows, {args.pairs} pairs (ABBA), "
          f"base {base[:12]}{picked}")
    print(f"CPU per item: base {per_item['base']:.0f} us, new {per_item['new']:.0f} us")
    print(f"ratio new/base: median {statistics.median(ratios):.3f} "
          f"[min {min(ratios):.3f}, max {max(ratios):.3f}]")
    print(f"verdicts that differ: {differ} of {len(rows)}")


if __name__ == "__main__":
    main()
