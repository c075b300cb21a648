"""The scheduler: ``WorkerPool``, the one object the app talks to.

It cuts each request into chunks (its items dealt round-robin, so neighbours that cost
alike spread over every worker), gives chunks to the least-busy active worker (at most
``chunks_in_flight`` each), enforces every item's deadline from the moment a worker starts it,
requeues what a dead worker held, and runs the watchdog. Processes are the crew's business
(``crew.py``); this module sees workers only as records with a queue of chunks.

* **Timeout**: the watchdog has the crew SIGKILL the worker's process group; the item becomes
  ``timeout`` (``bad_ground_truth`` while its gold was being parsed: ``bad_golds.py``), the worker's unstarted items go back to the front of the queue, a warm spare
  becomes active (capacity never drops), and a new spare is spawned.
* **Crash** (segfault, OOM kill, exit): the same; the item becomes ``error`` with the exit
  status once the crew has reaped the process. A crash is not a timeout.
* **Start failure**: retried with backoff; a strict-sandbox refusal is fatal for ``start``.
  If no worker can be started for a while, queued items fail with ``error`` instead of
  waiting forever.
* **Overload**: more than ``max_queue_items`` outstanding → ``OverloadedError`` (HTTP 503).
* ``stop`` (lifespan shutdown, after the server drained requests): refuses new work, fails
  what is left, has the crew stop every worker and the zygote.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from reward_service import protocol
from reward_service.errors import DrainingError, OverloadedError, PoolStartError
from reward_service.scorers.base import Verdict
from reward_service.server.pool.bad_golds import BadGolds
from reward_service.server.pool.crew import Crew, Worker, WorkerState
from reward_service.server.pool.fairqueue import FairQueue
from reward_service.server.pool.records import (
    Chunk,
    Outcome,
    Pending,
    PoolStatus,
    Request,
    Task,
    chunk_sizes,
    deal,
)
from reward_service.settings import Settings

if TYPE_CHECKING:
    from reward_service.server.metrics import Metrics

__all__ = ["WorkerPool"]

log = logging.getLogger(__name__)

_TICK_S = 0.02


class WorkerPool:
    """Supervisor of the worker processes. Create, ``await start()``, ``submit``, ``stop``."""

    def __init__(self, settings: Settings, *, metrics: Metrics | None = None) -> None:
        self._s = settings
        self._crew = Crew(settings, self, metrics=metrics)
        self._message_items = metrics.message_items if metrics is not None else None
        self.messages_sent = 0  # score messages sent to workers (tests read it)
        self._queue = FairQueue()
        self._bad_golds = BadGolds(settings.bad_gold_memory_s)  # golds too slow to parse
        self._seq = itertools.count()
        self._outstanding = 0
        self._draining = False  # no new submissions (SIGTERM); in-flight work still runs
        self._started = False
        self._watchdog: asyncio.Task[None] | None = None
        self._changed: asyncio.Event | None = None  # set at each change while someone waits
        self._pump_soon = False  # a _pump is scheduled for the end of this loop turn
        self._no_worker_since: float | None = None
        self._watch_error: str | None = None  # what the last tick failed on, if it did
        self._watch_errors = 0

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Spawn the workers and wait until ``workers`` of them are warm."""
        self._started = True
        crew = self._crew
        crew.start(asyncio.get_running_loop())
        self._watchdog = asyncio.create_task(self._watch(), name="reward-pool-watchdog")
        deadline = time.monotonic() + self._s.worker_start_timeout_s
        try:
            while crew.count("active") < self._s.workers:
                if crew.fatal or crew.start_failures >= 3:
                    raise PoolStartError(
                        crew.fatal or crew.last_start_error or "workers keep dying"
                    )
                if time.monotonic() > deadline:
                    raise PoolStartError(
                        f"{crew.count('active')}/{self._s.workers} workers ready after "
                        f"{self._s.worker_start_timeout_s:.0f}s"
                    )
                await asyncio.sleep(0.02)
        except BaseException:
            await self.stop()
            raise
        log.info("pool ready", extra={"workers": self._s.workers, "spares": self._s.spares})

    async def stop(self) -> None:
        """Refuse new work, fail what is left, stop every worker; nothing is left running."""
        self._draining = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
            self._watchdog = None
        for w in await self._crew.stop():
            for chunk in w.inflight:
                for p in chunk.items:
                    self._resolve(p, Verdict("error", reason="service shutting down"), 0.0)
            w.inflight.clear()
        self._fail_queue("service shutting down")
        log.info("pool stopped")

    @property
    def ready(self) -> bool:
        """Able to do its job: the watchdog runs clean, a worker is active, and the crew is
        at full strength or can still start workers (no failed start since the last good
        one). False makes ``/readyz`` answer 503."""
        crew = self._crew
        active = crew.count("active")
        watching = (
            self._watchdog is not None and not self._watchdog.done() and self._watch_error is None
        )
        full = active + crew.count("spare") >= self._s.workers + self._s.spares
        return (
            self._started and not self._draining and watching and active > 0
            and (full or crew.start_failures == 0)
        )

    @property
    def draining(self) -> bool:
        return self._draining

    def drain(self) -> None:
        """Stop taking new work (SIGTERM): in-flight work still finishes."""
        self._draining = True

    @property
    def sandbox_report(self) -> dict[str, Any]:
        """What the last worker to start reported about its sandbox layers."""
        return self._crew.sandbox_report

    def status(self) -> PoolStatus:
        count = self._crew.count
        return PoolStatus(
            active=count("active"),
            spare=count("spare"),
            starting=count("starting"),
            retiring=count("retiring") + count("stopping"),
            outstanding_items=self._outstanding,
            queued_chunks=len(self._queue),
            ready=self.ready,
            draining=self._draining,
            restarts=dict(self._crew.restarts),
            start_failures=self._crew.start_failures,
            watchdog_errors=self._watch_errors,
        )

    def worker_pids(self, state: WorkerState | None = None) -> list[int]:
        return [
            w.pid for w in self._crew.workers
            if w.pid is not None and (state is None or w.state == state)
        ]

    @property
    def zygote_pid(self) -> int | None:
        return self._crew.zygote_pid

    def busy_worker_pids(self) -> list[int]:
        """Pids of the workers holding an item right now (it may be running or about to)."""
        return [
            w.pid for w in self._crew.workers
            if w.pid is not None and w.state in ("active", "retiring") and w.current() is not None
        ]

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate()`` holds; it is checked again after every change of the
        pool's state (an item sent or answered, a worker started, promoted or lost) and at
        every watchdog tick. For tests and probes that must wait on the pool, not on a clock:
        bound it with ``asyncio.wait_for``."""
        while not predicate():
            if self._changed is None:
                self._changed = asyncio.Event()
            await self._changed.wait()

    def _notify(self) -> None:
        if self._changed is not None:
            changed, self._changed = self._changed, None
            changed.set()

    # ------------------------------------------------------------------ submit
    async def submit(self, tasks: Sequence[Task]) -> list[Outcome]:
        """Score ``tasks``; results in the same order. Raises Overloaded/Draining errors."""
        if self._draining or not self._started:
            raise DrainingError("the pool is not accepting work")
        if self._outstanding + len(tasks) > self._s.max_queue_items:
            raise OverloadedError(
                f"{self._outstanding} items outstanding; limit {self._s.max_queue_items}"
            )
        if not tasks:
            return []
        n = len(tasks)
        # one future per request, not per item: outcomes are stored by _resolve
        req = Request([None] * n, n, asyncio.get_running_loop().create_future())
        seq = self._seq
        pendings = [Pending(t, req, i, next(seq)) for i, t in enumerate(tasks)]
        self._outstanding += n
        if self._bad_golds:  # items whose gold is known to be too slow to parse: answered now
            pendings = [p for p in pendings if not self._bad_golds.settle(p, self._resolve)]
        for items in deal(pendings, chunk_sizes(len(pendings), self._s.chunk_size,
                                                self._s.workers)):
            self._queue.push(Chunk(items))
        if not self._pump_soon:  # requests that arrive in the same loop turn share messages
            self._pump_soon = True
            asyncio.get_running_loop().call_soon(self._pump)
        try:
            await req.done
        except asyncio.CancelledError:
            # the caller is gone: unsent items are dropped by _pump, late outcomes ignored
            req.cancelled = True
            self._outstanding -= req.left
            req.left = 0
            raise
        return req.outcomes  # type: ignore[return-value]  # all filled once done is set

    # ------------------------------------------------------------------ dispatch
    def _pump(self) -> None:
        """Give queued work to the least-busy active workers, least-served request first
        (``FairQueue``), packed: one message per worker takes chunks of several requests,
        up to an even share of what is queued (``_pack_size``), so 256 one-item requests
        cost a few pipe round trips, not 256."""
        self._pump_soon = False
        limit = self._s.chunks_in_flight
        while len(self._queue):
            free = [
                w for w in self._crew.workers if w.state == "active" and len(w.inflight) < limit
            ]
            if not free:
                return
            w = min(free, key=lambda x: len(x.inflight))
            items = self._pack(self._pack_size(len(free)))
            if items is None:
                return
            if items:
                self._send(w, Chunk(items))

    def _pack_size(self, free_workers: int) -> int:
        """Items for the next message: an even share of the queue over the free workers, at
        most ``chunk_size``."""
        return max(1, min(self._s.chunk_size, -(-self._queue.items // max(1, free_workers))))

    def _pack(self, size: int) -> list[Pending] | None:
        """Up to ``size`` wanted items, a chunk from each request in least-served order (one
        request alone keeps its own chunking); None when nothing is queued."""
        items: list[Pending] = []
        packed: set[Request] = set()
        while len(items) < size:
            chunk = self._queue.pop(size - len(items) if items else None, packed)
            if chunk is None:
                return items if packed else None
            packed.add(chunk.req)
            wanted = [p for p in chunk.items
                      if p.wanted and not (self._bad_golds and self._bad_golds.settle(p, self._resolve))]
            for p in wanted:
                p.req.on_workers += 1  # before the next pop: it picks the least served
            items += wanted
        return items

    def _send(self, w: Worker, chunk: Chunk) -> None:
        items = []
        for p in chunk.items:
            w.by_seq[p.seq] = p
            t = p.task
            items.append([p.seq, t.scorer, t.response, t.ground_truth, dict(t.params)])
        if not w.inflight:
            w.since = time.monotonic()
        w.inflight.append(chunk)
        assert w.ch is not None
        w.ch.send({"op": "score", "items": items})
        self.messages_sent += 1
        if self._message_items is not None:
            self._message_items.observe(len(items))
        self._notify()

    def _resolve(self, p: Pending, verdict: Verdict, elapsed: float) -> None:
        if p.resolve(verdict, elapsed):
            self._outstanding -= 1

    # ------------------------------------------------------------------ crew events
    def on_result(self, w: Worker, msg: protocol.Result) -> None:
        p = w.by_seq.pop(msg.seq, None)
        if p is None or p is not w.current():
            self._crew.kill(w, reason_key="protocol", why="worker answered out of order")
            return
        chunk = w.inflight[0]
        chunk.done += 1
        p.req.on_workers -= 1
        w.items_done += 1
        w.since = time.monotonic()
        verdict = Verdict(msg.status, msg.extracted, msg.extracted_gold, msg.reason, msg.credit)
        self._resolve(p, verdict, msg.elapsed_s)
        if chunk.done == len(chunk.items):
            w.inflight.popleft()
            self._crew.after_chunk(w)
            self._pump()
        self._notify()

    def on_worker_down(self, w: Worker, *, innocent: bool = False) -> None:
        """Requeue a dead worker's unstarted items at the front of the queue (with the one it
        held when it is ``innocent``: it died with its zygote)."""
        culprit = None if innocent else w.current()
        rest: list[Pending] = []
        for chunk in w.inflight:
            held = chunk.items[chunk.done :]
            for p in held:
                p.req.on_workers -= 1
            rest.extend(p for p in held if p is not culprit)
        w.inflight.clear()
        w.by_seq.clear()
        if rest:
            self._queue.push_front(rest)

    def on_crash(self, culprit: Pending, reason: str, elapsed: float) -> None:
        self._resolve(culprit, Verdict("error", reason=reason), elapsed)

    def on_capacity(self) -> None:
        self._pump()
        self._notify()

    # ------------------------------------------------------------------ watchdog
    async def _watch(self) -> None:
        """Every tick: item deadlines, the crew's start/stop deadlines, queued items with no
        worker to go to. Each phase survives any error (file descriptors exhausted, a bug):
        it is logged and counted, the pool reports not ready until a tick runs clean, and the
        next tick tries again, so one failure never ends deadline enforcement."""
        while True:
            await asyncio.sleep(_TICK_S)
            failed: str | None = None
            for phase in (self._enforce_deadlines, self._crew.tick, self._give_up_without_workers):
                try:
                    phase(time.monotonic())
                except Exception as exc:  # the watchdog must outlive any error
                    failed = f"{phase.__name__}: {type(exc).__name__}: {exc}"
                    self._watch_errors += 1
                    if failed != self._watch_error or self._watch_errors % 500 == 1:
                        log.exception("watchdog tick failed", extra={
                            "reason": failed, "errors": self._watch_errors,
                        })
            self._watch_error = failed

    def _enforce_deadlines(self, now: float) -> None:
        """Kill the worker whose current item ran past its deadline; the item is ``timeout``,
        or ``bad_ground_truth`` when the worker was parsing its gold (``bad_golds.py``)."""
        for w in list(self._crew.workers):
            if w.state not in ("active", "retiring"):
                continue
            cur = w.current()
            took = now - w.since
            if cur is not None and took > cur.task.timeout_s:
                verdict = (self._bad_golds.add(cur.task, took) if w.gold_seq == cur.seq else
                           Verdict("timeout", reason=f"deadline of {cur.task.timeout_s:g}s exceeded"))
                self._resolve(cur, verdict, took)
                self._crew.kill(w, reason_key="timeout")

    def _give_up_without_workers(self, now: float) -> None:
        """Queued items are answered (``error``) rather than wait forever when no worker can
        be had: after 5 failed starts in a row, or no active worker for as long as a worker
        may take to start."""
        crew = self._crew
        if crew.count("active"):
            self._no_worker_since = None
            return
        if self._no_worker_since is None:
            self._no_worker_since = now
        waited = now - self._no_worker_since
        if crew.start_failures >= 5 or waited > self._s.worker_start_timeout_s:
            self._fail_queue(
                f"no worker available for {waited:.0f}s; last start error: "
                f"{crew.last_start_error or 'none'}"
            )

    def _fail_queue(self, reason: str) -> None:
        for chunk in self._queue.drain():
            for p in chunk.items:
                self._resolve(p, Verdict("error", reason=reason), 0.0)
