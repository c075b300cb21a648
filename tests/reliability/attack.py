"""Hostile-client attacks on a live service, each returning what it observed.

Used by ``tests/reliability/test_hostile_clients.py`` (each attack with its control) and
runnable on its own against a service you started, to print the figures::

    $ python -m tests.reliability.attack --url http://127.0.0.1:8000 [--pid SERVER_PID]

Every attack targets loopback only and bounds its own count and time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time
from dataclasses import asdict, dataclass, field
from urllib.parse import urlsplit

import httpx

__all__ = [
    "deep_json",
    "echo_amplification",
    "end_token_flood",
    "fairness",
    "hostile_items",
    "idle_connections",
    "metrics_label_flood",
    "slow_bodies",
    "stalled_body",
]

#: A response math-verify spends minutes on inside C (``math.gcd``): with ``timeout_s=1`` its
#: worker is killed at the deadline.
HOSTILE = {"response": "\\boxed{\\frac{10^{1300000}}{7^{1300000}}}", "ground_truth": "1",
           "scorer": "math_verify"}


def hostile_items(n: int) -> list[dict[str, str]]:
    """``n`` distinct hostile items (identical ones would be scored once: dedup)."""
    return [{**HOSTILE, "ground_truth": str(i + 1)} for i in range(n)]


def _addr(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname in ("127.0.0.1", "localhost", "::1"), "loopback targets only"
    return parts.hostname, int(parts.port or 80)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    import os

    return len(os.listdir(f"/proc/{pid}/fd"))


@dataclass
class IdleResult:
    opened: int  # TCP connections the attacker established
    refused_503: int  # answered 503 and closed at once (over the cap)
    closed_later: int  # closed by the server after the header deadline
    fresh_request: str  # what a fresh client got while the connections were held
    fresh_seconds: float
    server_fds_peak: int | None = None
    timeline: list[str] = field(default_factory=list)


def idle_connections(url: str, n: int, *, hold_s: float, pid: int | None = None,
                     fresh_timeout_s: float = 10.0) -> IdleResult:
    """Open ``n`` connections that never send a byte, then score an item that times out
    from a fresh client; hold them up to ``hold_s`` and count how the server closed them."""
    host, port = _addr(url)
    socks: list[socket.socket] = []
    for _ in range(n):
        try:
            s = socket.socket()
        except OSError:  # the attacker's own descriptors ran out
            break
        s.settimeout(5)
        try:
            s.connect((host, port))
        except OSError:
            s.close()
            break
        socks.append(s)
    peak = open_fds(pid) if pid else None
    t0 = time.monotonic()
    try:
        r = httpx.post(url + "/v1/score", json={"items": [HOSTILE], "timeout_s": 1},
                       timeout=fresh_timeout_s)
        fresh = f"{r.status_code} {r.json()['results'][0]['status']}" if r.status_code == 200 \
            else f"{r.status_code}"
    except httpx.HTTPError as exc:
        fresh = type(exc).__name__
    fresh_s = time.monotonic() - t0
    if pid:
        peak = max(peak or 0, open_fds(pid))
    refused = closed = 0
    deadline = time.monotonic() + hold_s
    pending = list(socks)
    while pending and time.monotonic() < deadline:
        still = []
        for s in pending:
            s.settimeout(max(0.01, min(0.2, deadline - time.monotonic())))
            try:
                data = s.recv(4096)
            except TimeoutError:
                still.append(s)
                continue
            except OSError:
                closed += 1
                continue
            if data.startswith(b"HTTP/1.1 503"):
                refused += 1
            else:
                closed += 1
        pending = still
    for s in socks:
        s.close()
    return IdleResult(len(socks), refused, closed, fresh, round(fresh_s, 2), peak)


def deep_json(url: str, route: str = "/v1/score", depth: int = 2000) -> tuple[int, str]:
    body = "[" * depth + "]" * depth
    r = httpx.post(url + route, content=body, headers={"content-type": "application/json"},
                   timeout=30)
    return r.status_code, r.text[:300]


def metrics_label_flood(url: str, n: int) -> tuple[int, int, int]:
    """(metrics bytes before, after ``n`` distinct 404 paths, how many were 404)."""
    with httpx.Client(base_url=url, timeout=10) as c:
        before = len(c.get("/metrics").content)
        notfound = sum(c.get(f"/no-such-path-{i}").status_code == 404 for i in range(n))
        after = len(c.get("/metrics").content)
    return before, after, notfound


def echo_amplification(url: str, size: int) -> tuple[int, int]:
    """(status, reply bytes) for an unknown scorer name of ``size`` characters."""
    body = json.dumps({"items": [{"response": "1", "ground_truth": "1",
                                  "scorer": "\x7f" * size}]})
    r = httpx.post(url + "/v1/score", content=body,
                   headers={"content-type": "application/json"}, timeout=60)
    return r.status_code, len(r.content)


def stalled_body(url: str, *, wait_s: float) -> str:
    """Declare a 100-byte body, send 10 bytes, stop: what came back within ``wait_s``."""
    host, port = _addr(url)
    with socket.create_connection((host, port), timeout=wait_s) as s:
        s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 100\r\n\r\n{\"items\":")
        try:
            return s.recv(4096).split(b"\r\n", 1)[0].decode()
        except TimeoutError:
            return "no answer"


@dataclass
class BodiesResult:
    statuses: list[str]
    rss_before_mb: float
    rss_peak_mb: float


def slow_bodies(url: str, pid: int, *, n: int, mb: int, hold_s: float) -> BodiesResult:
    """``n`` clients each send ``mb`` MB of a body declared one byte longer and hold it; the
    server's resident memory is sampled while they hold."""
    host, port = _addr(url)
    rss0 = rss_mb(pid)
    statuses: list[str] = [""] * n
    peak = [rss0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                peak[0] = max(peak[0], rss_mb(pid))
            stop.wait(0.05)

    def client(i: int) -> None:
        chunk = b" " * (1 << 20)
        with socket.create_connection((host, port), timeout=hold_s + 30) as s:
            s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
                      b"\r\nContent-Length: %d\r\n\r\n" % (mb * (1 << 20) + 1))
            try:
                for _ in range(mb):
                    s.sendall(chunk)
            except OSError:
                pass  # the server answered and closed early
            s.settimeout(hold_s)
            try:
                statuses[i] = s.recv(4096).split(b"\r\n", 1)[0].decode() or "closed"
            except TimeoutError:
                statuses[i] = "held"

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    sampler.join()
    return BodiesResult(statuses, round(rss0, 1), round(peak[0], 1))


