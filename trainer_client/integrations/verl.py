"""verl reward functions backed by the reward service (no import of verl).

Point verl's ``custom_reward_function`` at this file; it is loaded by path, so the
name is what matters (``VERL=$(python -c 'import trainer_client.integrations.verl as m;
print(m.__file__)')``)::

    # batch reward manager: one HTTP request per batch (recommended)
    reward_model.reward_manager=batch \\
    custom_reward_function.path=$VERL custom_reward_function.name=compute_score_batch \\
    +custom_reward_function.reward_kwargs.url=http://10.0.0.5:8000

    # naive reward manager: one request per response, over a kept-alive connection
    custom_reward_function.path=$VERL custom_reward_function.name=compute_score

(newer verl spells these ``reward.reward_manager.name=batch`` and
``reward.custom_reward_function.{path,name,reward_kwargs}``). Without ``url`` the service is
``$REWARD_SERVICE_URL``; see :mod:`trainer_client.integrations._common`.

The call shapes are verl's own:

* ``compute_score(data_source=, solution_str=, ground_truth=, extra_info=)``, keyword
  arguments, from ``verl/workers/reward_manager/naive.py`` (``NaiveRewardManager.__call__``)
  and ``verl/experimental/reward_loop/reward_manager/naive.py`` (``run_single``; it awaits the
  function when ``inspect.iscoroutinefunction`` says so: use :func:`compute_score_async`).
* ``compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=,
  **reward_kwargs)`` from ``verl/workers/reward_manager/batch.py`` (``BatchRewardManager.verify``)
  and ``verl/experimental/reward_loop/reward_manager/batch.py`` (``run_batch``; async:
  :func:`compute_score_batch_async`). ``data_sources`` and ``extra_infos`` may be numpy
  object arrays; ``extra_infos`` may be ``[None] * n``.
* ``custom_reward_function.reward_kwargs`` are merged into every call
  (``verl/trainer/ppo/reward.py: get_custom_reward_fn``), and the reward loop may add
  ``reward_router_address=`` / ``reward_model_tokenizer=``: unknown keyword arguments are
  ignored.

Options, as keyword arguments (``custom_reward_function.reward_kwargs.<name>``): ``url`` (base
URL, or a list for failover), ``api_token``, ``scorer`` (force one; default: routed by
``data_source`` as verl's ``default_compute_score`` routes), ``timeout_s`` (per-item deadline),
``chunk_size`` (items per request, default 16384), ``read_timeout_s`` (default 600),
``retry_deadline_s`` (give up on an unreachable service, default 120). ``extra_info`` keys
``rel_tol``, ``abs_tol`` and ``choices`` are passed on as scorer options.

Each result is a dict with the same keys for every item, as verl's managers collect every key
into ``reward_extra_info`` lists that must line up with the batch:
``score`` (1.0 correct, else 0.0), ``acc`` (the same, as verl's default manager logs),
``pred`` (the extracted answer, ``""`` when none), ``status`` (the service's status) and
``scored`` (0.0 when the service could not judge: timeout, error, bad ground truth; verl has
no "no reward", so those score 0.0 and are counted here and in a warning), and one
``rule/<rule>`` per scoring rule (``rule/hedged``, ``rule/exact``, ...: 1.0 where that rule
decided the item, read from its ``reason`` by ``_rules.rule_flags``, the client's copy of the
service's ``rule_of``), so the batch mean of ``rule/hedged`` shows when a policy starts hedging.

Errors: a missing ground truth or lists of different lengths raise ``ValueError`` naming the
item; an unreachable service raises ``RewardServiceUnavailable`` after the client's retries.
Never a silent 0.0 for every item.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from trainer_client.integrations._common import (
    async_client,
    ground_truth_text,
    make_settings,
    scorer_options,
    sync_client,
)
from trainer_client.integrations._rules import rule_flags
from trainer_client.reward_client import AVAILABLE_STATUSES, ScoreItem, ScoreResult

__all__ = ["compute_score", "compute_score_async", "compute_score_batch",
           "compute_score_batch_async", "to_verl"]

logger = logging.getLogger(__name__)

# keyword arguments this module reads; every other keyword argument is verl's and ignored
_OPTIONS = ("url", "api_token", "scorer", "timeout_s", "chunk_size", "read_timeout_s",
            "retry_deadline_s")


def to_verl(result: ScoreResult) -> dict[str, Any]:
    """One service result as verl's result dict (same keys for every item)."""
    return {
        "score": result.score,
        "acc": 1.0 if result.status == "correct" else 0.0,
        "pred": result.extracted or "",
        "status": result.status,
        "scored": 1.0 if result.status in AVAILABLE_STATUSES else 0.0,
        **rule_flags(result.reason),  # rule/hedged, rule/exact, ...: 1.0 where that rule decided
    }


