"""One record per generated completion: the lines of ``rollouts/step_<N>.jsonl`` (training
samples) and of ``eval/step_<N>.jsonl`` (greedy held-out answers), one format for both.

Fields, in order:

- ``step``; ``id`` (the problem), ``sample`` (index in its group, 0 for eval);
  ``question`` (the problem's text) and ``prompt`` (as rendered for the model, chat template
  included) on the group's first sample, ``null`` on the others (same ``id``: same prompt)
- ``response`` (the completion text), ``tokens`` (completion tokens, EOS included),
  ``finished`` (ended with EOS; ``false``: cut at ``max_new_tokens``)
- ``reward``: the reward the service's verdict gives (``null`` when it could not score:
  ``timeout``, ``error``, ``bad_ground_truth``, or ``unavailable``: the service was not
  reached); ``status``, ``correct``, ``complete`` (finished and an answer was found)
- ``extracted``, ``reason``, ``rule`` (the scoring rule that overrode the plain verdict, read
  from ``reason``: ``hedged``, ``unclosed_think``, ...; else ``null``), ``scorer``,
  ``ground_truth``
- ``advantage``: what the sample got in the loss (``null``: left out of it: an unavailable
  reward, a group dynamic sampling did not train on, or an eval line)
- ``clipped``: its texts were cut to keep the step file under ``log.rollouts_max_bytes``
  (``response_chars`` then gives the response's full length)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trainer_client.integrations._rules import RULES
from trainer_client.reward_client import ScoreResult, reward_or_none

__all__ = ["TEXT_FIELDS", "advantages_in_loss", "fit_to_bytes", "generation_records",
           "jsonl_text", "rule_of"]

#: the fields that :func:`fit_to_bytes` may clip
TEXT_FIELDS = ("question", "prompt", "response")
_MARK = "\u2026[{} chars cut]\u2026"


def rule_of(reason: str | None) -> str | None:
    """The rule named before the colon of a verdict's ``reason`` (``hedged: ...``), if any."""
    head, sep, _ = (reason or "").partition(": ")
    return head if sep and head in RULES else None


def generation_records(step: int, problems: Sequence[Any], completions: Sequence[Any],
                       results: Sequence[ScoreResult | None], *,
                       prompts: Sequence[str] | None = None,
                       advantages: Sequence[float | None] | None = None) -> list[dict[str, Any]]:
    """Records of ``completions`` (group after group, ``len(completions) // len(problems)``
    samples per problem, as the trainer flattens them) and their ``results`` (``None``: the
    service was not reached). ``prompts``: one per problem."""
    if not problems or len(completions) % len(problems):
        raise ValueError(f"{len(completions)} completions do not split into groups of "
                         f"{len(problems)} problems")
    if len(results) != len(completions) or (advantages is not None
                                            and len(advantages) != len(completions)):
        raise ValueError("completions, results and advantages differ in length")
    n = len(completions) // len(problems)
    out = []
    for i, (c, r) in enumerate(zip(completions, results, strict=True)):
        p, k = problems[i // n], i % n
        status = "unavailable" if r is None else r.status
        reason = None if r is None else r.reason
        out.append({
            "step": step, "id": p.id, "sample": k,
            "question": p.question if k == 0 else None,
            "prompt": prompts[i // n] if prompts is not None and k == 0 else None,
            "response": c.text, "tokens": len(c.completion_ids), "finished": c.finished,
            "reward": None if r is None else reward_or_none(r), "status": status,
            "correct": status == "correct",
            "complete": c.finished and status in ("correct", "incorrect"),
            "extracted": None if r is None else r.extracted, "reason": reason,
            "rule": rule_of(reason), "scorer": None if r is None else (r.scorer or None),
            "ground_truth": p.ground_truth,
            "advantage": None if advantages is None else advantages[i],
            "clipped": False,
        })
    return out


def advantages_in_loss(rolled: Sequence[Any], trained: Sequence[Any],
                       advantages: Sequence[float], valid: Sequence[bool]
                       ) -> list[float | None]:
    """The advantage each of the ``rolled`` completions got in the loss: ``trained`` are the
    completions the step trains on (the same objects: all of ``rolled``, or the groups that
    dynamic sampling kept) with their ``advantages`` and ``valid`` mask; ``None`` for a
    completion left out (not trained on, or its reward invalid)."""
    if not len(trained) == len(advantages) == len(valid):
        raise ValueError("trained, advantages and valid differ in length")
    at = {id(c): j for j, c in enumerate(trained)}
    out: list[float | None] = []
    for c in rolled:
        j = at.get(id(c))
        out.append(float(advantages[j]) if j is not None and valid[j] else None)
    return out


def jsonl_text(records: Sequence[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _nbytes(records: Sequence[dict[str, Any]]) -> int:
    return len(jsonl_text(records).encode("utf-8"))


def _clip(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    mark = _MARK.format(len(text) - chars)
    if chars <= 2 * len(mark):
        return text[:chars]
    head = (chars - len(mark)) * 2 // 3
    tail = chars - len(mark) - head
    return text[:head] + mark + text[len(text) - tail:] if tail else text[:head] + mark


def fit_to_bytes(records: list[dict[str, Any]], max_bytes: int) -> list[dict[str, Any]]:
    """``records`` whose JSONL takes at most ``max_bytes`` (0: no cap): the prompt and
    response texts are cut to an equal share each (head and tail kept, the cut marked, the
    record's ``clipped`` set). Every record is kept: when the fields other than the texts
    alone exceed the cap, the texts are emptied and the cap is exceeded."""
    size = _nbytes(records)
    if not max_bytes or size <= max_bytes:
        return records
    texts = sum(1 for r in records for f in TEXT_FIELDS if r.get(f))
    bare = [{**r, **{f: "" for f in TEXT_FIELDS if r.get(f)}} for r in records]
    share = max(0, max_bytes - _nbytes(bare)) // max(1, texts)
    out = records
    for _ in range(8):  # non-ASCII text takes more bytes than characters: shrink again
        out = []
        for r in records:
            new = dict(r)
            for f in TEXT_FIELDS:
                if new.get(f) and len(new[f]) > share:
                    new[f] = _clip(new[f], share)
                    new["clipped"] = True
            if new["clipped"] and "response_chars" not in new:
                new["response_chars"] = len(r["response"])
            out.append(new)
        size = _nbytes(out)
        if size <= max_bytes or share == 0:
            break
        share = share * max_bytes // size
    return out
