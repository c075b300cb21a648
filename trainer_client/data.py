"""Problems for training and evaluation: JSONL loaders, prompt templates, the toy task.

A :class:`Problem` is what the trainer needs: a question, the gold answer sent to the
reward service as ``ground_truth``, and the scorer that judges it.

- GSM8K (``question``, ``answer`` with the gold after ``####``): scorer ``gsm8k``.
- MATH (``question``/``problem``, ``answer``/``solution`` holding a ``\\boxed{}``, or a bare
  answer): scorer ``math``; the gold is the last ``\\boxed{...}`` when there is one.
- The toy task: ``"a+b="`` for single digits, gold ``str(a + b)``, scorer ``numeric``; the
  100 sums are split once (seeded) into train and held-out eval.
- Generated additions (``format: addition``): ``"What is 27 + 82?"`` with operands of
  ``addition_digits`` digits, ``num_problems`` distinct pairs drawn with ``seed``, gold
  ``str(a + b)``, scorer ``gsm8k`` (the answer after ``####``, hedges refused); held out as
  for a JSONL file.

The default scorers are the service's hedge-proof profiles: ``gsm8k`` and ``math`` refuse a
response that commits to several answers ("5 or 6", two different ``\\boxed{}``), where
stock ``math_verify`` pays for "The answer is 5 or 6." when the gold is 5. A policy trained
against a scorer that pays for hedges learns to hedge; ``data.scorer: math_verify`` is still
there for parity with a pipeline that used it.

Batches are a pure function of ``(seed, step)``: resuming at step ``k`` draws exactly the
batch an uninterrupted run would have drawn; nothing about the data needs checkpointing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "PROMPT_TEMPLATES",
    "DataSettings",
    "Problem",
    "boxed_answer",
    "generated_additions",
    "gsm8k_gold",
    "load_jsonl_problems",
    "load_problems",
    "render_prompt",
    "sample_batch",
    "toy_addition",
]

Format = Literal["gsm8k", "math", "toy", "addition"]

#: Templates by name; ``{question}`` is replaced. ``plain`` is for base models and the toy
#: task; the others ask for the answer format the scorer extracts.
PROMPT_TEMPLATES: dict[str, str] = {
    "plain": "{question}",
    "gsm8k": "{question}\nSolve step by step. Put the final answer after '####'.",
    "boxed": "{question}\nPlease reason step by step, and put your final answer within \\boxed{{}}.",
}


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One prompt with its gold answer."""

    id: str
    question: str
    ground_truth: str
    scorer: str  # reward-service scorer: "gsm8k", "math", "numeric", "choice", ...
    data_source: str


@dataclass(frozen=True, kw_only=True)
class DataSettings:
    """Where problems come from and how they become prompts."""

    format: Format = "toy"  # "toy", "gsm8k" or "math"
    train_path: str | None = None  # JSONL (gsm8k/math formats); unused for "toy"
    eval_path: str | None = None  # JSONL for eval (e.g. GSM8K's test split): eval_size of its
    #                               problems drawn with `seed`, in file order, the same each
    #                               run; None: hold out eval_size train rows
    eval_size: int = 20  # held-out problems (toy: sums kept out of training; 0: eval on train)
    eval_max_gold_steps: int | None = None  # GSM8K eval file: keep problems with at most this
    #                                         many calculations; None: as max_gold_steps
    toy_max_sum: int = 18  # toy: keep sums a + b <= this (9: single-digit answers)
    max_train: int | None = None  # keep only the first N training rows
    max_gold_steps: int | None = None  # GSM8K: keep problems whose reference solution has at
    #                                    most this many calculations (``<<...>>``); None: all
    template: str = "plain"  # a key of PROMPT_TEMPLATES
    use_chat_template: bool = False  # wrap in the tokenizer's chat template when it has one
    system_prompt: str | None = None  # system message for the chat template
    scorer: str | None = None  # override the format's default scorer
    seed: int = 0
    num_problems: int = 3000  # addition: distinct problems generated (train + held out)
    addition_digits: int = 2  # addition: digits of each operand


def gsm8k_gold(answer: str) -> str:
    """The gold after ``####`` in a GSM8K answer, without thousands separators."""
    if "####" not in answer:
        raise ValueError(f"no '####' in GSM8K answer: {answer[-80:]!r}")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def boxed_answer(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i = start + len("\\boxed{")
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j]
    return None


def _row_problem(row: dict[str, Any], fmt: Format, idx: int, source: str,
                 scorer: str | None) -> Problem:
    question = row.get("question", row.get("problem"))
    if not isinstance(question, str):
        raise ValueError(f"row {idx}: no 'question'/'problem' field")
    if fmt == "gsm8k":
        gold = gsm8k_gold(str(row["answer"]))
        default_scorer = "gsm8k"
    elif fmt == "math":
        raw = str(row.get("answer", row.get("solution", row.get("final_answer", ""))))
        boxed = boxed_answer(raw)
        gold = boxed if boxed is not None else raw.strip()
        default_scorer = "math"  # hedge-proof; math_verify pays for "5 or 6"
    else:
        raise ValueError(f"format {fmt!r} is not a JSONL format")
    return Problem(id=str(row.get("id", f"{source}-{idx}")), question=question,
                   ground_truth=gold, scorer=scorer or default_scorer, data_source=source)