def end_token_flood(url: str, tokens: int = 480_000) -> tuple[int, float]:
    """Item 2: ``"\\boxed{5}" + "</s>" * tokens`` on ``/get_reward`` (it froze the loop 15.6 s
    when stripping copied the string per token); returns (its status, the slowest
    ``/healthz`` answer while it was being handled)."""
    body = json.dumps({"query": ["Q: \\boxed{5}" + "</s>" * tokens], "prompts": ["Q: "],
                       "labels": ["5"]})
    out: dict[str, int] = {}

    def post() -> None:
        out["code"] = httpx.post(url + "/get_reward", content=body, timeout=120,
                                 headers={"content-type": "application/json"}).status_code

    t = threading.Thread(target=post)
    t.start()
    slowest = 0.0
    with httpx.Client(base_url=url, timeout=60) as c:
        while t.is_alive():
            t0 = time.monotonic()
            c.get("/healthz")
            slowest = max(slowest, time.monotonic() - t0)
    t.join()
    return out["code"], round(slowest, 3)


def fairness(url: str, hostile: int = 24, *, deadline_s: float = 1.0) -> tuple[float, str]:
    """Item 8: one client posts ``hostile`` items that each run to their deadline; once they
    are on the workers, another client posts one easy item. Returns its latency and status."""
    big = threading.Thread(target=lambda: httpx.post(
        url + "/v1/score", json={"items": hostile_items(hostile), "timeout_s": deadline_s},
        timeout=600))
    big.start()
    with httpx.Client(base_url=url, timeout=600) as c:
        # the big request is on the workers once items are outstanding
        t_end = time.monotonic() + 60
        while c.get("/v1/info").json()["workers"]["outstanding_items"] < hostile:
            assert time.monotonic() < t_end, "the hostile batch never reached the pool"
            time.sleep(0.05)
        t0 = time.monotonic()
        r = c.post("/v1/score", json={"items": [{"response": "#### 5", "ground_truth": "5",
                                                 "scorer": "gsm8k"}]})
        latency = time.monotonic() - t0
    big.join()
    return round(latency, 2), r.json()["results"][0]["status"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--pid", type=int, help="the server's pid (for fds and memory)")
    args = p.parse_args()
    print("deep JSON:", deep_json(args.url), deep_json(args.url, "/get_reward"))
    print("end-token flood (status, slowest /healthz s):", end_token_flood(args.url))
    print("fairness (one-item latency s, status):", fairness(args.url))
    print("404 label flood (bytes before, after, 404s):", metrics_label_flood(args.url, 2000))
    print("echo of a 2 MB scorer name (status, bytes):", echo_amplification(args.url, 2 << 20))
    print("stalled body:", stalled_body(args.url, wait_s=40))
    print("idle connections:", asdict(idle_connections(args.url, 2000, hold_s=20,
                                                       pid=args.pid)))
    if args.pid:
        print("slow bodies:", asdict(slow_bodies(args.url, args.pid, n=6, mb=40, hold_s=5)))


if __name__ == "__main__":
    main()
