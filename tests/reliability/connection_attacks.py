"""Round-2 attacks (issue 27): what one connection can make the server hold.

Used by ``tests/reliability/test_connection_bounds.py`` (each with its control); each attack
targets loopback only, bounds its own size and time, and returns what it observed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field

import httpx

from tests.reliability.attack import _addr, open_fds, rss_mb

__all__ = ["header_flood", "pipeline_flood", "trickled_bodies", "unread_replies"]


class _Sampler:
    """Samples a process's resident memory every 50 ms while in its ``with`` block."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = rss_mb(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, rss_mb(self.pid))
            self._stop.wait(0.05)

    def __enter__(self) -> _Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def growth(self) -> float:
        return round(self.peak - self.before, 1)


def _read_until_closed(s: socket.socket, limit_s: float) -> tuple[bytes, str]:
    """Everything the server sends until it closes (``closed``/``reset``) or ``limit_s``."""
    got = bytearray()
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = s.recv(1 << 16)
        except TimeoutError:
            break
        except OSError:
            return bytes(got), "reset"
        if not data:
            return bytes(got), "closed"
        got += data
    return bytes(got), "open"


@dataclass
class PipelineResult:
    sent_mb: float
    answered: int  # responses the client read afterwards
    ended: str  # closed / reset (by the server) or open
    rss_growth_mb: float


def pipeline_flood(url: str, pid: int, *, requests: int, settle_s: float) -> PipelineResult:
    """Item 1: write ``requests`` pipelined ``GET /healthz`` without reading, wait until the
    server's memory stops growing (or ``settle_s``), then read what came back."""
    host, port = _addr(url)
    one = b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
    payload = one * requests
    with _Sampler(pid) as mem, socket.create_connection((host, port), timeout=30) as s:
        def write() -> None:
            with contextlib.suppress(OSError):
                s.sendall(payload)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        writer.join(settle_s)
        last, still = mem.peak, time.monotonic()
        deadline = time.monotonic() + settle_s
        while time.monotonic() < deadline and time.monotonic() - still < 1.0:
            time.sleep(0.1)  # sampling, not synchronisation: wait until the peak settles
            if mem.peak > last:
                last, still = mem.peak, time.monotonic()
        got, ended = _read_until_closed(s, 5.0)
    return PipelineResult(round(len(payload) / 2**20, 2), got.count(b"HTTP/1.1 200"), ended,
                          mem.growth)


@dataclass
class HeaderResult:
    status: str  # the status line, or how the connection ended
    seconds: float
    rss_growth_mb: float


def header_flood(url: str, pid: int, *, headers: int = 0, line_bytes: int = 0,
                 timeout_s: float = 60) -> HeaderResult:
    """Item 2: one request with ``headers`` headers ``X-0000001: v``, or one header line of
    ``line_bytes``; what the server answered, and how long it took."""
    host, port = _addr(url)
    head = b"GET /healthz HTTP/1.1\r\nHost: a\r\n"
    if headers:
        head += b"".join(b"X-%07d: v\r\n" % i for i in range(headers))
    if line_bytes:
        head += b"X-Big: " + b"v" * line_bytes + b"\r\n"
    head += b"\r\n"
    t0 = time.monotonic()
    with _Sampler(pid) as mem, socket.create_connection((host, port), timeout=timeout_s) as s:
        with contextlib.suppress(OSError):
            s.sendall(head)
        got, ended = _read_until_closed(s, timeout_s)
    status = got.split(b"\r\n", 1)[0].decode() if got else ended
    return HeaderResult(status, round(time.monotonic() - t0, 2), mem.growth)


@dataclass
class TrickleResult:
    tricklers: list[str]  # what each trickling connection got
    holder: list[int] = field(default_factory=list)  # the token holder's statuses meanwhile
    trickle_s: float = 0.0


_LEFT = 10  # bytes of each trickled body not sent in bulk (the last of them is never sent)


def _await_held_body_bytes(url: str, token: str, at_least: int, timeout_s: float = 30) -> None:
    """Poll ``reward_held_bytes{kind="body"}`` until the server holds ``at_least`` body bytes
    (a request racing the tricklers' last bytes would take budget one of them needs)."""
    end = time.monotonic() + timeout_s
    held = -1.0
    while time.monotonic() < end:
        text = httpx.get(url + "/metrics", headers={"authorization": f"Bearer {token}"}).text
        held = next(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                    if line.startswith('reward_held_bytes{kind="body"}'))
        if held >= at_least:
            return
        time.sleep(0.05)  # polling a gauge: nothing to wait on from outside the server
    raise AssertionError(f"server holds {held:.0f} body bytes, not {at_least}, after {timeout_s}s")


