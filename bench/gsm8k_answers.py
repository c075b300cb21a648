"""Read GSM8K eval files and say what the answers look like, step by step.

    python -m bench.gsm8k_answers runs/smollm2-gsm8k/eval/step_0.jsonl runs/smollm2-gsm8k/eval/step_44.jsonl

Prints one markdown table, a column per eval file (``eval/step_<N>.jsonl`` as the trainer writes
them: one greedy record per held-out problem): accuracy, how many answers were cut at the token
limit, how many write ``####``, mean length, accuracy on complete answers, and the arithmetic
the answers do: the ``a op b = c`` lines an answer writes and how many of them are right, and how
many final answers are a number copied from the question. The figures in docs/trainer.md's GSM8K
section come from it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_NUM = r"-?\$?\d[\d,]*(?:\.\d+)?"
_EQUATION = re.compile(rf"({_NUM})\s*([+\-*/x\u00d7\u00f7])\s*({_NUM})\s*=\s*({_NUM})")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _value(text: str) -> float | None:
    try:
        return float(text.replace("$", "").replace(",", ""))
    except ValueError:
        return None


def _equation_right(a: float, op: str, b: float, c: float) -> bool:
    if op == "+":
        got = a + b
    elif op == "-":
        got = a - b
    elif op in "*x\u00d7":  # x and the multiplication sign
        got = a * b
    else:
        if b == 0:
            return False
        got = a / b
    return abs(got - c) <= 1e-6 * max(1.0, abs(c))


@dataclass
class Summary:
    problems: int = 0
    correct: int = 0
    cut: int = 0
    marked: int = 0
    tokens: int = 0
    complete: int = 0
    complete_correct: int = 0
    equations: int = 0
    equations_right: int = 0
    copied: int = 0

    def add(self, record: dict) -> None:
        response = str(record.get("response", ""))
        self.problems += 1
        self.correct += bool(record.get("correct"))
        self.cut += not record.get("finished", True)
        self.marked += "####" in response
        self.tokens += int(record.get("tokens", 0))
        if record.get("complete"):
            self.complete += 1
            self.complete_correct += bool(record.get("correct"))
        for a, op, b, c in _EQUATION.findall(response):
            left, right, result = _value(a), _value(b), _value(c)
            if left is None or right is None or result is None:
                continue
            self.equations += 1
            self.equations_right += _equation_right(left, op, right, result)
        extracted = _value(str(record.get("extracted") or ""))
        question_numbers = {_value(n) for n in _NUMBER.findall(str(record.get("question", "")))}
        self.copied += extracted is not None and extracted in question_numbers

    def rows(self) -> list[tuple[str, str]]:
        n = max(self.problems, 1)
        return [
            ("greedy accuracy", f"{self.correct / n:.3f}"),
            ("cut at the token limit", f"{self.cut} ({self.cut / n:.3f})"),
            ("writes `####`", str(self.marked)),
            ("mean response tokens", f"{self.tokens / n:.1f}"),
            (
                "accuracy on complete answers",
                f"{self.complete_correct}/{self.complete} = "
                f"{self.complete_correct / max(self.complete, 1):.3f}",
            ),
            ("`a op b = c` lines per answer", f"{self.equations / n:.2f}"),
            (
                "of those, arithmetic right",
                f"{self.equations_right}/{self.equations} = "
                f"{self.equations_right / max(self.equations, 1):.2f}",
            ),
            ("final answer is a number copied from the question", str(self.copied)),
        ]


def summarize(path: Path) -> Summary:
    summary = Summary()
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                summary.add(json.loads(line))
    return summary


def table(paths: Sequence[Path]) -> str:
    summaries = [summarize(p) for p in paths]
    header = "| eval | " + " | ".join(p.stem for p in paths) + " |"
    lines = [header, "|---|" + "---|" * len(paths)]
    columns = [s.rows() for s in summaries]
    for i, (name, _) in enumerate(columns[0]):
        lines.append(f"| {name} | " + " | ".join(col[i][1] for col in columns) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("eval_files", nargs="+", type=Path, help="eval/step_<N>.jsonl files")
    args = parser.parse_args(argv)
    sys.stdout.write(table(args.eval_files) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
