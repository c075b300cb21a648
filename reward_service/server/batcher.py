"""From validated request items to ordered results: routing, cache, dedup.

Identical items (same scorer, response, ground truth and scorer options) are scored once per
request and, for definitive verdicts, remembered in a bounded LRU across requests. The rest
go to the pool in request order. (Items sharing a ground truth used to be sent next to each
other so that one worker parsed each gold once; each worker now memoises parsed golds, and
such a group, one prompt's samples, tends to cost alike, so the pool deals it over every
worker instead: ``pool/records.py:deal``.)

Each request is its own pool submission, so the pool's fair dispatch between requests holds
for small requests too (a group-commit coalescer that merged small requests was measured, gave
no gain on OpenRLHF's one-sample-per-request traffic, and made requests share chunks: it was
removed).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from reward_service.lru import LRU
from reward_service.scorers.base import Verdict
from reward_service.scorers.registry import SCORERS
from reward_service.scorers.rule_labels import rule_of
from reward_service.server.metrics import Metrics
from reward_service.server.pool import Outcome, Task, WorkerPool

__all__ = ["Batcher", "Job"]

# Verdicts that depend only on the inputs; timeouts and errors are not remembered.
_CACHEABLE = frozenset({"correct", "incorrect", "no_answer", "bad_ground_truth"})


@dataclass(frozen=True, slots=True)
class Job:
    """A validated item with its scorer resolved."""

    scorer: str
    response: str
    ground_truth: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Scored:
    job: Job
    verdict: Verdict
    elapsed_s: float
    cached: bool


def _params(job: Job) -> bytes:
    return orjson.dumps(job.params, option=orjson.OPT_SORT_KEYS) if job.params else b""


def _digest(job: Job) -> Hashable:
    """The verdict cache's key: 16 bytes whatever the texts' length (bounded memory)."""
    s = job.scorer.encode()
    g = job.ground_truth.encode("utf-8", "surrogatepass")
    r = job.response.encode("utf-8", "surrogatepass")
    p = _params(job)
    # lengths first: no two different items give the same bytes
    data = b"%d:%d:%d:%s%s%s%s" % (len(s), len(g), len(r), s, g, r, p)
    return hashlib.blake2b(data, digest_size=16).digest()


def _identity(job: Job) -> Hashable:
    """With the cache off, only a request's own items are compared: no digest needed."""
    return (job.scorer, job.ground_truth, job.response, _params(job))


def job_params(scorer: str, extra: dict[str, Any] | None) -> dict[str, Any]:
    """The part of ``extra`` the scorer reads (the rest must not split the cache)."""
    if not extra:
        return {}
    return {k: extra[k] for k in SCORERS[scorer].params if k in extra}


class Batcher:
    def __init__(self, pool: WorkerPool, *, cache_items: int, metrics: Metrics) -> None:
        self._pool = pool
        self._cache = LRU(cache_items)  # key → definitive Verdict
        self._cache_items = cache_items
        self._key = _digest if cache_items else _identity
        self._metrics = metrics

    async def score(self, jobs: Sequence[Job], timeout_s: float) -> list[Scored]:
        keys = [self._key(j) for j in jobs]
        out: list[Scored | None] = [None] * len(jobs)
        first: dict[Hashable, int] = {}  # key → index of the item that will be scored
        hits = 0
        if not self._cache_items:  # nothing is remembered: only this request's repeats
            for i, key in enumerate(keys):
                first.setdefault(key, i)
        else:
            for i, (job, key) in enumerate(zip(jobs, keys, strict=True)):
                verdict = self._cache.get(key)
                if verdict is not None:
                    out[i] = Scored(job, verdict, 0.0, True)
                    hits += 1
                elif key not in first:
                    first[key] = i
        self._metrics.cache_hits.inc(hits)
        self._metrics.cache_misses.inc(len(jobs) - hits)
        self._metrics.dedup_items.inc(len(jobs) - hits - len(first))

        order = list(first.values())  # request order: the pool deals neighbours apart
        tasks = [
            Task(jobs[i].scorer, jobs[i].response, jobs[i].ground_truth, timeout_s, jobs[i].params)
            for i in order
        ]
        outcomes: list[Outcome] = await self._pool.submit(tasks) if tasks else []

        fresh = [Scored(jobs[i], o.verdict, o.elapsed_s, False)
                 for i, o in zip(order, outcomes, strict=True)]
        timers: dict[str, Any] = {}  # one labelled child per scorer, not a lookup per item
        for s in fresh:
            timer = timers.get(s.job.scorer)
            if timer is None:
                timer = timers[s.job.scorer] = self._metrics.item_seconds.labels(
                    scorer=s.job.scorer)
            timer.observe(s.elapsed_s)
        if self._cache_items:
            for i, s in zip(order, fresh, strict=True):
                if s.verdict.status in _CACHEABLE:
                    self._cache.put(keys[i], s.verdict)
        if len(fresh) == len(jobs):  # no hit, no repeat: ``order`` is the request's order
            results = fresh
        else:
            scored = {keys[i]: s for i, s in zip(order, fresh, strict=True)}
            results = [s if s is not None else scored[keys[i]] for i, s in enumerate(out)]
        counts = Counter((s.job.scorer, s.verdict.status) for s in results)
        for (scorer, status), n in counts.items():
            self._metrics.items.labels(scorer=scorer, status=status).inc(n)
        rules = Counter((s.job.scorer, rule_of(s.verdict.reason)) for s in results
                        if s.verdict.reason)
        for (scorer, rule), n in rules.items():
            if rule is not None:
                self._metrics.rule_overrides.labels(scorer=scorer, rule=rule).inc(n)
        return results