def trickled_bodies(url: str, *, n: int, declared: int, hold_s: float, token: str,
                    trickler_token: str | None) -> TrickleResult:
    """Item 3: ``n`` connections declare ``declared`` bytes, send all but ``_LEFT``, then one
    byte every 0.5 s for up to ``hold_s`` (never the last: the body is never completed);
    meanwhile the token holder posts one item every 0.2 s.
    ``trickler_token``: the tricklers' own bearer token (None: they have none)."""
    host, port = _addr(url)
    out = TrickleResult([""] * n)
    auth = b"Authorization: Bearer %s\r\n" % trickler_token.encode() if trickler_token else b""
    sent = threading.Barrier(n + 1)
    stop = threading.Event()

    def trickle(i: int) -> None:
        with socket.create_connection((host, port), timeout=hold_s + 30) as s:
            try:
                s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: t\r\nContent-Type: application/"
                          b"json\r\n%sContent-Length: %d\r\n\r\n" % (auth, declared))
                s.sendall(b" " * (declared - _LEFT))
            except OSError:
                pass
            with contextlib.suppress(threading.BrokenBarrierError):
                sent.wait(30)
            s.settimeout(0.5)
            end = time.monotonic() + hold_s
            left = _LEFT
            while time.monotonic() < end and not stop.is_set():
                try:
                    data = s.recv(4096)
                    out.tricklers[i] = data.split(b"\r\n", 1)[0].decode() or "closed"
                    return
                except TimeoutError:
                    pass
                except OSError:
                    out.tricklers[i] = "reset"
                    return
                if left > 1:
                    left -= 1
                    with contextlib.suppress(OSError):
                        s.sendall(b" ")
            out.tricklers[i] = "held"

    threads = [threading.Thread(target=trickle, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        sent.wait(30)
    if trickler_token:  # admitted: the holder starts once the server holds all their bytes
        _await_held_body_bytes(url, token, n * (declared - _LEFT))
    t0 = time.monotonic()
    item = {"items": [{"response": "#### 5", "ground_truth": "5", "scorer": "gsm8k"}]}
    with httpx.Client(base_url=url, timeout=30,
                      headers={"authorization": f"Bearer {token}"}) as c:
        while ((any(t.is_alive() for t in threads) or len(out.holder) < 5)
               and time.monotonic() - t0 < hold_s + 10):
            out.holder.append(c.post("/v1/score", json=item).status_code)
            time.sleep(0.2)  # the holder's pace, not synchronisation
        out.holder.append(c.post("/v1/score", json=item).status_code)
    stop.set()
    for t in threads:
        t.join()
    out.trickle_s = round(time.monotonic() - t0, 2)
    return out


@dataclass
class UnreadResult:
    reply_mb: float  # size of one reply
    fds_during: int  # the server's open descriptors while the clients do not read
    fds_after: int  # ... once the server dropped them, or at the end of the hold
    rss_held_mb: float  # server growth while held
    rss_after_mb: float  # server growth at the end
    read_back: list[str]  # what each client could read afterwards: "full" or short


def unread_replies(url: str, pid: int, *, n: int, field_chars: int, hold_s: float,
                   baseline_fds: int) -> UnreadResult:
    """Item 4: ``n`` clients post to ``/verify`` a body with a field of ``field_chars`` "é"
    (echoed ASCII-escaped: 6 bytes each) and read nothing; wait until the server's
    descriptors are back to ``baseline_fds`` (or ``hold_s``), then try to read the reply."""
    host, port = _addr(url)
    body = json.dumps({"responses_create_params": {}, "expected_answer": "1",
                       "response": {"output": []}, "pad": "\u00e9" * field_chars},
                      ensure_ascii=False).encode()  # 2 bytes a character in, 6 out
    socks = []
    rss0 = rss_mb(pid)
    for _ in range(n):
        s = socket.create_connection((host, port), timeout=60)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 128 << 10)
        with contextlib.suppress(OSError):  # refused early (503) and closed
            s.sendall(b"POST /verify HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                      b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        socks.append(s)
    # the replies are being written once the server holds them: wait for the growth
    deadline = time.monotonic() + 20
    while rss_mb(pid) - rss0 < field_chars * 6 / 2**20 and time.monotonic() < deadline:
        time.sleep(0.05)
    during, held = open_fds(pid), rss_mb(pid) - rss0
    end = time.monotonic() + hold_s
    while time.monotonic() < end and open_fds(pid) > baseline_fds:
        time.sleep(0.1)
    after, rss_after = open_fds(pid), rss_mb(pid) - rss0
    reply = 6 * field_chars
    read_back = []
    for s in socks:
        got, _ = _read_until_closed(s, 10.0)
        read_back.append("full" if len(got) >= reply else f"{len(got)} bytes")
        s.close()
    return UnreadResult(round(reply / 2**20, 1), during, after, round(held, 1),
                        round(rss_after, 1), read_back)