def load_jsonl_problems(path: str | Path, fmt: Format, *, limit: int | None = None,
                        scorer: str | None = None,
                        max_gold_steps: int | None = None) -> list[Problem]:
    """Read a GSM8K- or MATH-format JSONL file into problems (GSM8K with
    ``max_gold_steps``: only those whose reference solution has at most that many
    ``<<...>>`` calculations)."""
    p = Path(path)
    out: list[Problem] = []
    with p.open(encoding="utf-8") as f:
        for idx, line in enumerate(f):
            if not line.strip():
                continue
            row = json.loads(line)
            if max_gold_steps is not None and (
                    fmt != "gsm8k" or str(row.get("answer", "")).count("<<") > max_gold_steps):
                if fmt != "gsm8k":
                    raise ValueError("data.max_gold_steps applies to GSM8K data only")
                continue
            out.append(_row_problem(row, fmt, idx, p.stem, scorer))
            if limit is not None and len(out) >= limit:
                break
    return out


def toy_addition(*, seed: int = 0, eval_size: int = 20, max_sum: int = 18,
                 scorer: str | None = None) -> tuple[list[Problem], list[Problem]]:
    """Sums ``"a+b="`` of single digits with ``a + b <= max_sum`` (18: all 100; 9: the 55
    with a single-digit answer), split (seeded) into ``(train, held_out)``.
    ``eval_size=0`` evaluates on the training sums themselves."""
    probs = [Problem(id=f"toy-{a}+{b}", question=f"{a}+{b}=", ground_truth=str(a + b),
                     scorer=scorer or "numeric", data_source="toy_addition")
             for a in range(10) for b in range(10) if a + b <= max_sum]
    random.Random(seed).shuffle(probs)
    if eval_size == 0:
        return probs, list(probs)
    return probs[eval_size:], probs[:eval_size]


def generated_additions(*, seed: int, count: int, digits: int = 2,
                        scorer: str | None = None) -> list[Problem]:
    """``count`` distinct problems ``"What is a + b?"`` (``a``, ``b`` of ``digits`` digits),
    a pure function of ``seed``; gold ``str(a + b)``, scorer ``gsm8k`` unless told."""
    lo, hi = 10 ** (digits - 1), 10 ** digits - 1
    k = hi - lo + 1
    space = k * (k + 1) // 2  # unordered pairs: "a + b" and "b + a" are one problem
    if not 0 < count <= space:
        raise ValueError(f"data.num_problems must be in 1..{space} for {digits}-digit operands")
    rng = random.Random(seed)
    pairs: dict[tuple[int, int], tuple[int, int]] = {}
    while len(pairs) < count:
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
        pairs.setdefault((min(a, b), max(a, b)), (a, b))  # never both orders of one sum
    return [Problem(id=f"add-{a}+{b}", question=f"What is {a} + {b}?", ground_truth=str(a + b),
                    scorer=scorer or "gsm8k", data_source="addition")
            for a, b in pairs.values()]


def load_problems(settings: DataSettings) -> tuple[list[Problem], list[Problem]]:
    """``(train, eval)`` problems as the settings say."""
    if settings.format == "toy":
        return toy_addition(seed=settings.seed, eval_size=settings.eval_size,
                            max_sum=settings.toy_max_sum, scorer=settings.scorer)
    steps = settings.max_gold_steps
    if settings.format == "addition":
        train = generated_additions(seed=settings.seed, count=settings.num_problems,
                                    digits=settings.addition_digits, scorer=settings.scorer)
    elif settings.train_path is None:
        raise ValueError(f"data.train_path is required for format {settings.format!r}")
    else:
        train = load_jsonl_problems(settings.train_path, settings.format,
                                    scorer=settings.scorer, max_gold_steps=steps)
    if settings.eval_path is not None:
        eval_steps = (settings.eval_max_gold_steps if settings.eval_max_gold_steps is not None
                      else steps)
        pool = load_jsonl_problems(settings.eval_path, settings.format, scorer=settings.scorer,
                                   max_gold_steps=eval_steps)
        if settings.eval_size > len(pool):
            raise ValueError(f"data.eval_size is {settings.eval_size} but {settings.eval_path} "
                             f"has {len(pool)} problems (after max_gold_steps)")
        picked = sorted(random.Random(settings.seed).sample(range(len(pool)), settings.eval_size))
        evals = [pool[i] for i in picked]
    else:
        rng = random.Random(settings.seed)
        order = list(range(len(train)))
        rng.shuffle(order)
        held = set(order[:settings.eval_size])
        evals = [train[i] for i in sorted(held)]
        train = [p for i, p in enumerate(train) if i not in held]
    if settings.max_train is not None:
        train = train[:settings.max_train]
    if not train:
        raise ValueError("no training problems")
    return train, evals


def render_prompt(problem: Problem, tokenizer: Any, *, template: str = "plain",
                  use_chat_template: bool = False, system_prompt: str | None = None) -> str:
    """The text given to the model: the template, in the chat template when asked and the
    tokenizer has one (``add_generation_prompt=True``)."""
    text = PROMPT_TEMPLATES[template].format(question=problem.question)
    if use_chat_template and getattr(tokenizer, "chat_template", None):
        messages = ([{"role": "system", "content": system_prompt}] if system_prompt else [])
        messages.append({"role": "user", "content": text})
        return str(tokenizer.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=True))
    return text


def sample_batch(problems: Sequence[Problem], batch_size: int, *, seed: int,
                 step: int) -> list[Problem]:
    """The ``batch_size`` problems of training step ``step`` (1-based), a pure function of
    ``(seed, step)``: epochs are seeded permutations walked in order."""
    n = len(problems)
    start = (step - 1) * batch_size
    perms: dict[int, list[int]] = {}
    out = []
    for k in range(start, start + batch_size):
        epoch, pos = divmod(k, n)
        if epoch not in perms:
            perms[epoch] = list(range(n))
            random.Random(seed * 1_000_003 + epoch).shuffle(perms[epoch])
        out.append(problems[perms[epoch][pos]])
    return out

