"""Long reasoning responses built from the corpus (``python -m bench.long_set [N]``).

The corpus is short GSM8K/MATH answers (~0.4 KB on average); the policies users train write
5-30 KB of reasoning per response. :func:`build` turns real corpus rows into such responses:
the row's problem restated, then reasoning blocks drawn with a fixed seed (restated steps of
the row's own solution, "wait, let me check" passages, intermediate equations in inline and
display math, GSM8K-style calculator annotations, several tentative values that are then
doubted), until the text reaches its size (drawn between 8 and 32 KB), and finally the row's
original solution, which carries its final answer. The padding never says "answer" or
``\\boxed``, so the answer math-verify extracts stays the one the solution ends with.

:func:`verified` keeps an item only when stock math-verify (in a fresh interpreter, its own
timeouts on, gold boxed as the service does) gives the long response the verdict it gives the
original one, so every label is unchanged and checked.
"""

from __future__ import annotations

import json
import random
import re
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["build", "pad", "verified"]

Row = dict[str, Any]

_OPENERS = [
    "Let me work through this carefully before writing anything final.",
    "Okay, let me think about this step by step.",
    "Let me start by understanding what the problem is asking.",
]
_RESTATE = ["So, restating: ", "In other words, ", "Going over this step again: ",
            "Recall that ", "To recap what I have so far: "]
_DOUBT = [
    "Wait, let me check that again.",
    "Hmm, wait. Let me double-check this computation.",
    "Hold on, that doesn't look right. Let me redo this part.",
    "Let me verify this step before moving on.",
    "Actually, wait, I should be careful here.",
]
_TENTATIVE = [
    "So the result might be ${v}$. Hmm, that seems off; let me recheck.",
    "At this point I get {v}, but I am not sure that is correct.",
    "That would give ${v}$... no wait, I think I made an arithmetic slip.",
    "Maybe it is {v}? Let me test this value against the conditions.",
    "Tentatively, the value is \\({v}\\). Let me see if it is consistent.",
]
_EQUATION_WORDS = ["Computing", "Simplifying", "Substituting", "Expanding", "Checking"]
_CLOSE = "\n\nOkay, now let me write the full solution cleanly.\n\n"


def _value(rnd: random.Random) -> str:
    kind = rnd.random()
    if kind < 0.5:
        return str(rnd.randint(2, 9999))
    if kind < 0.75:
        return f"\\frac{{{rnd.randint(1, 99)}}}{{{rnd.randint(2, 99)}}}"
    if kind < 0.9:
        return f"{rnd.randint(0, 999)}.{rnd.randint(1, 99)}"
    return f"{rnd.randint(2, 30)}\\sqrt{{{rnd.choice([2, 3, 5, 6, 7])}}}"


def _equation(rnd: random.Random) -> str:
    a, b = rnd.randint(2, 999), rnd.randint(2, 99)
    op = rnd.choice(["+", "-", "\\cdot", "frac"])
    if op == "frac":
        lhs, rhs = f"\\frac{{{a * b}}}{{{b}}}", str(a)
    else:
        rhs = str(a + b if op == "+" else a - b if op == "-" else a * b)
        lhs = f"{a} {op} {b}"
    word = rnd.choice(_EQUATION_WORDS)
    style = rnd.random()
    if style < 0.4:
        return f"{word}, ${lhs} = {rhs}$."
    if style < 0.7:
        return f"{word}:\n\n\\[\n{lhs} = {rhs}\n\\]\n"
    if style < 0.85:
        plain = lhs.replace("\\cdot", "*")
        if "frac" in plain:
            plain = f"{a * b}/{b}"
        return f"{plain} = <<{plain}={rhs}>>{rhs}"
    x = rnd.choice("xyznk")
    return f"{word}, we get \\({x} = {rhs}\\), so \\({x} + {b} = {int(rhs) + b}\\)."


def _steps(solution: str) -> list[str]:
    """Sentences of the solution that do not state a final answer."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", solution)
    return [p.strip() for p in parts
            if len(p.strip()) > 20 and "boxed" not in p and "answer" not in p.lower()]


def pad(row: Row, size: int, rnd: random.Random) -> str:
    """``row``'s response preceded by reasoning text, about ``size`` characters in all."""
    solution = row["response"]
    steps = _steps(solution) or ["the quantities in the problem have to be combined"]
    out = [rnd.choice(_OPENERS), "\n\n"]
    problem = row.get("problem")
    if problem:
        out += ["The problem says: ", problem, "\n\n"]
    length = sum(map(len, out)) + len(_CLOSE) + len(solution)
    while length < size:
        r = rnd.random()
        if r < 0.3:
            block = rnd.choice(_RESTATE) + rnd.choice(steps)
        elif r < 0.45:
            block = rnd.choice(_DOUBT) + " " + _equation(rnd)
        elif r < 0.75:
            block = _equation(rnd)
        else:
            block = rnd.choice(_TENTATIVE).format(v=_value(rnd))
        block += "\n\n" if rnd.random() < 0.5 else " "
        out.append(block)
        length += len(block)
    out += [_CLOSE, solution]
    return "".join(out)


def build(rows: Sequence[Row], n: int = 192, seed: int = 0, lo_kb: int = 8,
          hi_kb: int = 32) -> list[Row]:
    """``n`` long items from ``rows`` (spread over the corpus, every source), each with the
    row's gold, label and its original response as ``short``."""
    rnd = random.Random(seed)
    picked = rnd.sample(range(len(rows)), n)
    items = []
    for i in picked:
        row = rows[i]
        size = rnd.randint(lo_kb * 1024, hi_kb * 1024)
        items.append({"response": pad(row, size, rnd), "short": row["response"],
                      "gold": row["gold"], "label": row["label"], "row": i,
                      "source": row["source"]})
    return items


_CHILD = r"""
import json, logging, sys
logging.getLogger("math_verify").setLevel(logging.CRITICAL)
from math_verify import parse, verify
import math_verify.parser as p
from sympy import Number
assert p.parse_latex_cached.cache_info().maxsize == 20 and p.Number is Number, "patched"
out = []
for gold, long, short in json.load(sys.stdin):
    g = parse("\\boxed{" + gold + "}" if "\\boxed" not in gold else gold)
    out.append([bool(verify(g, parse(long))), bool(verify(g, parse(short)))])
json.dump(out, sys.stdout)
"""


def verified(items: Sequence[Row]) -> list[Row]:
    """The items whose long response gets stock math-verify's verdict on the original (in a
    fresh interpreter), with that verdict as ``stock``."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=json.dumps([(x["gold"], x["response"], x["short"]) for x in items]),
        capture_output=True, text=True, timeout=1800, check=True)
    verdicts = json.loads(proc.stdout)
    return [{**x, "stock": long} for x, (long, short) in zip(items, verdicts, strict=True)
            if long == short]


def main() -> int:
    from tests.helpers import read_jsonl

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 192
    items = build(read_jsonl("corpus.jsonl"), n)
    kept = verified(items)
    kb = [len(x["response"]) / 1024 for x in kept]
    print(f"{len(kept)} of {len(items)} kept; {min(kb):.1f}-{max(kb):.1f} KB, "
          f"{sum(kb) / len(kb):.1f} KB mean", file=sys.stderr)
    for x in kept:
        print(json.dumps(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
