"""The supervisor's link to the zygote: start it, speak the control protocol, notice its loss.

The zygote (``reward_service/sandboxed/zygote.py``) is started as a fresh interpreter (fork+exec, clean
environment, its own session) with one end of a SOCK_SEQPACKET socket pair. Messages are the
typed records of ``reward_service/control.py``; what the zygote reports goes *up* through a
:class:`ZygoteEvents` object (the pool), which decides what to do about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Protocol

import orjson

import reward_service
from reward_service import control
from reward_service.server.pool.channel import exit_text
from reward_service.settings import Settings

__all__ = ["ZygoteEvents", "ZygoteLink"]

log = logging.getLogger(__name__)

_PKG_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(reward_service.__file__)))


class ZygoteEvents(Protocol):
    """What the link reports; called from the event loop."""

    def zygote_ready(self) -> None: ...
    def worker_spawned(self, spawn_id: int, pid: int) -> None: ...
    def spawn_failed(self, spawn_id: int, reason: str) -> None: ...
    def worker_exited(self, pid: int, returncode: int) -> None: ...
    def zygote_lost(self, how: str, *, failed_start: bool) -> None: ...


class ZygoteLink:
    """One zygote process at a time and its control socket."""

    def __init__(
        self, settings: Settings, loop: asyncio.AbstractEventLoop, events: ZygoteEvents
    ) -> None:
        self._s = settings
        self._loop = loop
        self._events = events
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self.ready = False
        self.started_at = 0.0
        self._pings = 0
        self._ping_sent_at: float | None = None  # the unanswered ping, if one is out
        self._pong_at = 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def connected(self) -> bool:
        return self._ctrl is not None

    def _config(self, child_fd: int) -> bytes:
        s = self._s
        return orjson.dumps({
            "ctrl_fd": child_fd,
            "parent_pid": os.getpid(),
            "probes": s.enable_test_probes,
            "warm_parser": s.warm_parser,
            "library_patches": s.library_patches,
            "sandbox": {
                "mode": s.sandbox,
                "memory_mb": s.worker_memory_mb,
                "cpu_s": s.worker_cpu_s,
                "uid": s.worker_uid,
                "gid": s.worker_gid,
                "landlock": s.sandbox_landlock,
            },
        })

    def start(self) -> None:
        """Start a zygote; raises OSError when no process or socket can be made."""
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {  # a clean environment: nothing of the server's reaches untrusted code
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": _PKG_ROOT,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
        }
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "reward_service.sandboxed.zygote",
                 self._config(child_end.fileno()).decode()],
                pass_fds=(child_end.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
                cwd="/",
                start_new_session=True,
            )
        except OSError:
            parent_end.close()
            raise
        finally:
            child_end.close()
        parent_end.setblocking(False)
        self._ctrl = parent_end
        self.ready = False
        self.started_at = time.monotonic()
        self._ping_sent_at = None
        self._pong_at = 0.0
        self._loop.add_reader(parent_end.fileno(), self.poll)
        log.debug("zygote started", extra={"pid": self._proc.pid})

    def spawn(self, spawn_id: int) -> tuple[int, int]:
        """Ask for one worker wired to a fresh pair of pipes; returns (to_fd, from_fd).

        Raises OSError when the pipes cannot be made (EMFILE) or the zygote is unreachable.
        """
        if self._ctrl is None:
            raise OSError("no zygote")
        task_r, task_w = os.pipe()
        try:
            res_r, res_w = os.pipe()
        except OSError:
            os.close(task_r)
            os.close(task_w)
            raise
        try:
            socket.send_fds(self._ctrl, [control.encode(control.Spawn(id=spawn_id))],
                            [task_r, res_w])
        except OSError:
            for fd in (task_w, res_r):
                os.close(fd)
            raise
        finally:
            os.close(task_r)
            os.close(res_w)
        return task_w, res_r

    def poll(self) -> None:
        """Read every control message waiting; report each, or the zygote's loss."""
        while self._ctrl is not None:
            try:
                data = self._ctrl.recv(control.MAX_PACKET)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._lost()
                return
            try:
                msg = control.decode(data)
            except control.ControlError as exc:
                log.error("bad control message from the zygote", extra={"reason": str(exc)})
                continue
            self._dispatch(msg)

    def _dispatch(self, msg: control.Message) -> None:
        ev = self._events
        if isinstance(msg, control.Exited):
            ev.worker_exited(msg.pid, msg.returncode)
        elif isinstance(msg, control.Spawned):
            ev.worker_spawned(msg.id, msg.pid)
        elif isinstance(msg, control.SpawnFailed):
            ev.spawn_failed(msg.id, msg.reason)
        elif isinstance(msg, control.Pong):
            if msg.n == self._pings:
                self._ping_sent_at = None
                self._pong_at = time.monotonic()
        elif isinstance(msg, control.Ready):
            log.info("zygote ready", extra={"startup_s": round(time.monotonic() - self.started_at, 2),
                                            "warmup_s": round(msg.warmup_s, 2),
                                            "dfa_states": msg.dfa_states})
            self.ready = True
            ev.zygote_ready()

    def ping_late(self, now: float) -> bool:
        """Send a ping every ``REWARD_ZYGOTE_PING_INTERVAL_S``; True once one has gone
        unanswered for ``REWARD_ZYGOTE_PING_TIMEOUT_S`` (a stopped or wedged zygote: it
        would neither fork replacements nor reap). Called by the crew at each tick."""
        if self._ctrl is None:
            return False
        if self._ping_sent_at is not None:
            return now - self._ping_sent_at > self._s.zygote_ping_timeout_s
        if now - max(self._pong_at, self.started_at) >= self._s.zygote_ping_interval_s:
            self._pings += 1
            try:
                self._ctrl.send(control.encode(control.Ping(n=self._pings)))
            except BlockingIOError:  # its socket is full: it has not read for a while
                pass
            except OSError:
                return False  # lost: poll() reports it
            self._ping_sent_at = now
        return False

    def _close_ctrl(self) -> None:
        if self._ctrl is not None:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._ctrl.fileno())
            self._ctrl.close()
            self._ctrl = None
        self.ready = False

    def _lost(self) -> None:
        was_ready = self.ready
        how = self.kill()
        log.error("zygote lost", extra={"exit": how, "was_ready": was_ready})
        self._events.zygote_lost(how, failed_start=not was_ready)

    def kill(self) -> str:
        """SIGKILL the zygote's group, reap it, close the socket; returns how it ended."""
        self._close_ctrl()
        how = "unknown"
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1)
            how = exit_text(self._proc.returncode)
            self._proc = None
        return how

    def stop(self) -> None:
        """EOF on the control socket: the zygote SIGKILLs its workers, reaps them, exits."""
        self._close_ctrl()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=self._s.worker_stop_timeout_s + 5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait()
            self._proc = None
