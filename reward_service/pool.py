"""The supervisor: owns N active + S spare sandboxed workers and enforces item deadlines.

Who starts what, who stops it, and what happens on each failure:

* ``WorkerPool.start`` (called by the app's lifespan, in the event-loop thread) starts the
  zygote (``zygote.py``) as a fresh interpreter (spawn: fork+exec, nothing inherited from the
  threaded server). The zygote imports and warms the scorers once and forks each worker on
  request (multiprocessing's ``forkserver`` model), so a replacement costs tens of
  milliseconds, not a second of the CPU the other workers need. Each worker runs in its own
  session with its own pair of pipes. Death is chained: PDEATHSIG=SIGKILL makes the zygote die
  with the server and every worker die with the zygote (set again after the uid drop). The
  zygote reaps its workers and reports their exit status; if it dies, it is restarted.
* Chunks of items go to the least-busy active worker, at most ``chunks_in_flight`` each. A
  worker scores in order and answers one frame per item, so the supervisor always knows which
  item is running and since when: the deadline is ``timeout_s`` from the item's start.
* **Timeout**: the watchdog SIGKILLs the worker's process group, the item becomes ``timeout``,
  the worker's unstarted items go back to the front of the queue, a warm spare becomes active
  (capacity never drops), and a new spare is spawned. The dead worker is reaped (no zombies).
* **Crash** (segfault, OOM kill, exit): the same, the item becomes ``error`` with the exit
  status. A crash is not a timeout.
* **Start failure**: retried with backoff; a strict-sandbox refusal is fatal for ``start``.
  If no worker can be started for a while, queued items fail with ``error`` instead of
  waiting forever.
* **Recycling**: after ``recycle_after_items`` items or RSS above ``recycle_rss_mb``, a worker
  takes no new chunks, finishes what it holds, gets EOF and exits; a spare replaces it.
* **Overload**: more than ``max_queue_items`` outstanding → ``OverloadedError`` (HTTP 503).
* ``WorkerPool.stop`` (lifespan shutdown, after the server drained requests): refuses new
  work, fails what is left, sends EOF to every worker, waits ``worker_stop_timeout_s``, then
  SIGKILLs the process groups and reaps them all.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson

import reward_service
from reward_service import protocol
from reward_service.errors import DrainingError, OverloadedError, PoolStartError
from reward_service.scorers.base import Verdict
from reward_service.settings import Settings

if TYPE_CHECKING:
    from reward_service.metrics import Metrics

__all__ = ["Outcome", "PoolStatus", "Task", "WorkerPool"]

log = logging.getLogger(__name__)

WorkerState = Literal["starting", "spare", "active", "retiring", "stopping", "dead"]
_TICK_S = 0.02
_PAGE = os.sysconf("SC_PAGE_SIZE")
_RSS_CHECK_S = 1.0  # how often a busy worker's RSS is read (for REWARD_RECYCLE_RSS_MB)
_READ_BYTES = 1 << 16  # per read from a worker: one small heap buffer, not a 1 MiB mmap
_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(reward_service.__file__)))


@dataclass(frozen=True, slots=True)
class Task:
    """One item to score."""

    scorer: str
    response: str
    ground_truth: str
    timeout_s: float
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What came back for a task: the verdict and the time it took on a worker."""

    verdict: Verdict
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class PoolStatus:
    active: int
    spare: int
    starting: int
    retiring: int
    outstanding_items: int
    queued_chunks: int
    ready: bool
    draining: bool
    restarts: dict[str, int]


@dataclass(slots=True, eq=False)
class _Request:
    """One ``submit`` call: its outcomes fill in as they come; ``done`` is set by the last."""

    outcomes: list[Outcome | None]
    left: int
    done: asyncio.Future[None]
    cancelled: bool = False


@dataclass(slots=True, eq=False)
class _Pending:
    task: Task
    req: _Request
    index: int  # position in the request's outcomes
    seq: int
    resolved: bool = False

    @property
    def wanted(self) -> bool:
        """Still worth scoring: not answered, and its request still waits for it."""
        return not self.resolved and not self.req.cancelled


@dataclass(slots=True, eq=False)
class _Chunk:
    items: list[_Pending]
    done: int = 0


