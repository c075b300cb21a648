"""Extract Math-Verify 0.9.0's own test cases into ``math_verify_cases.jsonl``.

    $ pip download --no-deps --no-binary :all: math-verify==0.9.0 -d /tmp/mvsdist
    $ tar xzf /tmp/mvsdist/math_verify-0.9.0.tar.gz -C /tmp/mvsdist
    $ python tests/golden/extract_math_verify_cases.py /tmp/mvsdist/math_verify-0.9.0/tests

Reads the test modules with ``ast`` (nothing is imported or run) and keeps every
``@pytest.mark.parametrize`` row of a test whose body is ``compare_strings(gold, pred, ...)``
or ``verify(parse(gold), parse(pred))``, with its expected verdict.

Kept only when the comparison settings are the library's defaults: ``precision`` (their
``float_rounding``) 6, ``strict=True``, ``allow_set_relation_comp=False``. Their extraction
settings are NOT the defaults (``compare_strings`` uses ``boxed_match_priority=0`` and
sometimes only the latex or only the expr extractor); we record them in ``their_config`` but
replay every case with default extraction, as the service does, and the test compares our
count right with stock math-verify's count under the same defaults, not with 100%.

Skipped (and counted in the summary this script prints): rows whose values are not literals
(f-strings), other precisions, ``strict=False``, ``allow_set_relation_comp=True``,
``test_set_rel_assymetry`` (a test of that flag: its 4 rows expect what the flag says, and
the ``math`` profile deliberately compares an inequality answer with a set gold), and the
modules that test other things (string extraction, timeouts, raise_on_error, configs).
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

OUT = Path(__file__).with_name("math_verify_cases.jsonl")
# the rows skipped for their comparison settings, kept for docs/CORRECTNESS.md's judgements
OTHERS = Path(__file__).with_name("math_verify_cases_other_settings.jsonl")
# Tests of a comparison flag rather than of mathematics: their expected verdicts are the
# flag's, and the math profile deliberately compares an inequality answer with a set gold
# (as the flag would), so neither setting is "the" right verdict for it.
SKIP_FUNCTIONS = {"test_set_rel_assymetry": "tests the allow_set_relation_comp flag"}
SKIP_MODULES = {
    "test_string_extraction.py",  # StringExtractionConfig (letters), not our extraction
    "test_timeout.py",
    "test_raise_on_error.py",
    "test_configs.py",
}


def _kw(call: ast.Call, name: str, default: object, values: dict) -> object:
    """A keyword of the comparison call: a literal, or a parametrize column by that name."""
    for k in call.keywords:
        if k.arg == name:
            if isinstance(k.value, ast.Name):
                return values[k.value.id]
            return ast.literal_eval(k.value)
    return default


def _comparison(fn: ast.FunctionDef) -> tuple[str, ast.Call] | None:
    for node in ast.walk(fn):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "compare_strings":
                return "compare_strings", node
            if node.func.id == "verify" and node.args and isinstance(node.args[0], ast.Call):
                return "verify", node
    return None


def extract(tests_dir: Path, others: list[dict] | None = None) -> tuple[list[dict], dict[str, int]]:
    """The cases with default comparison settings, and what was skipped (counts); the skipped
    rows themselves go to ``others`` (with ``their_settings``) when a list is given."""
    cases: list[dict] = []
    skipped: dict[str, int] = {}
    others = [] if others is None else others
    for path in sorted(tests_dir.glob("test_*.py")):
        if path.name in SKIP_MODULES:
            skipped[f"module {path.name}"] = 1
            continue
        tree = ast.parse(path.read_text())
        for fn in tree.body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            skip_function = SKIP_FUNCTIONS.get(fn.name)
            comparison = _comparison(fn)
            params = [
                d for d in fn.decorator_list
                if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("parametrize")
            ]
            if comparison is None or not params:
                continue
            kind, call = comparison
            names = [n.strip() for n in ast.literal_eval(params[0].args[0]).split(",")]
            config = {"call": kind}
            if kind == "compare_strings":
                config["match_types"] = _kw(call, "match_types", ["latex", "expr"], {})
                config["boxed_match_priority"] = 0
            for row in params[0].args[1].elts:  # type: ignore[attr-defined]
                where = f"{path.name}::{fn.name}"
                try:
                    values = dict(zip(names, ast.literal_eval(row), strict=True))
                except ValueError:
                    skipped[f"{where} (not a literal)"] = skipped.get(f"{where} (not a literal)", 0) + 1
                    continue
                precision = _kw(call, "precision", 6, values)
                strict = _kw(call, "strict", True, values)
                set_rel = _kw(call, "allow_set_relation_comp", False, values)
                reason = skip_function
                if reason:
                    pass
                elif precision != 6:
                    reason = f"precision={precision}"
                elif strict is not True:
                    reason = "strict=False"
                elif set_rel:
                    reason = "allow_set_relation_comp=True"
                expected = values.get("expected", values.get("result"))
                case = {
                    "gold": values["gold"],
                    "pred": values["pred"],
                    "expected": bool(expected),
                    "source": f"math-verify 0.9.0 sdist tests/{where}",
                    "their_config": config,
                }
                if reason:
                    skipped[f"{where} ({reason})"] = skipped.get(f"{where} ({reason})", 0) + 1
                    others.append({**case, "their_settings": reason})
                    continue
                cases.append(case)
    return cases, skipped


def main() -> None:
    tests_dir = Path(sys.argv[1])
    others: list[dict] = []
    cases, skipped = extract(tests_dir, others)
    with OTHERS.open("w") as fh:
        for c in others:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    with OUT.open("w") as fh:
        for c in cases:
            fh.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases -> {OUT}")
    for what, n in sorted(skipped.items()):
        print(f"skipped {n:3d}  {what}")


if __name__ == "__main__":
    main()
