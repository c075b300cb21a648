"""Greedy accuracy of one or more models on the same problems, scored by the service.

Used by ``grpo-eval`` for the "before vs after RL" table::

    grpo-eval --model runs/tiny-cpu/base_model \\
              --model runs/tiny-cpu/checkpoints/step_000250/model --config configs/tiny-cpu.yaml
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from trainer_client.data import Problem, render_prompt
from trainer_client.metrics import reward_metrics
from trainer_client.model.rollout import EngineSettings, SamplingSettings, make_engine
from trainer_client.reward_client import RewardClient, ScoreItem
from trainer_client.trainer import allowed_token_ids, score_with_wait

__all__ = ["EvalSettings", "ModelScore", "evaluate_model", "format_table"]


@dataclass(frozen=True, kw_only=True)
class EvalSettings:
    max_new_tokens: int = 512
    allowed_chars: str | None = None  # restrict outputs as in training
    template: str = "plain"
    use_chat_template: bool = False
    system_prompt: str | None = None
    batch_size: int = 32  # prompts per generate call
    max_wait_s: float = 120.0  # wait this long for an unreachable service, then give up


@dataclass(frozen=True)
class ModelScore:
    model: str
    n: int
    accuracy: float
    status: dict[str, float]  # fraction per status (incl. "unavailable")
    correct: tuple[bool, ...] = ()  # per problem, in the order given: scored `correct`


def evaluate_model(model_path: str, problems: Sequence[Problem], client: RewardClient,
                   settings: EvalSettings, engine: EngineSettings) -> ModelScore:
    """Greedy-decode every problem with ``model_path`` and score it through ``client``."""
    eng = make_engine(model_path, engine)
    try:
        tok = eng.tokenizer  # type: ignore[attr-defined]
        sampling = SamplingSettings(n=1, max_new_tokens=settings.max_new_tokens, greedy=True,
                                    allowed_token_ids=allowed_token_ids(tok,
                                                                        settings.allowed_chars))
        items: list[ScoreItem] = []
        for i in range(0, len(problems), settings.batch_size):
            chunk = problems[i:i + settings.batch_size]
            prompts = [render_prompt(p, tok, template=settings.template,
                                     use_chat_template=settings.use_chat_template,
                                     system_prompt=settings.system_prompt) for p in chunk]
            for p, g in zip(chunk, eng.generate(prompts, sampling), strict=True):
                items.append(ScoreItem(response=g[0].text, ground_truth=p.ground_truth,
                                       scorer=p.scorer, data_source=p.data_source, id=p.id))
    finally:
        eng.close()
    results, _ = score_with_wait(client, items, max_wait_s=settings.max_wait_s, backoff_s=2.0,
                                 stop=threading.Event())
    _, m = reward_metrics(results, prefix="eval")
    status = {k.removeprefix("eval/status/"): v for k, v in m.items()
              if k.startswith("eval/status/")}
    return ModelScore(model=model_path, n=len(items), accuracy=status["correct"], status=status,
                      correct=tuple(r is not None and r.status == "correct" for r in results))


def format_table(scores: Sequence[ModelScore]) -> str:
    """A plain-text table, one row per model."""
    cols = ["correct", "incorrect", "no_answer", "timeout", "error", "unavailable"]
    width = max([len("model")] + [len(s.model) for s in scores])
    head = f"{'model':<{width}}  {'n':>5}  {'accuracy':>8}  " + "  ".join(
        f"{c:>11}" for c in cols)
    lines = [head, "-" * len(head)]
    for s in scores:
        lines.append(f"{s.model:<{width}}  {s.n:>5}  {s.accuracy:>8.3f}  " + "  ".join(
            f"{s.status.get(c, 0.0):>11.3f}" for c in cols))
    return "\n".join(lines)
