"""Bounds on what one connection can make the server hold, enforced in the HTTP protocol.

uvicorn's httptools protocol parses every byte it reads at once: one read of 256 KiB of
pipelined ``GET /healthz`` lines became ~8,000 queued request objects (10 MB sent without
reading took the server from 50 to 813 MB), a request of 3.2 million headers was kept whole
(+391 MB), a 100 MB header line was accumulated quadratically (12 s), and a reply its client
does not read stayed in the write buffer for as long as the connection lived. :class:`HttpLimits`
(mixed into the service's protocol by ``server.api.connections.guarded_protocol``) bounds each, before
the work it bounds:

* **pipelining**: at most ``max_pipelined`` requests wait behind the one in progress; the next
  one stops the connection: nothing more is read, the queued requests are answered, then the
  connection is closed (a client pipelining that deep retries the rest on a new connection);
* **header bytes**: a request line and headers over ``max_header_bytes`` are answered 431 and
  the connection closed; the parser is never fed more than that of one request's head, so
  neither httptools nor uvicorn accumulates more;
* **header count**: more than ``max_headers`` headers: 431 and close, from the parser's callback
  for the header past the limit;
* **slow readers**: a reply that makes no progress towards its client for ``write_timeout_s``
  aborts the connection (``close`` would wait for the buffer forever), and the write buffer of
  every connection whose transport paused writing counts against the server's
  :class:`~reward_service.server.api.memory_budget.MemoryBudget`: a reply that takes it over the
  budget aborts its own connection.

Each refusal is counted in ``reward_http_requests_total`` (route ``unmatched``: no route was
matched) through ``count``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from reward_service.server.api.memory_budget import MemoryBudget

__all__ = ["ConnectionLimits", "HttpLimits", "raw_answer"]

log = logging.getLogger(__name__)


def raw_answer(status: bytes, detail: bytes, *, extra: bytes = b"") -> bytes:
    """A complete JSON answer written by the protocol itself, connection closed."""
    body = b'{"detail":"%s"}' % detail
    return (b"HTTP/1.1 %s\r\ncontent-type: application/json\r\n%sconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (status, extra, len(body), body))


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The bounds (``REWARD_MAX_HEADER_BYTES``, ``_MAX_HEADERS``, ``_MAX_PIPELINED``,
    ``_WRITE_TIMEOUT_S``; defaults as the settings'), the budget and a counter of answers."""

    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    max_pipelined: int = 8
    write_timeout_s: float = 30.0
    budget: MemoryBudget | None = None
    count: Callable[[int], None] | None = None  # an answer given by the protocol (its code)


class _Stop(Exception):
    """Raised in a parser callback to stop parsing; ``send_400_response`` handles it."""


class HttpLimits(HttpToolsProtocol):
    """The bounds above; ``limits`` is set by the class that mixes it in."""

    limits: ConnectionLimits
    _in_head = True  # reading a request line and headers (not yet complete)
    _head_bytes = 0  # bytes fed to the parser for the current request's head
    _n_headers = 0
    _stop_answer: bytes | None = None  # what to answer once the parser has stopped
    _stopping = False  # a callback asked the parser to stop
    _stopped = False  # nothing more is read from this connection
    _write_timer: asyncio.TimerHandle | None = None
    _sent_mark = -1
    _heads = 0  # request heads completed on this connection

    # ------------------------------------------------------------------ reading
    def data_received(self, data: bytes) -> None:
        if self._stopped:
            return
        if self._in_head:
            room = self.limits.max_header_bytes - self._head_bytes
            if len(data) > room:
                view = memoryview(data)
                self._head_bytes += room
                heads = self._heads
                super().data_received(view[:room])  # type: ignore[arg-type]
                if self._stopped:
                    return
                if self._heads == heads:  # the head did not end within the limit
                    self._stop(431, b"request headers larger than %d bytes"
                               % self.limits.max_header_bytes)
                    return
                self.data_received(view[room:])  # type: ignore[arg-type]
                return
            self._head_bytes += len(data)
        super().data_received(data)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._n_headers += 1
        if self._n_headers > self.limits.max_headers:
            self._raise_stop(431, b"more than %d request headers" % self.limits.max_headers)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._heads += 1
        cycle = self.cycle
        if (cycle is not None and not cycle.response_complete
                and len(self.pipeline) >= self.limits.max_pipelined):
            self._raise_stop(None, b"")  # the queued requests are answered, then close
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head, self._head_bytes, self._n_headers = True, 0, 0

    def _raise_stop(self, status: int | None, detail: bytes) -> None:
        self._stopping = True
        self._stop_answer = None if status is None else self._answer(status, detail)
        raise _Stop

    def send_400_response(self, msg: str) -> None:
        if not self._stopping:  # a real parse error: uvicorn's 400
            super().send_400_response(msg)
            return
        self._finish(self._stop_answer)

    def _answer(self, status: int, detail: bytes) -> bytes:
        if status == 431:
            return raw_answer(b"431 Request Header Fields Too Large", detail)
        return raw_answer(b"%d Error" % status, detail)  # pragma: no cover - 431 only

    def _stop(self, status: int, detail: bytes) -> None:
        self._finish(self._answer(status, detail))

    def _finish(self, answer: bytes | None) -> None:
        """Read nothing more; answer (now, or after what is in progress) and close."""
        self._stopped = True
        self.flow.pause_reading()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # a response is in progress (and maybe queued ones): the last of them closes
            last = self.pipeline[0][0] if self.pipeline else cycle
            last.keep_alive = False
            return
        count = self.limits.count
        if answer is not None and not self.transport.is_closing():
            if count is not None:
                count(int(answer[9:12]))
            self.transport.write(answer)
        self.transport.close()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._stopped:
            self.flow.pause_reading()

    # ------------------------------------------------------------------ writing
    def unsent_bytes(self) -> int:
        """Reply bytes in the transport's buffer, not yet taken by the client."""
        try:
            return int(self.transport.get_write_buffer_size())
        except (AttributeError, NotImplementedError):  # no transport (yet), a test's
            return 0

    def pause_writing(self) -> None:
        super().pause_writing()
        budget = self.limits.budget
        if budget is not None:
            budget.stalled.add(self)
            if budget.over():
                log.warning("reply aborted: unsent bytes over the memory budget",
                            extra={"unsent": self.unsent_bytes(), "budget": budget.limit})
                self._abort()
                return
        self._sent_mark = self._sent()
        self._arm_write_timer()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._release()

    def _sent(self) -> int:
        return int(getattr(self.transport, "written", 0)) - self.unsent_bytes()

    def _arm_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
        self._write_timer = self.loop.call_later(self.limits.write_timeout_s, self._write_check)

    def _write_check(self) -> None:
        self._write_timer = None
        if self.transport.is_closing() and self.unsent_bytes() == 0:
            return
        sent = self._sent()
        if sent <= self._sent_mark:  # nothing taken by the client since the last check
            log.warning("reply aborted: the client read nothing",
                        extra={"unsent": self.unsent_bytes(),
                               "write_timeout_s": self.limits.write_timeout_s})
            self._abort()
            return
        self._sent_mark = sent
        self._arm_write_timer()

    def _abort(self) -> None:
        self._release()
        self.transport.abort()

    def _release(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        budget = self.limits.budget
        if budget is not None:
            budget.stalled.discard(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        super().connection_lost(exc)
