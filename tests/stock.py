"""Stock math-verify verdicts computed in a fresh interpreter.

The test process imports ``reward_service.scorers.impl`` (golden and scorer tests do), which
installs the worker's memos and shortcuts into math-verify for the whole process. A parity
check against the library must therefore ask an interpreter that never imported them; this
one also asserts that its math-verify is untouched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

_CHILD = r"""
import json, sys
from math_verify import parse, verify
import math_verify.parser as p
from sympy import Number
assert p.parse_latex_cached.cache_info().maxsize == 20 and p.Number is Number, "patched"
boxed = sys.argv[1] == "1"
out = []
for gold, pred in json.load(sys.stdin):
    if boxed and "\\boxed" not in gold:
        gold = "\\boxed{" + gold + "}"
    out.append(bool(verify(parse(gold), parse(pred))))
json.dump(out, sys.stdout)
"""


def stock_verdicts(pairs: Sequence[tuple[str, str]], *, box_gold: bool = True) -> list[bool]:
    """``verify(parse(gold), parse(pred))`` with the library's defaults (its own timeouts on),
    the gold wrapped in ``\\boxed{}`` as the service does unless ``box_gold`` is false."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, "1" if box_gold else "0"],
        input=json.dumps(list(pairs)), capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    verdicts: list[bool] = json.loads(proc.stdout)
    assert len(verdicts) == len(pairs)
    return verdicts
