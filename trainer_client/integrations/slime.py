"""A slime custom reward function backed by the reward service: one request per group.

slime can reach the service in two ways (see ``docs/integrations.md``):

* ``--rm-type remote_rm --rm-url http://HOST:PORT/slime/reward``: no client code; slime posts
  one ``{"prompt", "response", "label"}`` per sample (``slime/rollout/rm_hub/__init__.py:
  remote_rm``).
* ``--custom-rm-path trainer_client.integrations.slime.reward``, with ``--group-rm``: this
  function. slime calls it as ``await rm_function(args, samples, **kwargs)`` with the whole
  group (``batched_async_rm``), or ``await rm_function(args, sample, **kwargs)`` per sample
  without ``--group-rm`` (``async_rm``); it answers a list or a single reward accordingly, in
  one ``POST /v1/score`` either way.

The service is ``args.rm_url`` when set (its path, e.g. ``/slime/reward``, is dropped: the
client speaks ``/v1/score``), else ``$REWARD_SERVICE_URL``. A reward is ``1.0``/``0.0``; when
``--reward-key`` is set it is ``{"score", "acc", "pred", "status"}`` instead (slime reads
``reward[args.reward_key]``), like slime's own ``dapo`` reward. ``sample.metadata`` keys
``data_source`` and ``scorer`` choose the scorer as in ``/v1/score``. Items the service could not
judge score 0.0 (slime has no "no reward") and are counted in a warning; a sample without a
label raises ``ValueError``, an unreachable service ``RewardServiceUnavailable``.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from trainer_client.integrations._common import (
    async_client,
    ground_truth_text,
    make_settings,
)
from trainer_client.integrations._tokens import strip_trailing_tokens
from trainer_client.reward_client import AVAILABLE_STATUSES, ScoreItem, ScoreResult

__all__ = ["reward"]

logger = logging.getLogger(__name__)


def _base_url(rm_url: Any) -> str | None:
    if not rm_url:
        return None
    parts = urlsplit(str(rm_url))
    return f"{parts.scheme}://{parts.netloc}"


def _reward(result: ScoreResult, reward_key: str | None) -> float | dict[str, Any]:
    if not reward_key:
        return result.score
    return {"score": result.score, "acc": 1.0 if result.status == "correct" else 0.0,
            "pred": result.extracted or "", "status": result.status}


async def reward(args: Any, samples: Any, **kwargs: Any) -> Any:
    """slime's custom reward function: a Sample → its reward; a list of Samples → a list."""
    single = not isinstance(samples, list | tuple)
    group = [samples] if single else list(samples)
    if not group:
        return []
    settings = make_settings(_base_url(getattr(args, "rm_url", None)))
    items = []
    for i, s in enumerate(group):
        meta = s.metadata if isinstance(getattr(s, "metadata", None), dict) else {}
        items.append(ScoreItem(
            response=strip_trailing_tokens(s.response or ""),
            ground_truth=ground_truth_text(s.label, f"sample[{i}].label (--label-key)"),
            data_source=meta.get("data_source"),
            scorer=meta.get("scorer"),
        ))
    results = await async_client(settings).score(items)
    bad = sum(r.status not in AVAILABLE_STATUSES for r in results)
    if bad:
        logger.warning("reward service could not score %d of %d samples (reward 0.0)", bad,
                       len(results))
    reward_key = getattr(args, "reward_key", None)
    out = [_reward(r, reward_key) for r in results]
    return out[0] if single else out