@dataclass(slots=True, eq=False)
class _Worker:
    spawn_id: int
    to_fd: int
    from_fd: int
    started_at: float
    pid: int | None = None  # known once the zygote has forked it
    returncode: int | None = None
    exited: bool = False  # the zygote reaped it
    state: WorkerState = "starting"
    inflight: deque[_Chunk] = field(default_factory=deque)
    by_seq: dict[int, _Pending] = field(default_factory=dict)
    since: float = 0.0
    stop_deadline: float = 0.0
    items_done: int = 0
    rss_checked_at: float = 0.0
    decoder: protocol.FrameDecoder = field(default_factory=protocol.FrameDecoder)
    wbuf: bytearray = field(default_factory=bytearray)
    writer_on: bool = False
    fatal: str | None = None

    def current(self) -> _Pending | None:
        if not self.inflight:
            return None
        chunk = self.inflight[0]
        return chunk.items[chunk.done]


def chunk_sizes(n: int, cap: int, workers: int) -> list[int]:
    """Chunk sizes for a request of ``n`` items: at most ``cap``, shrinking towards the end
    (each chunk at most a quarter of the rest per worker pair), so the request's last items
    are spread over every worker instead of one worker finishing a full chunk, with another
    queued behind it, while the others idle. Sums to ``n``."""
    sizes: list[int] = []
    left = n
    while left > 0:
        size = max(1, min(cap, math.ceil(left / (2 * workers))))
        sizes.append(size)
        left -= size
    return sizes


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _exit_text(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class WorkerPool:
    """Supervisor of the worker processes. Create, ``await start()``, ``submit``, ``stop``."""

    def __init__(self, settings: Settings, *, metrics: Metrics | None = None) -> None:
        self._s = settings
        self._metrics = metrics
        self._workers: list[_Worker] = []
        self._queue: deque[_Chunk] = deque()
        self._seq = itertools.count()
        self._outstanding = 0
        self._draining = False  # no new submissions (SIGTERM); in-flight work still runs
        self._stopped = False  # stop(): no more spawning
        self._started = False
        self._watchdog: asyncio.Task[None] | None = None
        self._reapers: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._start_failures = 0  # consecutive
        self._last_start_error: str | None = None
        self._fatal: str | None = None  # a worker refused to run (strict sandbox)
        self._next_spawn_at = 0.0
        self._restarts: dict[str, int] = {}
        self._spawn_ids = itertools.count()
        self._spawning: dict[int, _Worker] = {}  # spawn id → worker whose pid is not known yet
        self._by_pid: dict[int, _Worker] = {}
        self._zygote: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self._zygote_ready = False
        self._zygote_started_at = 0.0
        self.sandbox_report: dict[str, Any] = {}

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Spawn the workers and wait until ``workers`` of them are warm."""
        self._loop = asyncio.get_running_loop()
        self._started = True
        self._start_zygote()
        self._watchdog = asyncio.create_task(self._watch(), name="reward-pool-watchdog")
        deadline = time.monotonic() + self._s.worker_start_timeout_s
        try:
            while self._count("active") < self._s.workers:
                fatal = self._fatal
                if fatal or self._start_failures >= 3:
                    raise PoolStartError(fatal or self._last_start_error or "workers keep dying")
                if time.monotonic() > deadline:
                    raise PoolStartError(
                        f"{self._count('active')}/{self._s.workers} workers ready after "
                        f"{self._s.worker_start_timeout_s:.0f}s"
                    )
                await asyncio.sleep(0.02)
        except BaseException:
            await self.stop()
            raise
        log.info("pool ready", extra={"workers": self._s.workers, "spares": self._s.spares})

    async def stop(self) -> None:
        """Refuse new work, fail what is left, stop every worker; nothing is left running."""
        self._draining = self._stopped = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
            self._watchdog = None
        for t in list(self._reapers):
            t.cancel()
        if self._loop is not None and not self._loop.is_closed():
            for w in self._workers:
                if w.from_fd >= 0:
                    self._loop.remove_reader(w.from_fd)
        for w in self._workers:
            self._close_to(w)  # EOF: a worker finishes its current item and exits 0
        deadline = time.monotonic() + self._s.worker_stop_timeout_s
        while self._ctrl is not None and time.monotonic() < deadline:
            self._on_ctrl()  # collect exit reports
            if all(w.exited or w.pid is None for w in self._workers):
                break
            await asyncio.sleep(0.02)
        for w in self._workers:
            self._killpg(w)
            self._discard(w)
            for chunk in w.inflight:
                for p in chunk.items:
                    self._resolve(p, Verdict("error", reason="service shutting down"), 0.0)
            w.inflight.clear()
        self._stop_zygote()
        self._fail_queue("service shutting down")
        self._workers.clear()
        log.info("pool stopped")

    @property
    def ready(self) -> bool:
        return self._started and not self._draining and self._count("active") > 0

    @property
    def draining(self) -> bool:
        return self._draining

    def drain(self) -> None:
        """Stop taking new work (SIGTERM): in-flight work still finishes."""
        self._draining = True

    def status(self) -> PoolStatus:
        return PoolStatus(
            active=self._count("active"),
            spare=self._count("spare"),
            starting=self._count("starting"),
            retiring=self._count("retiring") + self._count("stopping"),
            outstanding_items=self._outstanding,
            queued_chunks=len(self._queue),
            ready=self.ready,
            draining=self._draining,
            restarts=dict(self._restarts),
        )

    def worker_pids(self, state: WorkerState | None = None) -> list[int]:
        return [
            w.pid for w in self._workers
            if w.pid is not None and (state is None or w.state == state)
        ]

    @property
    def zygote_pid(self) -> int | None:
        return self._zygote.pid if self._zygote is not None else None

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
        req = _Request([None] * n, n, asyncio.get_running_loop().create_future())
        seq = self._seq
        pendings = [_Pending(t, req, i, next(seq)) for i, t in enumerate(tasks)]
        self._outstanding += n
        i = 0
        for size in chunk_sizes(n, self._s.chunk_size, self._s.workers):
            self._queue.append(_Chunk(pendings[i : i + size]))
            i += size
        self._pump()
        try:
            await req.done
        except asyncio.CancelledError:
            # the caller is gone: unsent items are dropped by _pump, late outcomes ignored
            req.cancelled = True
            self._outstanding -= req.left
            req.left = 0
            raise
        return req.outcomes  # type: ignore[return-value]  # all filled once done is set

    # ------------------------------------------------------------------ workers
    def _count(self, state: WorkerState) -> int:
        return sum(1 for w in self._workers if w.state == state)

    # ------------------------------------------------------------------ zygote
    def _start_zygote(self) -> None:
        assert self._loop is not None
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {
            "ctrl_fd": child_end.fileno(),
            "parent_pid": os.getpid(),
            "probes": self._s.enable_test_probes,
            "sandbox": {
                "mode": self._s.sandbox,
                "memory_mb": self._s.worker_memory_mb,
                "cpu_s": self._s.worker_cpu_s,
                "uid": self._s.worker_uid,
                "gid": self._s.worker_gid,
            },
        }
        env = {  # a clean environment: nothing of the server's reaches untrusted code
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": _PKG_ROOT,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
        }
        try:
            self._zygote = subprocess.Popen(
                [sys.executable, "-m", "reward_service.zygote", orjson.dumps(cfg).decode()],
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            parent_end.close()
            self._start_failed(f"zygote spawn failed: {exc}")
            return
        finally:
            child_end.close()
        parent_end.setblocking(False)
        self._ctrl = parent_end
        self._zygote_ready = False
        self._zygote_started_at = time.monotonic()
        self._loop.add_reader(parent_end.fileno(), self._on_ctrl)
        log.debug("zygote started", extra={"pid": self._zygote.pid})

    def _stop_zygote(self) -> None:
        """EOF on the control socket: the zygote SIGKILLs its workers, reaps them, exits."""
        if self._ctrl is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._ctrl.fileno())
            self._ctrl.close()
            self._ctrl = None
        self._zygote_ready = False
        if self._zygote is not None:
            try:
                self._zygote.wait(timeout=self._s.worker_stop_timeout_s + 5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._zygote.pid, signal.SIGKILL)
                self._zygote.wait()
            self._zygote = None

    def _on_ctrl(self) -> None:
        if self._ctrl is None:
            return
        while True:
            try:
                data = self._ctrl.recv(4096)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._on_zygote_lost()
                return
            msg = orjson.loads(data)
            op = msg.get("op")
            if op == "exited":
                w = self._by_pid.pop(msg["pid"], None)
                if w is not None:
                    w.exited, w.returncode = True, msg["returncode"]
            elif op == "spawned":
                w = self._spawning.pop(msg["id"], None)
                if w is not None:
                    w.pid = msg["pid"]
                    self._by_pid[w.pid] = w
                    if w.state == "dead":  # killed before its pid was known
                        self._killpg(w)
            elif op == "spawn_failed":
                w = self._spawning.pop(msg["id"], None)
                if w is not None:
                    w.exited = True
                    self._bury(w)
                    self._workers.remove(w)
                    self._start_failed(f"fork failed: {msg.get('reason')}")
            elif op == "ready":
                self._zygote_ready = True
                self._ensure_capacity()

    def _on_zygote_lost(self) -> None:
        """The zygote died: its workers die with it (PDEATHSIG); start a new one."""
        if self._stopped:
            return
        how = "unknown"
        if self._zygote is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._zygote.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._zygote.wait(timeout=1)
            how = _exit_text(self._zygote.returncode)
        log.error("zygote lost; restarting it", extra={"exit": how})
        self._count_restart("zygote")
        if self._ctrl is not None and self._loop is not None:
            self._loop.remove_reader(self._ctrl.fileno())
            self._ctrl.close()
            self._ctrl = None
        for w in self._workers:  # they are gone or going: PDEATHSIG
            w.exited = w.exited or w.pid is None or not _pid_alive(w.pid)
        self._spawning.clear()
        self._zygote = None
        self._zygote_ready = False
        if not self._zygote_ready and self._zygote_started_at:
            self._start_failures += 1
        self._start_zygote()

    def _spawn(self) -> None:
        """Ask the zygote to fork one worker wired to a fresh pair of pipes."""
        assert self._loop is not None and self._ctrl is not None
        task_r, task_w = os.pipe()
        res_r, res_w = os.pipe()
        spawn_id = next(self._spawn_ids)
        try:
            socket.send_fds(self._ctrl, [orjson.dumps({"op": "spawn", "id": spawn_id})],
                            [task_r, res_w])
        except OSError as exc:
            for fd in (task_r, task_w, res_r, res_w):
                os.close(fd)
            self._start_failed(f"zygote unreachable: {exc}")
            return
        os.close(task_r)
        os.close(res_w)
        os.set_blocking(task_w, False)
        os.set_blocking(res_r, False)
        w = _Worker(spawn_id=spawn_id, to_fd=task_w, from_fd=res_r, started_at=time.monotonic())
        self._spawning[spawn_id] = w
        self._workers.append(w)
        self._loop.add_reader(res_r, self._on_readable, w)

    def _start_failed(self, reason: str) -> None:
        self._start_failures += 1
        self._last_start_error = reason
        self._count_restart("start_failure")
        delay = min(5.0, 0.1 * 2 ** min(self._start_failures, 6))
        self._next_spawn_at = time.monotonic() + delay
        log.warning("worker failed to start", extra={"reason": reason, "retry_in_s": delay})

    def _ensure_capacity(self) -> None:
        """Promote spares to keep ``workers`` active; spawn to keep ``workers + spares``."""
        if self._stopped:
            return
        for w in self._workers:
            if self._count("active") >= self._s.workers:
                break
            if w.state == "spare":
                w.state = "active"
        alive = sum(1 for w in self._workers if w.state in ("starting", "spare", "active"))
        missing = self._s.workers + self._s.spares - alive
        if missing > 0 and self._zygote_ready and time.monotonic() >= self._next_spawn_at:
            for _ in range(missing):
                self._spawn()
        self._pump()

    def _count_restart(self, reason: str) -> None:
        self._restarts[reason] = self._restarts.get(reason, 0) + 1
        if self._metrics is not None:
            self._metrics.worker_restarts.labels(reason=reason).inc()

    # ------------------------------------------------------------------ I/O
    def _on_readable(self, w: _Worker) -> None:
        try:
            data = os.read(w.from_fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._on_eof(w)
            return
        try:
            messages = w.decoder.feed(data)
        except protocol.ProtocolError as exc:
            self._kill(w, "error", f"worker sent a bad frame: {exc}", reason_key="protocol")
            return
        for msg in messages:
            op = msg.get("op") if isinstance(msg, dict) else None
            if op == "result":
                self._on_result(w, msg)
            elif op == "ready":
                self._on_ready(w, msg)
            elif op == "fatal":
                w.fatal = self._fatal = str(msg.get("reason"))
                log.error("worker refused to start", extra={"reason": w.fatal})

    def _on_ready(self, w: _Worker, msg: dict[str, Any]) -> None:
        if w.state != "starting":
            return
        self.sandbox_report = msg.get("sandbox") or {}
        self._start_failures = 0
        w.state = "active" if self._count("active") < self._s.workers else "spare"
        log.debug("worker ready", extra={"pid": w.pid, "state": w.state})
        self._ensure_capacity()

    def _on_result(self, w: _Worker, msg: dict[str, Any]) -> None:
        p = w.by_seq.pop(msg.get("seq", -1), None)
        cur = w.current()
        if p is None or p is not cur:
            self._kill(w, "error", "worker answered out of order", reason_key="protocol")
            return
        now = time.monotonic()
        chunk = w.inflight[0]
        chunk.done += 1
        w.items_done += 1
        w.since = now
        verdict = Verdict(
            status=msg["status"],
            extracted=msg.get("extracted"),
            extracted_gold=msg.get("extracted_gold"),
            reason=msg.get("reason"),
        )
        self._resolve(p, verdict, float(msg.get("elapsed_s", 0.0)))
        if chunk.done == len(chunk.items):
            w.inflight.popleft()
            self._after_chunk(w)
            self._pump()

    def _after_chunk(self, w: _Worker) -> None:
        if w.state == "active":
            if w.items_done >= self._s.recycle_after_items:
                self._retire(w, "recycle_items")
            elif w.pid is not None and w.since - w.rss_checked_at >= _RSS_CHECK_S:
                # /proc read: at most once a second per worker, not after every chunk
                w.rss_checked_at = w.since
                if self._rss_mb(w.pid) > self._s.recycle_rss_mb:
                    self._retire(w, "recycle_rss")
        if w.state == "retiring" and not w.inflight:
            self._close_to(w)
            w.state = "stopping"
            w.stop_deadline = time.monotonic() + self._s.worker_stop_timeout_s

    def _retire(self, w: _Worker, reason: str) -> None:
        w.state = "retiring"
        self._count_restart(reason)
        log.info("recycling worker", extra={"pid": w.pid, "reason": reason, "items": w.items_done})
        self._ensure_capacity()

    @staticmethod
    def _rss_mb(pid: int) -> float:
        try:
            with open(f"/proc/{pid}/statm") as fh:
                return int(fh.read().split()[1]) * _PAGE / 2**20
        except (OSError, ValueError, IndexError):
            return 0.0

    def _send(self, w: _Worker, chunk: _Chunk) -> None:
        items = []
        for p in chunk.items:
            w.by_seq[p.seq] = p
            t = p.task
            items.append([p.seq, t.scorer, t.response, t.ground_truth, dict(t.params)])
        if not w.inflight:
            w.since = time.monotonic()
        w.inflight.append(chunk)
        w.wbuf += protocol.encode({"op": "score", "items": items})
        self._flush(w)

    def _flush(self, w: _Worker) -> None:
        assert self._loop is not None
        try:
            while w.wbuf:
                n = os.write(w.to_fd, w.wbuf)
                del w.wbuf[:n]
        except BlockingIOError:
            pass
        except OSError:
            w.wbuf.clear()  # the worker is gone; its EOF will be handled by the reader
        if w.wbuf and not w.writer_on:
            self._loop.add_writer(w.to_fd, self._flush, w)
            w.writer_on = True
        elif not w.wbuf and w.writer_on:
            self._loop.remove_writer(w.to_fd)
            w.writer_on = False

    def _pump(self) -> None:
        """Give queued chunks to the least-busy active workers."""
        limit = self._s.chunks_in_flight
        while self._queue:
            free = [w for w in self._workers if w.state == "active" and len(w.inflight) < limit]
            if not free:
                return
            w = min(free, key=lambda x: len(x.inflight))
            chunk = self._queue.popleft()
            chunk.items = [p for p in chunk.items if p.wanted]
            if chunk.items:
                self._send(w, chunk)

    # ------------------------------------------------------------------ failures
    def _resolve(self, p: _Pending, verdict: Verdict, elapsed: float) -> None:
        if not p.wanted:
            return
        p.resolved = True
        req = p.req
        req.outcomes[p.index] = Outcome(verdict, elapsed)
        req.left -= 1
        self._outstanding -= 1
        if req.left == 0 and not req.done.done():
            req.done.set_result(None)

    def _on_eof(self, w: _Worker) -> None:
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
            self._count_restart("crash")
            self._reap_later(w, culprit)
        self._ensure_capacity()

    def _kill(
        self, w: _Worker, status: Literal["timeout", "error"], reason: str, *, reason_key: str
    ) -> None:
        """Kill a worker now; its current item gets ``status``, its other items are requeued."""
        culprit = w.current()
        self._killpg(w)
        self._bury(w)
        self._count_restart(reason_key)
        if culprit is not None:
            self._resolve(culprit, Verdict(status, reason=reason), time.monotonic() - w.since)
        self._reap_later(w, None)
        self._ensure_capacity()

    def _bury(self, w: _Worker) -> None:
        """Mark dead, stop watching its pipes, requeue its unstarted items (front of queue)."""
        w.state = "dead"
        self._discard(w)
        culprit = w.current()
        rest: list[_Pending] = []
        for chunk in w.inflight:
            rest.extend(p for p in chunk.items[chunk.done :] if p is not culprit)
        w.inflight.clear()
        w.by_seq.clear()
        if rest:
            self._queue.appendleft(_Chunk(rest))

    def _discard(self, w: _Worker) -> None:
        """Stop watching a worker's pipes and close them (idempotent)."""
        live = self._loop is not None and not self._loop.is_closed()
        if w.from_fd >= 0:
            if live:
                self._loop.remove_reader(w.from_fd)  # type: ignore[union-attr]
            with contextlib.suppress(OSError):
                os.close(w.from_fd)
            w.from_fd = -1
        self._close_to(w)

    def _close_to(self, w: _Worker) -> None:
        if w.to_fd >= 0:
            if w.writer_on and self._loop is not None:
                self._loop.remove_writer(w.to_fd)
                w.writer_on = False
            with contextlib.suppress(OSError):
                os.close(w.to_fd)
            w.to_fd = -1

    @staticmethod
    def _killpg(w: _Worker) -> None:
        if w.pid is not None and not w.exited:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(w.pid, signal.SIGKILL)

    def _reap_later(self, w: _Worker, culprit: _Pending | None, *, starting: bool = False) -> None:
        since = w.since
        task = asyncio.create_task(self._reap(w, culprit, since, starting))
        self._reapers.add(task)
        task.add_done_callback(self._reapers.discard)

    async def _reap(
        self, w: _Worker, culprit: _Pending | None, since: float, starting: bool
    ) -> None:
        """Wait for the process to exit (SIGKILL after a grace period), then report."""
        deadline = time.monotonic() + self._s.worker_stop_timeout_s
        while not w.exited:
            if time.monotonic() > deadline:
                self._killpg(w)
                if w.pid is not None and not _pid_alive(w.pid):
                    break
            await asyncio.sleep(0.005)
        self._workers.remove(w)
        how = _exit_text(w.returncode) if w.exited else "exit status unknown"
        if starting:
            self._start_failed(w.fatal or f"worker died while starting ({how})")
        if culprit is not None:
            reason = f"worker crashed ({how}) while scoring this item"
            self._resolve(culprit, Verdict("error", reason=reason), time.monotonic() - since)
            log.warning("worker crashed", extra={"pid": w.pid, "exit": how})
        self._ensure_capacity()

    async def _watch(self) -> None:
        """Deadlines: items (from their start), worker start-up, graceful stops."""
        while True:
            await asyncio.sleep(_TICK_S)
            now = time.monotonic()
            for w in list(self._workers):
                if w.state in ("active", "retiring"):
                    cur = w.current()
                    if cur is not None and now - w.since > cur.task.timeout_s:
                        self._kill(
                            w,
                            "timeout",
                            f"deadline of {cur.task.timeout_s:g}s exceeded",
                            reason_key="timeout",
                        )
                elif (w.state == "starting" and now - w.started_at > self._s.worker_start_timeout_s) or (w.state == "stopping" and now > w.stop_deadline):
                    self._killpg(w)
            if (
                self._ctrl is not None
                and not self._zygote_ready
                and now - self._zygote_started_at > self._s.worker_start_timeout_s
            ):
                self._start_failed("zygote not ready in time")
                self._on_zygote_lost()
            self._ensure_capacity()
            if self._start_failures >= 5 and self._count("active") == 0:
                self._fail_queue(f"no worker could be started: {self._last_start_error}")

    def _fail_queue(self, reason: str) -> None:
        while self._queue:
            for p in self._queue.popleft().items:
                self._resolve(p, Verdict("error", reason=reason), 0.0)
