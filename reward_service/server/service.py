"""The scoring service: validated items → batcher → pool → results in request order. No HTTP.

Every route (``/v1/score``, OpenRLHF's ``/get_reward``, slime's ``/slime/reward``) turns its
request into :class:`Job` items with :meth:`ScoringService.job`, checks the request as a whole
with :meth:`ScoringService.open`, and scores them with :meth:`ScoringService.run`. Errors are
raised from the tree in ``reward_service.errors``; the HTTP layer renders them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

import orjson

from reward_service.errors import (
    DrainingError,
    InvalidRequestError,
    RequestTooLargeError,
)
from reward_service.scorers.base import STATUSES, Verdict
from reward_service.scorers.registry import SCORERS, resolve_scorer
from reward_service.server.batcher import Batcher, Job, Scored, job_params
from reward_service.server.metrics import Metrics
from reward_service.server.pool import WorkerPool
from reward_service.settings import Settings

__all__ = ["PreFailed", "ScoringService"]

#: An item that failed before scoring (e.g. no response found in an OpenRLHF query): the
#: scorer's name and its verdict. It is reported as an item error, never guessed at.
PreFailed = tuple[str, Verdict]


def _is_unicode(value: str) -> bool:
    """False if ``value`` holds a lone surrogate (valid JSON escape, not Unicode text)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


Loc = tuple[str | int, ...]  # a field's location in the body, as FastAPI writes it


def _check_params(params: dict[str, Any], loc: Loc) -> None:
    """Raise the 422 that says why ``params`` cannot travel to a worker (orjson frames): a
    lone surrogate, or an integer past 64 bits (``"rel_tol": 10**30`` was answered "lone
    surrogate")."""
    try:
        orjson.dumps(params)
    except TypeError as exc:  # orjson.JSONEncodeError
        if "surrogates" in str(exc):
            raise _not_unicode(loc) from None
        raise InvalidRequestError.at(
            ("body", *loc), f"holds a value that cannot be scored ({exc}); write large "
            "numbers as floats (1e30)", "value_error") from None


def _path(loc: Loc) -> str:
    """``("items", 3, "response")`` in words: ``items[3].response``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else part
    return out


def _not_unicode(loc: Loc) -> InvalidRequestError:
    return InvalidRequestError.at(
        ("body", *loc),
        "has a lone surrogate (a \\ud800-\\udfff escape without its pair), "
        "which is not Unicode text",
        "string_unicode",
    )


class ScoringService:
    """Owns the batcher in front of the pool; the app's lifespan starts and stops the pool."""

    def __init__(self, settings: Settings, pool: WorkerPool, metrics: Metrics) -> None:
        self.settings = settings
        self.pool = pool
        self.metrics = metrics
        self._batcher = Batcher(pool, cache_items=settings.cache_items, metrics=metrics)
        self._versions = {name: sc.version for name, sc in SCORERS.items()}
        self._done_metrics: dict[str, tuple[Any, Any]] = {}  # route -> its labelled children

    # ------------------------------------------------------------------ validation
    def open(self, n: int, timeout_s: float | None) -> float:
        """Whole-request checks shared by every route; returns the per-item deadline."""
        s = self.settings
        if self.pool.draining:
            raise DrainingError()
        self.check_count(n)
        timeout = timeout_s if timeout_s is not None else s.default_timeout_s
        if timeout > s.max_timeout_s:
            raise InvalidRequestError.at(("body", "timeout_s"),
                                         f"timeout_s must be <= {s.max_timeout_s}",
                                         "less_than_equal")
        return timeout

    def check_count(self, n: int) -> None:
        """413 for a request of more than ``max_items`` items (also checked on the decoded
        body before validation: ``routing.counted_route``)."""
        if n > self.settings.max_items:
            raise RequestTooLargeError(f"{n} items; at most {self.settings.max_items} per request")

    def job(self, where: tuple[Loc, Loc], response: str, ground_truth: str, scorer: str | None,
            data_source: str | None, extra: dict[str, Any] | None) -> Job:
        """One validated Job; ``where`` locates the two fields in errors, as FastAPI does
        (``("items", 3, "response")``; an item's ``extra`` is their sibling)."""
        s = self.settings
        if len(response) > s.max_response_chars:
            raise RequestTooLargeError(
                f"{_path(where[0])} has {len(response)} characters; "
                f"at most {s.max_response_chars}")
        if len(ground_truth) > s.max_ground_truth_chars:
            raise RequestTooLargeError(
                f"{_path(where[1])} has {len(ground_truth)} characters; "
                f"at most {s.max_ground_truth_chars}")
        name = resolve_scorer(scorer, data_source)
        params = job_params(name, extra)
        # a lone surrogate (a valid JSON escape such as "\ud800", not Unicode text) can be
        # neither scored nor sent to a worker: the request is malformed
        if not (response.isascii() and ground_truth.isascii()):  # ASCII text is Unicode
            for loc, text in ((where[0], response), (where[1], ground_truth)):
                if not text.isascii() and not _is_unicode(text):
                    raise _not_unicode(loc)
        if params:
            _check_params(params, (*where[0][:-1], "extra"))
        return Job(name, response, ground_truth, params)

    # ------------------------------------------------------------------ scoring
    async def run(self, jobs: list[Job | PreFailed], timeout_s: float) -> list[Scored]:
        """Score the Jobs; a :data:`PreFailed` item keeps its verdict. Results in order."""
        todo = [j for j in jobs if isinstance(j, Job)]
        self.metrics.batch_items.observe(len(jobs))
        scored = iter(await self._batcher.score(todo, timeout_s) if todo else [])
        out: list[Scored] = []
        for j in jobs:
            if isinstance(j, Job):
                out.append(next(scored))
            else:
                name, verdict = j
                out.append(Scored(Job(name, "", "", {}), verdict, 0.0, False))
                self.metrics.items.labels(scorer=name, status=verdict.status).inc()
        return out

    # ------------------------------------------------------------------ replies
    def result(self, s: Scored, item_id: str | None = None) -> dict[str, Any]:
        """An ``ItemResult`` as the plain dict it serialises to (no model per item on the hot
        path; ``tests/test_api.py`` checks the two agree field by field)."""
        v = s.verdict
        return {
            "id": item_id,
            "score": v.score,
            "status": v.status,
            "scorer": s.job.scorer,
            "scorer_version": self._versions[s.job.scorer],
            "extracted": v.extracted,
            "extracted_gold": v.extracted_gold,
            "reason": v.reason,
            "elapsed_s": s.elapsed_s,
            "cached": s.cached,
        }

    @staticmethod
    def statuses(statuses: Iterable[str]) -> dict[str, int]:
        counts: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for st in statuses:
            counts[st] += 1
        return counts

    def done(self, route: str, t0: float) -> None:
        """Count a request answered with 200 and its latency."""
        seconds, answered = self._done_metrics.get(route) or self._done_metrics.setdefault(
            route, (self.metrics.request_seconds.labels(route=route),
                    self.metrics.http_requests.labels(route=route, code="200")))
        seconds.observe(time.perf_counter() - t0)
        answered.inc()
