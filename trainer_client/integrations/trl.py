"""A TRL ``GRPOTrainer`` reward function backed by the reward service.

    from trl import GRPOConfig, GRPOTrainer
    from trainer_client.integrations.trl import make_reward_func

    math_reward = make_reward_func("http://10.0.0.5:8000", answer_key="solution")
    trainer = GRPOTrainer(model=..., reward_funcs=[math_reward], train_dataset=ds, args=...)

The call shape is TRL's own (``trl/trainer/grpo_trainer.py``: ``GRPOTrainer._calculate_rewards``):
``reward_func(prompts=prompts, completions=completions, completion_ids=completion_ids_list,
**reward_kwargs)`` where ``reward_kwargs`` holds every other dataset column as a list (one entry
per completion), ``trainer_state``, and in recent versions ``log_extra`` / ``log_metric``
callables (and ``environments``). Completions are strings, or for conversational datasets lists
of messages ``[{"role": "assistant", "content": ...}]``. The function returns
``list[float | None]``: TRL turns ``None`` into NaN and leaves it out of the reward ("could not
score"), instead of counting it as wrong. TRL runs a function that
``asyncio.iscoroutinefunction`` recognises in its own event loop, concurrently with the
others: ``make_reward_func(..., asynchronous=True)`` returns such a function. TRL names the
reward ``reward_func.__name__`` in its logs (``rewards/<name>/mean``): ``name=`` sets it.

What the function guarantees:

* one reward per completion, in order; ``1.0`` correct, ``0.0`` incorrect or no answer;
* ``None`` for an item the service could not judge (``timeout``, ``error``,
  ``bad_ground_truth``) and for a row whose answer is ``None``;
* a clear exception for a missing answer column, lists of different lengths, answers that are
  all missing, or (with ``on_unavailable="raise"``, the default) an unreachable service after
  the client's retries. ``on_unavailable="none"`` returns all ``None`` instead and logs an
  error; TRL then warns that every reward function returned ``None``.
* with TRL's ``log_extra``, a ``<name>_status`` column in the completions table; with
  ``log_metric``, ``<name>/unscored`` (the fraction of ``None``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from trainer_client.errors import RewardServiceUnavailable
from trainer_client.integrations._common import (
    async_client,
    completion_text,
    ground_truth_text,
    make_settings,
    sync_client,
)
from trainer_client.reward_client import (
    RewardClientSettings,
    ScoreItem,
    ScoreResult,
    reward_or_none,
)

__all__ = ["AsyncRewardFunc", "RewardFunc", "make_reward_func"]

logger = logging.getLogger(__name__)

RewardFunc = Callable[..., list[float | None]]
AsyncRewardFunc = Callable[..., Awaitable[list[float | None]]]

# keyword arguments TRL passes that are not dataset columns
_TRL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments"})


def make_reward_func(
    url: str | Sequence[str] | None = None,
    answer_key: str = "solution",
    *,
    scorer: str | None = None,
    data_source_key: str | None = "data_source",
    api_token: str | None = None,
    timeout_s: float | None = None,
    retry_deadline_s: float | None = None,
    asynchronous: bool = False,
    on_unavailable: Literal["raise", "none"] = "raise",
    name: str = "math_reward",
    settings: RewardClientSettings | None = None,
) -> RewardFunc | AsyncRewardFunc:
    """A TRL reward function scoring each completion against the ``answer_key`` column.

    Args:
        url: service base URL(s); default ``$REWARD_SERVICE_URL``.
        answer_key: dataset column with the ground truth (``solution`` in TRL's math examples).
        scorer: force a scorer (``math_verify``, ``gsm8k``, ``numeric``, ``choice``); default:
            routed by the ``data_source_key`` column when the dataset has it, else math-verify.
        data_source_key: column used for routing, as verl's ``data_source``; ``None`` to ignore.
        api_token: bearer token; default ``$REWARD_SERVICE_TOKEN``.
        timeout_s: per-item scoring deadline sent to the service (its default otherwise).
        retry_deadline_s: give up on an unreachable service after this long (default 120 s).
        asynchronous: return an ``async def`` function (TRL awaits it in its own loop).
        on_unavailable: ``"raise"`` (default) or ``"none"`` when the service cannot be reached.
        name: the function's ``__name__``, which TRL uses in metric names.
        settings: full client settings; overrides ``url``, ``api_token`` and ``timeout_s``.
    """
    if on_unavailable not in ("raise", "none"):
        raise ValueError("on_unavailable must be 'raise' or 'none'")
    cfg = settings or make_settings(url, api_token=api_token, timeout_s=timeout_s,
                                    retry_deadline_s=retry_deadline_s)
    cols = _Columns(name=name, answer_key=answer_key, data_source_key=data_source_key,
                    scorer=scorer, on_unavailable=on_unavailable)
    return _async_reward_func(cols, cfg) if asynchronous else _sync_reward_func(cols, cfg)


@dataclass(frozen=True, kw_only=True)
class _Columns:
    """How one reward function reads TRL's call: which columns hold what, under which name."""

    name: str
    answer_key: str
    data_source_key: str | None
    scorer: str | None
    on_unavailable: Literal["raise", "none"]

    def items(self, prompts: Any, completions: Any,
              kwargs: dict[str, Any]) -> list[ScoreItem | None]:
        """One item per completion; ``None`` for a row whose answer is ``None``."""
        answers, sources = self._check(prompts, completions, kwargs)
        items: list[ScoreItem | None] = []
        for i, (completion, answer) in enumerate(zip(completions, answers, strict=True)):
            if answer is None:
                items.append(None)  # this row has no answer: TRL's "not applicable"
                continue
            items.append(ScoreItem(
                response=completion_text(completion),
                ground_truth=ground_truth_text(answer, f"{self.answer_key}[{i}]"),
                data_source=None if sources is None or sources[i] is None else str(sources[i]),
                scorer=self.scorer,
            ))
        return items

    def _check(self, prompts: Any, completions: Any,
               kwargs: dict[str, Any]) -> tuple[Sequence[Any], Sequence[Any] | None]:
        """The answer and data-source columns, or a clear error for a call that does not fit."""
        name, answer_key, data_source_key = self.name, self.answer_key, self.data_source_key
        if completions is None:
            raise TypeError(f"{name}: TRL passes completions=...; none were given")
        n = len(completions)
        if prompts is not None and len(prompts) != n:
            raise ValueError(f"{name}: {len(prompts)} prompts but {n} completions")
        if answer_key not in kwargs:
            columns = sorted(k for k in kwargs if k not in _TRL_KWARGS and k != "completion_ids")
            raise KeyError(f"{name}: the dataset has no {answer_key!r} column (columns passed: "
                           f"{columns}); pass answer_key=<the column with the answer>")
        answers = kwargs[answer_key]
        if len(answers) != n:
            raise ValueError(f"{name}: column {answer_key!r} has {len(answers)} entries but "
                             f"there are {n} completions")
        sources = kwargs.get(data_source_key) if data_source_key else None
        if sources is not None and len(sources) != n:
            raise ValueError(f"{name}: column {data_source_key!r} has {len(sources)} entries "
                             f"but there are {n} completions")
        if n and all(a is None for a in answers):
            raise ValueError(f"{name}: every value of column {answer_key!r} is None")
        return answers, sources

    def unavailable(self, exc: RewardServiceUnavailable) -> None:
        """Raise ``exc``, or (``on_unavailable="none"``) log it: the batch gets ``None``."""
        if self.on_unavailable == "raise":
            raise exc
        logger.error("%s: reward service unavailable, returning None for the batch: %s",
                     self.name, exc)

    def rewards(self, items: list[ScoreItem | None], results: list[ScoreResult] | None,
                kwargs: dict[str, Any]) -> list[float | None]:
        """TRL's rewards (``results`` is None when the service was unavailable), logged
        through TRL's ``log_extra`` / ``log_metric`` when it passes them."""
        scored = iter(results or [])
        statuses: list[str] = []
        rewards: list[float | None] = []
        for item in items:
            if item is None:
                statuses.append("no_ground_truth")
                rewards.append(None)
            elif results is None:
                statuses.append("unavailable")
                rewards.append(None)
            else:
                r = next(scored)
                statuses.append(r.status)
                rewards.append(reward_or_none(r))
        unscored = sum(r is None for r in rewards)
        if unscored:
            logger.warning("%s: %d of %d completions could not be scored (None)", self.name,
                           unscored, len(rewards))
        log_extra, log_metric = kwargs.get("log_extra"), kwargs.get("log_metric")
        if callable(log_extra):
            log_extra(f"{self.name}_status", statuses)
        if callable(log_metric) and rewards:
            log_metric(f"{self.name}/unscored", unscored / len(rewards))
        return rewards


def _async_reward_func(cols: _Columns, cfg: RewardClientSettings) -> AsyncRewardFunc:
    async def areward(prompts: Any = None, completions: Any = None,
                      completion_ids: Any = None, **kwargs: Any) -> list[float | None]:
        items = cols.items(prompts, completions, kwargs)
        todo = [it for it in items if it is not None]
        results: list[ScoreResult] | None
        try:
            results = await async_client(cfg).score(todo) if todo else []
        except RewardServiceUnavailable as exc:
            cols.unavailable(exc)
            results = None
        return cols.rewards(items, results, kwargs)

    areward.__name__ = areward.__qualname__ = cols.name
    return areward


def _sync_reward_func(cols: _Columns, cfg: RewardClientSettings) -> RewardFunc:
    def reward(prompts: Any = None, completions: Any = None, completion_ids: Any = None,
               **kwargs: Any) -> list[float | None]:
        items = cols.items(prompts, completions, kwargs)
        todo = [it for it in items if it is not None]
        results: list[ScoreResult] | None
        try:
            results = sync_client(cfg).score(todo) if todo else []
        except RewardServiceUnavailable as exc:
            cols.unavailable(exc)
            results = None
        return cols.rewards(items, results, kwargs)

    reward.__name__ = reward.__qualname__ = cols.name
    return reward
