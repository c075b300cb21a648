"""Connection guards for uvicorn: a cap on open connections and a deadline for request headers.

uvicorn arms its keep-alive timer only after a first response, so a connection that never
sends a request is held forever; ~20k of them exhausted the server's file descriptors, after
which the pool could not open the pipes of a replacement worker. :func:`guarded_protocol`
returns uvicorn's httptools protocol with two changes:

* **cap**: at ``max_connections``, a new connection closes the connection that has waited
  longest for request headers (an idle one); if every connection has a request in progress,
  the new one gets ``503`` (``Retry-After``) and is closed at once. Idle connections cannot
  crowd out a client that sends a request, and descriptors stay bounded;
* **header deadline**: every connection must complete a request's headers within
  ``header_timeout_s`` of being opened, or of its previous response; otherwise it is closed
  (idle connections and slowloris-style partial headers alike). The body has its own
  deadline (``api.guards.BodyLimitMiddleware``);
* **bounds** (``api/http_limits.py``): pipelined requests queued, header bytes and count (431),
  replies waiting on a slow reader (write timeout, memory budget);
* **one write per response**: uvicorn writes a response's status line and headers, then its
  body, each with a ``send`` of its own; on this VM a loopback ``send`` costs ~0.1 ms of the
  server's CPU and the client wakes for each segment. :class:`CoalescingTransport` holds the
  writes made within one step of the event loop and sends them as one (at the end of the
  response, at the next loop iteration, or once 64 KiB are held);
* **disconnect hook**: each request's scope offers ``routing.ON_DISCONNECT``, so a handler
  learns that its client is gone from ``connection_lost`` instead of from a watcher task per
  request (``routing.unless_disconnected``).

:func:`connection_cap` sizes the cap from the process's open-file limit, leaving a reserve
for the worker pool (two pipes per worker, the zygote's socket, logs).
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import OrderedDict
from collections.abc import Callable

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from reward_service.server.api.http_limits import ConnectionLimits, HttpLimits
from reward_service.server.routing import ON_DISCONNECT

__all__ = ["FD_RESERVE", "connection_cap", "guarded_protocol", "raise_nofile_limit"]

log = logging.getLogger(__name__)

#: File descriptors kept free for everything that is not a client connection: the pool's
#: pipes (2 per worker), the zygote's control socket, the listener, logs, /proc reads.
FD_RESERVE = 128

_REFUSED_BODY = b'{"detail":"too many open connections; retry later"}'
_REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"retry-after: 1\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (len(_REFUSED_BODY), _REFUSED_BODY))


def raise_nofile_limit() -> int:
    """Raise the soft open-file limit to the hard one; return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(nofile: int, workers: int, spares: int) -> int:
    """Connections allowed with ``nofile`` descriptors: what is left after the reserve."""
    reserve = FD_RESERVE + 4 * (workers + spares)
    return max(8, nofile - reserve)


def _nothing() -> None:
    pass


#: Held writes are sent at once past this many bytes (a streaming body is not held whole).
COALESCE_MAX_BYTES = 64 * 1024


class CoalescingTransport:
    """A connection's transport whose writes within one step of the event loop go out as one
    ``write`` of the real transport: at :meth:`flush` (the protocol calls it when a response
    is complete), at the next iteration of the loop, before ``close``, or once
    ``COALESCE_MAX_BYTES`` are held. Everything else is the real transport's. The protocol
    and its request cycles all write through it, so bytes keep their order."""

    __slots__ = ("_held", "_loop", "_size", "_transport", "written")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] | None = None
        self._size = 0
        self.written = 0  # bytes handed to the real transport (sent or in its buffer)

    def write(self, data: bytes) -> None:
        if not data:
            return
        held = self._held
        if held is None:
            self._held = [data]
            self._size = len(data)
            self._loop.call_soon(self.flush)
            return
        held.append(data)
        self._size += len(data)
        if self._size >= COALESCE_MAX_BYTES:
            self.flush()

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            data = held[0] if len(held) == 1 else b"".join(held)
            self.written += len(data)
            self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def __getattr__(self, name: str) -> object:  # get_extra_info, pause_reading, ...
        return getattr(self._transport, name)


class _CoalescingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol writing through a :class:`CoalescingTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]

    def on_response_complete(self) -> None:
        self.transport.flush()  # type: ignore[attr-defined]
        super().on_response_complete()


class _DisconnectHookProtocol(_CoalescingProtocol):
    """uvicorn's httptools protocol whose request scopes offer ``routing.ON_DISCONNECT``."""

    _lost = False  # the connection is gone
    _on_lost: list[Callable[[], None]] | None = None  # the callbacks of the request in progress

    def on_headers_complete(self) -> None:
        extensions: dict[str, object] = {ON_DISCONNECT: self._when_lost}
        self.scope["extensions"] = extensions  # type: ignore[typeddict-item]
        super().on_headers_complete()

    def _when_lost(self, callback: Callable[[], None]) -> Callable[[], None]:
        if self._lost:
            self.loop.call_soon(callback)
            return _nothing
        # reading may be paused by a large body: resumed, as a watcher's receive() would, so
        # that the end of the connection is seen
        self.flow.resume_reading()
        if self._on_lost is None:
            self._on_lost = []
        callbacks = self._on_lost
        callbacks.append(callback)
        return lambda: callbacks.remove(callback) if callback in callbacks else None

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self._lost = True
        for callback in list(self._on_lost or ()):
            callback()
        self._on_lost = None


def guarded_protocol(max_connections: int, header_timeout_s: float,
                     limits: ConnectionLimits | None = None) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol with a connection cap, a request-header deadline and
    the bounds of ``api/http_limits.py`` (pipelining, header bytes and count, slow readers)."""

    bounds = limits if limits is not None else ConnectionLimits()
    # connections waiting for request headers, longest-waiting first (O(1) eviction)
    waiting: OrderedDict[GuardedHttpToolsProtocol, None] = OrderedDict()

    class GuardedHttpToolsProtocol(HttpLimits, _DisconnectHookProtocol):
        _header_timer: asyncio.TimerHandle | None = None  # armed while waiting for headers

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self.limits = bounds
            super().connection_made(transport)
            if len(self.connections) > max_connections and not self._evict_idle():
                transport.write(_REFUSED)
                transport.close()
                log.warning("connection refused: cap reached, no idle connection to close",
                            extra={"connections": len(self.connections),
                                   "max_connections": max_connections})
                return
            self._arm_header_timer()

        def _evict_idle(self) -> bool:
            """Close the connection that has waited longest for request headers."""
            while waiting:
                oldest, _ = waiting.popitem(last=False)
                oldest._cancel_header_timer()
                if oldest is not self and not oldest.transport.is_closing():
                    oldest.transport.close()
                    return True
            return False

        def _arm_header_timer(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)
            waiting[self] = None

        def _cancel_header_timer(self) -> None:
            waiting.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_late(self) -> None:
            self._header_timer = None
            waiting.pop(self, None)
            # with a reply still in the buffer, close() waits for it to drain; a reader that
            # takes nothing is aborted by the write timeout (api/http_limits.py)
            if not self.transport.is_closing():
                self.transport.close()

        def on_headers_complete(self) -> None:
            self._cancel_header_timer()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

    return GuardedHttpToolsProtocol
