"""One worker's channel: its two pipes, frames each way, EOF, kill and exit status.

The supervisor writes ``score`` frames to the task pipe through a buffer flushed by the event
loop (a worker busy with a long item must not block the server), and reads frames from the
result pipe as they come. What arrives goes *up* through the callbacks given at construction;
the channel knows nothing about items, deadlines or other workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

from reward_service import protocol

__all__ = ["WorkerChannel", "exit_text", "pid_alive", "rss_mb"]

_PAGE = os.sysconf("SC_PAGE_SIZE")

_READ_BYTES = 1 << 16  # per read from a worker: one small heap buffer, not a 1 MiB mmap


def pid_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` in MiB (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def exit_text(code: int | None) -> str:
    """``-9`` → "killed by SIGKILL", ``1`` → "exit code 1"."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class WorkerChannel:
    """The pipes of one worker process (non-blocking, watched by ``loop``).

    ``on_message(msg)`` gets each decoded frame, ``on_eof()`` the end of the result pipe,
    ``on_bad(reason)`` a byte stream that is not valid frames, or a frame over ``max_frame``
    bytes (refused at its header, before its body is read). The process's pid is known once
    the zygote reports it; ``exited``/``returncode`` once the zygote reaped it.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        to_fd: int,
        from_fd: int,
        *,
        on_message: Callable[[Any], None],
        on_eof: Callable[[], None],
        on_bad: Callable[[str], None],
        max_frame: int,
    ) -> None:
        self._loop = loop
        self._to_fd = to_fd
        self._from_fd = from_fd
        self._on_message = on_message
        self._on_eof = on_eof
        self._on_bad = on_bad
        self._decoder = protocol.FrameDecoder(max_frame)
        self._wbuf = bytearray()
        self._writer_on = False
        self.pid: int | None = None
        self.exited = False
        self.returncode: int | None = None
        os.set_blocking(to_fd, False)
        os.set_blocking(from_fd, False)
        loop.add_reader(from_fd, self._on_readable)

    # ------------------------------------------------------------------ out
    def send(self, msg: Any) -> None:
        """Queue one frame and write what the pipe takes now; the loop writes the rest."""
        self._wbuf += protocol.encode(msg)
        self._flush()

    def _flush(self) -> None:
        try:
            while self._wbuf:
                n = os.write(self._to_fd, self._wbuf)
                del self._wbuf[:n]
        except BlockingIOError:
            pass
        except OSError:
            self._wbuf.clear()  # the worker is gone; its EOF will be handled by the reader
        if self._wbuf and not self._writer_on:
            self._loop.add_writer(self._to_fd, self._flush)
            self._writer_on = True
        elif not self._wbuf and self._writer_on:
            self._loop.remove_writer(self._to_fd)
            self._writer_on = False

    def close_input(self) -> None:
        """EOF on the task pipe: the worker finishes its current item and exits 0."""
        if self._to_fd >= 0:
            if self._writer_on and not self._loop.is_closed():
                self._loop.remove_writer(self._to_fd)
                self._writer_on = False
            with contextlib.suppress(OSError):
                os.close(self._to_fd)
            self._to_fd = -1
            self._wbuf.clear()

    # ------------------------------------------------------------------ in
    def _on_readable(self) -> None:
        try:
            data = os.read(self._from_fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._on_eof()
            return
        try:
            messages = self._decoder.feed(data)
        except protocol.ProtocolError as exc:
            self._on_bad(f"worker sent a bad frame: {exc}")
            return
        for msg in messages:
            if self._from_fd < 0:  # an earlier message closed us
                return
            self._on_message(msg)

    # ------------------------------------------------------------------ end
    def close(self) -> None:
        """Stop watching both pipes and close them (idempotent)."""
        if self._from_fd >= 0:
            if not self._loop.is_closed():
                self._loop.remove_reader(self._from_fd)
            with contextlib.suppress(OSError):
                os.close(self._from_fd)
            self._from_fd = -1
        self.close_input()

    def kill(self) -> None:
        """SIGKILL the worker's process group (it is a session leader), if it may still run."""
        if self.pid is not None and not self.exited:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def gone(self) -> bool:
        """Reaped by the zygote, or no such live process any more."""
        return self.exited or (self.pid is not None and not pid_alive(self.pid))