def _options(kwargs: dict[str, Any]) -> tuple[Any, str | None]:
    opts = {k: kwargs[k] for k in _OPTIONS if k in kwargs}
    settings = make_settings(opts.get("url"), api_token=opts.get("api_token"),
                             timeout_s=opts.get("timeout_s"), chunk_size=opts.get("chunk_size"),
                             read_timeout_s=opts.get("read_timeout_s"),
                             retry_deadline_s=opts.get("retry_deadline_s"))
    return settings, opts.get("scorer")


def _item(data_source: Any, solution_str: Any, ground_truth: Any, extra_info: Any,
          scorer: str | None, where: str) -> ScoreItem:
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str{where} is a {type(solution_str).__name__}, not a string")
    return ScoreItem(
        response=solution_str,
        ground_truth=ground_truth_text(ground_truth, f"ground_truth{where}"),
        data_source=None if data_source is None else str(data_source),
        scorer=scorer,
        extra=scorer_options(extra_info),
    )


def _batch_items(data_sources: Any, solution_strs: Any, ground_truths: Any, extra_infos: Any,
                 scorer: str | None) -> list[ScoreItem]:
    sols = list(solution_strs)
    n = len(sols)
    golds = list(ground_truths)
    sources = list(data_sources) if data_sources is not None else [None] * n
    extras = list(extra_infos) if extra_infos is not None else [None] * n
    for name, values in (("ground_truths", golds), ("data_sources", sources),
                         ("extra_infos", extras)):
        if len(values) != n:
            raise ValueError(f"{name} has {len(values)} entries but solution_strs has {n}")
    return [_item(s, r, g, e, scorer, f"[{i}]")
            for i, (s, r, g, e) in enumerate(zip(sources, sols, golds, extras, strict=True))]


def _warn_unscored(results: Sequence[ScoreResult]) -> None:
    bad = [r for r in results if r.status not in AVAILABLE_STATUSES]
    if bad:
        counts: dict[str, int] = {}
        for r in bad:
            counts[r.status] = counts.get(r.status, 0) + 1
        logger.warning("reward service could not score %d of %d items (scored 0.0): %s",
                       len(bad), len(results), counts,
                       extra={"unscored": len(bad), "items": len(results)})


def _to_verl_all(results: Iterable[ScoreResult]) -> list[dict[str, Any]]:
    out = list(results)
    _warn_unscored(out)
    return [to_verl(r) for r in out]


def compute_score(data_source: Any, solution_str: str, ground_truth: Any,
                  extra_info: Any = None, **kwargs: Any) -> dict[str, Any]:
    """verl's per-item reward function (naive reward manager). One HTTP request."""
    settings, scorer = _options(kwargs)
    item = _item(data_source, solution_str, ground_truth, extra_info, scorer, "")
    (result,) = sync_client(settings).score([item])
    return _to_verl_all([result])[0]


async def compute_score_async(data_source: Any, solution_str: str, ground_truth: Any,
                              extra_info: Any = None, **kwargs: Any) -> dict[str, Any]:
    """Async :func:`compute_score`, awaited by verl's reward loop."""
    settings, scorer = _options(kwargs)
    item = _item(data_source, solution_str, ground_truth, extra_info, scorer, "")
    (result,) = await async_client(settings).score([item])
    return _to_verl_all([result])[0]


def compute_score_batch(data_sources: Any, solution_strs: Any, ground_truths: Any,
                        extra_infos: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
    """verl's batch reward function (``reward_manager=batch``): one HTTP request per batch
    (up to ``chunk_size`` items, default 16384), results in order."""
    settings, scorer = _options(kwargs)
    items = _batch_items(data_sources, solution_strs, ground_truths, extra_infos, scorer)
    if not items:
        return []
    return _to_verl_all(sync_client(settings).score(items))


async def compute_score_batch_async(data_sources: Any, solution_strs: Any, ground_truths: Any,
                                    extra_infos: Any = None,
                                    **kwargs: Any) -> list[dict[str, Any]]:
    """Async :func:`compute_score_batch`, awaited by verl's reward loop batch manager."""
    settings, scorer = _options(kwargs)
    items = _batch_items(data_sources, solution_strs, ground_truths, extra_infos, scorer)
    if not items:
        return []
    return _to_verl_all(await async_client(settings).score(items))
