"""Build sympy's ``parse_expr`` namespace once instead of on every call.

``sympy.parsing.sympy_parser.parse_expr`` runs ``exec("from sympy import *")`` whenever it is
called without ``global_dict``, and math-verify (and latex2sympy2_extended) call it that way
for every number they convert: about half of a worker's time on GSM8K-style rows. We build
the very same namespace once (the code below mirrors sympy's) and hand each call a fresh
shallow copy, so no call can see another's names. The verdicts are unchanged: the parity test
and ``bench.throughput`` compare them with stock math-verify item by item.
"""

from __future__ import annotations

import builtins
import types
from typing import Any

import latex2sympy2_extended.latex2sympy2 as _l2s
import math_verify.parser as _mv_parser
from sympy import Max, Min
from sympy.parsing import sympy_parser

__all__ = ["install"]

_original = sympy_parser.parse_expr
_NAMESPACE: dict[str, Any] = {}


def _build() -> dict[str, Any]:
    ns: dict[str, Any] = {}
    exec("from sympy import *", ns)
    for name, obj in vars(builtins).items():
        if isinstance(obj, types.BuiltinFunctionType):
            ns[name] = obj
    ns["max"] = Max
    ns["min"] = Min
    return ns


def parse_expr(
    s: str,
    local_dict: dict[str, Any] | None = None,
    transformations: Any = sympy_parser.standard_transformations,
    global_dict: dict[str, Any] | None = None,
    evaluate: bool = True,
) -> Any:
    if global_dict is None:
        global_dict = _NAMESPACE.copy()
    return _original(s, local_dict, transformations, global_dict, evaluate)


def install() -> None:
    """Route every ``parse_expr`` call (sympy's ``sympify``, math-verify, latex2sympy2) through
    the cached namespace. Called once per worker process."""
    if not _NAMESPACE:
        _NAMESPACE.update(_build())
    sympy_parser.parse_expr = parse_expr  # sympify() imports it from here on each call
    _mv_parser.parse_expr = parse_expr  # type: ignore[attr-defined]
    _l2s.parse_expr = parse_expr  # type: ignore[attr-defined]
