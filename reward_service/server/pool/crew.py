"""The crew: the set of worker processes, their states, and keeping enough of them alive.

It asks the zygote (through :class:`ZygoteLink`) for workers, wires each to a
:class:`WorkerChannel`, promotes spares, retires and reaps workers, and restarts the zygote
when it is lost. It never looks at the queue: what matters to the scheduler goes *up* through
:class:`CrewEvents` (a result frame, a worker's items to requeue, a crashed item, new capacity).

Worker states::

    starting ──READY──▶ spare ──promote──▶ active ──recycle──▶ retiring ──EOF sent──▶ stopping
        │                                     │                                          │
        └──────────── died / killed ──────────┴────────────────▶ dead ◀──────── exited ──┘
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol

from reward_service import protocol
from reward_service.server.pool.channel import WorkerChannel, exit_text, rss_mb
from reward_service.server.pool.records import Pending
from reward_service.server.pool.workers import Worker, WorkerState
from reward_service.server.pool.zygote_link import ZygoteLink
from reward_service.settings import Settings

if TYPE_CHECKING:
    from reward_service.server.metrics import Metrics

__all__ = ["Crew", "CrewEvents", "Worker", "WorkerState"]  # Worker: from pool/workers.py

log = logging.getLogger(__name__)

_RSS_CHECK_S = 1.0  # how often a busy worker's RSS is read (for REWARD_RECYCLE_RSS_MB)


class CrewEvents(Protocol):
    """What the crew tells the scheduler; called from the event loop."""

    def on_result(self, w: Worker, msg: protocol.Result) -> None: ...
    def on_worker_down(self, w: Worker, *, innocent: bool = False) -> None:
        """``w`` is dead: take back its items (all but the one it held, unless ``innocent``:
        it died with its zygote, not of an item)."""
    def on_crash(self, culprit: Pending, reason: str, elapsed: float) -> None: ...
    def on_capacity(self) -> None: ...


class Crew:
    """Keeps ``workers`` active and ``spares`` warm; reports to ``events``."""

    def __init__(
        self, settings: Settings, events: CrewEvents, *, metrics: Metrics | None = None
    ) -> None:
        self._s = settings
        self._events = events
        self._metrics = metrics
        self.workers: list[Worker] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._zygote: ZygoteLink | None = None
        self._spawn_ids = itertools.count()
        self._spawning: dict[int, Worker] = {}  # spawn id → worker whose pid is not known yet
        self._by_pid: dict[int, Worker] = {}
        self._reapers: set[asyncio.Task[None]] = set()
        self._next_spawn_at = 0.0
        self.stopped = False
        self.start_failures = 0  # consecutive
        self.last_start_error: str | None = None
        self.fatal: str | None = None  # a worker refused to run (strict sandbox)
        self.restarts: dict[str, int] = {}
        self.sandbox_report: dict[str, Any] = {}

    # ------------------------------------------------------------------ queries
    def count(self, state: WorkerState) -> int:
        return sum(1 for w in self.workers if w.state == state)

    @property
    def zygote_pid(self) -> int | None:
        return self._zygote.pid if self._zygote is not None else None

    # ------------------------------------------------------------------ lifecycle
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._zygote = ZygoteLink(self._s, loop, self)
        self._start_zygote()

    async def stop(self) -> list[Worker]:
        """EOF to every worker, wait for their exits, SIGKILL the rest; returns the workers
        (their ``inflight`` untouched, for the scheduler to fail)."""
        self.stopped = True
        for t in list(self._reapers):
            t.cancel()
        for w in self.workers:
            if w.ch is not None:
                w.ch.close_input()  # EOF: a worker finishes its current item and exits 0
        deadline = time.monotonic() + self._s.worker_stop_timeout_s
        z = self._zygote
        while z is not None and z.connected and time.monotonic() < deadline:
            z.poll()  # collect exit reports
            if all(w.ch is None or w.ch.exited or w.ch.pid is None for w in self.workers):
                break
            await asyncio.sleep(0.02)
        for w in self.workers:
            if w.ch is not None:
                w.ch.kill()
                w.ch.close()
        if z is not None:
            z.stop()
        workers, self.workers = self.workers, []
        return workers

    # ------------------------------------------------------------------ zygote
    def _start_zygote(self) -> None:
        assert self._zygote is not None
        try:
            self._zygote.start()
        except OSError as exc:
            self._start_failed(f"zygote spawn failed: {exc}")

    def zygote_ready(self) -> None:
        self.ensure_capacity()

    def worker_spawned(self, spawn_id: int, pid: int) -> None:
        w = self._spawning.pop(spawn_id, None)
        if w is not None and w.ch is not None:
            w.ch.pid = pid
            self._by_pid[pid] = w
            if w.state == "dead":  # killed before its pid was known
                w.ch.kill()

    def spawn_failed(self, spawn_id: int, reason: str) -> None:
        w = self._spawning.pop(spawn_id, None)
        if w is not None:
            if w.ch is not None:
                w.ch.exited = True
            self._bury(w)
            self.workers.remove(w)
            self._start_failed(f"fork failed: {reason}")

    def worker_exited(self, pid: int, returncode: int) -> None:
        w = self._by_pid.pop(pid, None)
        if w is not None and w.ch is not None:
            w.ch.exited, w.ch.returncode = True, returncode

    def zygote_lost(self, how: str, *, failed_start: bool) -> None:
        """The zygote died: its workers die with it (PDEATHSIG); start a new one. A zygote
        that never became ready (or stopped answering) is one failed start, and the next one
        waits for the backoff; one that served and then died is restarted at once."""
        if self.stopped:
            return
        self.count_restart("zygote")
        for w in list(self.workers):  # they are gone or going: PDEATHSIG
            if w.ch is not None:
                w.ch.exited = w.ch.exited or w.ch.pid is None or w.ch.gone()
            if w.state in ("spare", "active", "retiring"):
                # killed with the zygote, not by an item: every item it held is requeued
                self._bury(w, innocent=True)
                self._reap_later(w, None)
        for w in self._spawning.values():  # never forked: not failures of their own
            self._bury(w)
            self.workers.remove(w)
        self._spawning.clear()
        log.error("restarting the zygote", extra={"exit": how, "failed_start": failed_start})
        if failed_start:
            self._start_failed(f"zygote failed: {how}")  # the watchdog restarts it
        else:
            self._start_zygote()

    def _zygote_failed(self, reason: str) -> None:
        """The zygote does not do its job (no READY in time): kill it, count one failed
        start, start another."""
        assert self._zygote is not None
        log.error("killing the zygote", extra={"reason": reason})
        self._zygote.kill()
        self.zygote_lost(reason, failed_start=True)

    # ------------------------------------------------------------------ capacity
    def _spawn(self) -> None:
        """Ask the zygote to fork one worker wired to a fresh pair of pipes."""
        assert self._loop is not None and self._zygote is not None
        spawn_id = next(self._spawn_ids)
        try:
            to_fd, from_fd = self._zygote.spawn(spawn_id)
        except OSError as exc:
            self._start_failed(f"zygote unreachable: {exc}")
            return
        w = Worker(spawn_id=spawn_id, started_at=time.monotonic())
        w.ch = WorkerChannel(
            self._loop, to_fd, from_fd,
            on_message=lambda msg: self._on_message(w, msg),
            on_eof=lambda: self._on_eof(w),
            on_bad=lambda reason: self.kill(w, reason_key="protocol", why=reason),
            max_frame=self._s.max_worker_frame_bytes,
        )
        self._spawning[spawn_id] = w
        self.workers.append(w)

    def _start_failed(self, reason: str) -> None:
        self.start_failures += 1
        self.last_start_error = reason
        self.count_restart("start_failure")
        delay = min(5.0, 0.1 * 2 ** min(self.start_failures, 6))
        self._next_spawn_at = time.monotonic() + delay
        log.warning("worker failed to start", extra={"reason": reason, "retry_in_s": delay})

    def ensure_capacity(self) -> None:
        """Promote spares to keep ``workers`` active; spawn to keep ``workers + spares``."""
        if self.stopped:
            return
        for w in self.workers:
            if self.count("active") >= self._s.workers:
                break
            if w.state == "spare":
                w.state = "active"
        alive = sum(1 for w in self.workers if w.state in ("starting", "spare", "active"))
        missing = self._s.workers + self._s.spares - alive
        z = self._zygote
        if missing > 0 and z is not None and z.ready and time.monotonic() >= self._next_spawn_at:
            for _ in range(missing):
                self._spawn()
        self._events.on_capacity()

    def count_restart(self, reason: str) -> None:
        self.restarts[reason] = self.restarts.get(reason, 0) + 1
        if self._metrics is not None:
            self._metrics.worker_restarts.labels(reason=reason).inc()

    # ------------------------------------------------------------------ worker frames
    def _on_message(self, w: Worker, raw: Any) -> None:
        """A frame from a worker, which is untrusted: one that is not a valid message kills
        the worker and fails the item it held (never the request)."""
        try:
            msg = protocol.parse_worker_message(raw)
        except protocol.ProtocolError as exc:
            self.kill(w, reason_key="protocol", why=f"worker sent an invalid message: {exc}")
            return
        if isinstance(msg, protocol.Result):
            w.gold_seq = -1
            self._events.on_result(w, msg)
        elif isinstance(msg, protocol.Phase):
            cur = w.current()
            if cur is None or cur.seq != msg.seq:
                self.kill(w, reason_key="protocol", why="worker sent a phase for another item")
                return
            w.gold_seq = msg.seq if msg.gold else -1
        elif isinstance(msg, protocol.Ready):
            self._on_ready(w, msg)
        else:
            w.fatal = self.fatal = msg.reason
            log.error("worker refused to start", extra={"reason": w.fatal})

    def _on_ready(self, w: Worker, msg: protocol.Ready) -> None:
        if w.state != "starting":
            return
        self.sandbox_report = msg.sandbox
        self.start_failures = 0
        w.state = "active" if self.count("active") < self._s.workers else "spare"
        log.debug("worker ready", extra={"pid": w.pid, "state": w.state})
        self.ensure_capacity()

    def after_chunk(self, w: Worker) -> None:
        """A chunk finished: recycle the worker if it served enough or grew too big."""
        if w.state == "active":
            if w.items_done >= self._s.recycle_after_items:
                self._retire(w, "recycle_items")
            elif w.pid is not None and w.since - w.rss_checked_at >= _RSS_CHECK_S:
                # /proc read: at most once a second per worker, not after every chunk
                w.rss_checked_at = w.since
                if rss_mb(w.pid) > self._s.recycle_rss_mb:
                    self._retire(w, "recycle_rss")
        if w.state == "retiring" and not w.inflight and w.ch is not None:
            w.ch.close_input()
            w.state = "stopping"
            w.stop_deadline = time.monotonic() + self._s.worker_stop_timeout_s

    def _retire(self, w: Worker, reason: str) -> None:
        w.state = "retiring"
        self.count_restart(reason)
        log.info("recycling worker", extra={"pid": w.pid, "reason": reason, "items": w.items_done})
        self.ensure_capacity()

    # ------------------------------------------------------------------ death
    def _on_eof(self, w: Worker) -> None:
        if w.state == "dead":
            return
        was = w.state
        culprit = w.current()
        self._bury(w)
        if was == "starting":
            self._reap_later(w, None, starting=True)
        elif was == "stopping":
            self._reap_later(w, None)
        else:
            self.count_restart("crash")
            self._reap_later(w, culprit)
        self.ensure_capacity()

    def kill(self, w: Worker, *, reason_key: str, why: str = "") -> None:
        """SIGKILL a worker now. Its current item stays with the scheduler (which answers it
        with its own status); its other items go back through ``on_worker_down``."""
        culprit = w.current()
        if w.ch is not None:
            w.ch.kill()
        self._bury(w)
        self.count_restart(reason_key)
        if culprit is not None and why:
            self._events.on_crash(culprit, why, time.monotonic() - w.since)
        self._reap_later(w, None)
        self.ensure_capacity()

    def _bury(self, w: Worker, *, innocent: bool = False) -> None:
        """Mark dead, stop watching its pipes, hand its items back to the scheduler."""
        w.state = "dead"
        if w.ch is not None:
            w.ch.close()
        self._events.on_worker_down(w, innocent=innocent)

    def _reap_later(self, w: Worker, culprit: Pending | None, *, starting: bool = False) -> None:
        task = asyncio.create_task(self._reap(w, culprit, w.since, starting))
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)

    async def _reap(
        self, w: Worker, culprit: Pending | None, since: float, starting: bool
    ) -> None:
        """Wait for the process to exit (SIGKILL after a grace period), then report."""
        deadline = time.monotonic() + self._s.worker_stop_timeout_s
        ch = w.ch
        try:
            while ch is not None and not ch.exited:
                if time.monotonic() > deadline:
                    ch.kill()
                    if ch.pid is not None and ch.gone():
                        break
                await asyncio.sleep(0.005)
        finally:
            if w in self.workers:  # whatever happens (even cancellation), the record goes
                self.workers.remove(w)
        how = exit_text(ch.returncode) if ch is not None and ch.exited else "exit status unknown"
        if starting:
            self._start_failed(w.fatal or f"worker died while starting ({how})")
        if culprit is not None:
            reason = f"worker crashed ({how}) while scoring this item"
            self._events.on_crash(culprit, reason, time.monotonic() - since)
            log.warning("worker crashed", extra={"pid": w.pid, "exit": how})
        self.ensure_capacity()

    # ------------------------------------------------------------------ deadlines
    def tick(self, now: float) -> None:
        """Start-up and stop deadlines of workers and of the zygote."""
        for w in self.workers:
            late_start = w.state == "starting" and now - w.started_at > self._s.worker_start_timeout_s
            late_stop = w.state == "stopping" and now > w.stop_deadline
            if (late_start or late_stop) and w.ch is not None:
                w.ch.kill()
        self._check_zygote(now)
        self.ensure_capacity()

    def _check_zygote(self, now: float) -> None:
        """Restart a lost zygote after the backoff; kill one that does not answer."""
        z = self._zygote
        limit = self._s.worker_start_timeout_s
        if z is None or self.stopped:
            return
        if not z.connected:
            if now >= self._next_spawn_at:
                self._start_zygote()
        elif z.ready and z.ping_late(now):
            self._zygote_failed(
                f"zygote did not answer a ping within {self._s.zygote_ping_timeout_s:g}s")
        elif not z.ready and now - z.started_at > limit:
            self._zygote_failed(f"zygote not ready within {limit:g}s")
        elif any(now - w.started_at > limit for w in self._spawning.values()):
            # a stopped or wedged zygote: its workers are not forked, nor reaped
            self._zygote_failed(f"zygote did not answer a spawn request within {limit:g}s")

