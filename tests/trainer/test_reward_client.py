"""RewardClient / AsyncRewardClient against a real HTTP server on loopback.

The server here is a scripted stand-in (stdlib ``http.server`` in a thread), not a mock of
httpx: requests go over real sockets. It exists because the real service cannot be made to
answer 503, 422 or a wrong result count on demand. Tests against the real service are in
``test_e2e.py``.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from trainer_client.errors import (
    RewardAuthError,
    RewardPayloadTooLarge,
    RewardProtocolError,
    RewardServiceUnavailable,
    RewardValidationError,
)
from trainer_client.reward_client import (
    AsyncRewardClient,
    RetryPolicy,
    RewardClient,
    RewardClientSettings,
    ScoreItem,
    ScoreResult,
    Timeout,
    backoff_delay,
    parse_retry_after,
    reward_or_none,
)

Script = Callable[["Handler", dict], tuple[int, dict, dict] | None]


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass

    def _reply(self, code: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        srv = self.server
        srv.log.append(("GET", self.path, None, dict(self.headers)))
        code = srv.ready_codes.pop(0) if srv.ready_codes else 200
        self._reply(code, {})

    def do_POST(self):
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.log.append(("POST", self.path, body, dict(self.headers)))
        if srv.script:
            out = srv.script.pop(0)(self, body)
            if out == "drop":  # close the connection without a reply
                self.close_connection = True
                return
            if out is not None:
                self._reply(*out)
                return
        results = [{"score": float(it["response"] == it["ground_truth"]),
                    "status": "correct" if it["response"] == it["ground_truth"] else "incorrect",
                    "extracted": it["response"], "scorer": "numeric", "scorer_version": "1",
                    "elapsed_s": 0.001, "reason": None, "id": it.get("id")}
                   for it in body["items"]]
        time.sleep(srv.delay_s)
        self._reply(200, {"results": results, "elapsed_s": 0.001})


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.log, srv.script, srv.ready_codes, srv.delay_s = [], [], [], 0.0
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    t.join(timeout=5)


def url_of(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here: connection refused
    return f"http://127.0.0.1:{port}"


FAST = RetryPolicy(max_attempts=5, backoff_initial_s=0.01, backoff_max_s=0.05, deadline_s=10)


def settings(*urls: str, **kw) -> RewardClientSettings:
    kw.setdefault("retry", FAST)
    kw.setdefault("timeout", Timeout(connect=2, read=5, write=5, pool=5))
    return RewardClientSettings(urls=tuple(urls), **kw)


def items(n: int) -> list[ScoreItem]:
    return [ScoreItem(response=str(i % 3), ground_truth="1", scorer="numeric", id=f"i{i}")
            for i in range(n)]


def test_order_kept_across_concurrent_chunks(server):
    server.delay_s = 0.05
    with RewardClient(settings(url_of(server), chunk_size=3, max_concurrency=4)) as c:
        t0 = time.monotonic()
        res = c.score(items(20))
        took = time.monotonic() - t0
    assert [r.id for r in res] == [f"i{i}" for i in range(20)]
    assert [r.status for r in res] == ["correct" if i % 3 == 1 else "incorrect" for i in range(20)]
    posts = [e for e in server.log if e[0] == "POST"]
    assert sum(len(p[2]["items"]) for p in posts) == 20 and len(posts) == 7
    assert took < 7 * 0.05  # chunks overlapped (sequential would take >= 0.35 s)


def test_body_token_and_item_timeout(server):
    with RewardClient(settings(url_of(server), api_token="s3cret", item_timeout_s=2.5)) as c:
        c.score([ScoreItem(response="1", ground_truth="1", data_source="gsm8k")])
    _, path, body, headers = server.log[-1]
    assert path == "/v1/score"
    assert body == {"items": [{"response": "1", "ground_truth": "1", "data_source": "gsm8k"}],
                    "timeout_s": 2.5}
    assert headers["Authorization"] == "Bearer s3cret"


def test_503_retry_after_is_honoured(server):
    server.script = [lambda h, b: (503, {"detail": "busy"}, {"Retry-After": "0.4"})]
    with RewardClient(settings(url_of(server))) as c:
        t0 = time.monotonic()
        res = c.score(items(2))
        took = time.monotonic() - t0
    assert len(res) == 2 and took >= 0.4
    assert len([e for e in server.log if e[0] == "POST"]) == 2


def test_502_retried_then_gives_up(server):
    server.script = [lambda h, b: (502, {}, {})] * 10
    with RewardClient(settings(url_of(server)), seed=0) as c, \
            pytest.raises(RewardServiceUnavailable) as ei:
        c.score(items(1))
    assert ei.value.attempts == FAST.max_attempts
    assert len(server.log) == FAST.max_attempts


def test_connection_closed_without_reply_is_resent(server):
    # what a draining server does to a request on an idle keep-alive connection
    server.script = [lambda h, b: "drop"]
    with RewardClient(settings(url_of(server))) as c:
        res = c.score(items(3))
    assert [r.status for r in res] == ["incorrect", "correct", "incorrect"]
    assert len([e for e in server.log if e[0] == "POST"]) == 2


def test_async_connection_closed_without_reply_is_resent(server):
    server.script = [lambda h, b: "drop"]

    async def run() -> list:
        async with AsyncRewardClient(settings(url_of(server))) as c:
            return await c.score(items(3))

    assert len(asyncio.run(run())) == 3
    assert len([e for e in server.log if e[0] == "POST"]) == 2


def test_reply_timeout_is_not_resent(server):
    server.delay_s = 1.5  # longer than the client's read timeout below
    s = settings(url_of(server), timeout=Timeout(connect=2, read=0.5, write=5, pool=5))
    with RewardClient(s) as c, pytest.raises(RewardServiceUnavailable):
        c.score(items(1))
    assert len([e for e in server.log if e[0] == "POST"]) == 1


def test_failover_to_second_url(server):
    good = url_of(server)
    with RewardClient(settings(dead_url(), good)) as c:
        t0 = time.monotonic()
        assert len(c.score(items(3))) == 3
        assert time.monotonic() - t0 < 1.0  # failover is immediate, no backoff sleep
        assert c._preferred == 1  # sticks to the URL that answered
        c.score(items(1))
    assert len([e for e in server.log if e[0] == "POST"]) == 2


@pytest.mark.parametrize(("code", "exc"), [(401, RewardAuthError), (413, RewardPayloadTooLarge),
                                           (422, RewardValidationError),
                                           (500, RewardProtocolError)])
def test_non_retryable_statuses(server, code, exc):
    server.script = [lambda h, b: (code, {"detail": "no"}, {})] * 3
    with RewardClient(settings(url_of(server))) as c, pytest.raises(exc):
        c.score(items(1))
    assert len(server.log) == 1  # never retried


def test_wrong_result_count_is_protocol_error(server):
    server.script = [lambda h, b: (200, {"results": [], "elapsed_s": 0}, {})]
    with RewardClient(settings(url_of(server))) as c, pytest.raises(RewardProtocolError):
        c.score(items(2))


def test_all_urls_down_gives_up_within_deadline():
    policy = RetryPolicy(max_attempts=1000, backoff_initial_s=0.05, backoff_max_s=0.1,
                         deadline_s=0.6)
    with RewardClient(settings(dead_url(), dead_url(), retry=policy)) as c:
        t0 = time.monotonic()
        with pytest.raises(RewardServiceUnavailable) as ei:
            c.score(items(1))
        took = time.monotonic() - t0
    assert 0.5 <= took < 3.0
    assert ei.value.attempts > 2


def test_stop_event_interrupts_retry_sleep():
    stop = threading.Event()
    policy = RetryPolicy(max_attempts=100, backoff_initial_s=30, backoff_max_s=30, deadline_s=60)
    with RewardClient(settings(dead_url(), retry=policy), stop_event=stop) as c:
        threading.Timer(0.3, stop.set).start()
        t0 = time.monotonic()
        with pytest.raises(RewardServiceUnavailable, match="stopped"):
            c.score(items(1))
        assert time.monotonic() - t0 < 5


def test_wait_ready(server):
    server.ready_codes = [503, 503]
    with RewardClient(settings(dead_url(), url_of(server), ready_poll_s=0.05)) as c:
        assert c.wait_ready(timeout_s=5) == url_of(server)
    with RewardClient(settings(dead_url(), ready_poll_s=0.05)) as c:
        t0 = time.monotonic()
        with pytest.raises(RewardServiceUnavailable):
            c.wait_ready(timeout_s=0.3)
        assert time.monotonic() - t0 < 3


def test_a_url_is_enough(server):
    """``RewardClient("http://...")``, the first line a user types (as with httpx or the OpenAI
    client), was an AttributeError; a URL, a list of URLs, or settings, with keyword
    overrides, for both clients."""
    with RewardClient(url_of(server), api_token="t0k") as c:
        assert c.settings.urls == (url_of(server),)
        assert [r.status for r in c.score(items(2))] == ["incorrect", "correct"]
    assert server.log[-1][3]["Authorization"] == "Bearer t0k"
    with RewardClient([dead_url(), url_of(server)], retry=FAST) as c:
        assert c.wait_ready(timeout_s=5) == url_of(server)
    with RewardClient(settings(url_of(server)), chunk_size=7) as c:
        assert c.settings.chunk_size == 7 and c.settings.retry is FAST

    async def main() -> list[str]:
        async with AsyncRewardClient(url_of(server)) as c:
            return [r.status for r in await c.score(items(2))]

    assert asyncio.run(main()) == ["incorrect", "correct"]
    assert RewardClientSettings(urls=url_of(server)).urls == (url_of(server),)


@pytest.mark.parametrize("bad", [8000, None, {"urls": ["http://x"]}, b"http://x", [], [8000]])
def test_anything_else_is_a_clear_type_error(bad):
    for client in (RewardClient, AsyncRewardClient):
        with pytest.raises(TypeError, match="URL"):
            client(bad)


def test_a_url_without_scheme_is_refused():
    with pytest.raises(ValueError, match="not an http"):
        RewardClient("127.0.0.1:8000")


def test_async_client(server):
    server.script = [lambda h, b: (503, {}, {"Retry-After": "0"})]

    async def main():
        async with AsyncRewardClient(settings(dead_url(), url_of(server), chunk_size=4)) as c:
            assert await c.wait_ready(timeout_s=5) == url_of(server)
            return await c.score(items(10))

    res = asyncio.run(main())
    assert [r.id for r in res] == [f"i{i}" for i in range(10)]


def test_reward_or_none_and_helpers():
    mk = lambda s: ScoreResult(score=1.0 if s == "correct" else 0.0, status=s)  # noqa: E731
    assert [reward_or_none(mk(s)) for s in
            ["correct", "incorrect", "no_answer", "timeout", "error", "bad_ground_truth"]] == \
        [1.0, 0.0, 0.0, None, None, None]
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None and parse_retry_after("soon") is None
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:10 GMT", now=1767225600.0) == \
        pytest.approx(10.0)
    p = RetryPolicy(backoff_initial_s=1, backoff_multiplier=2, backoff_max_s=5, jitter=0.5)
    rng = random.Random(0)
    for k, base in enumerate([1, 2, 4, 5, 5]):
        d = backoff_delay(k, p, rng)
        assert 0.5 * base <= d <= 1.5 * base
    assert backoff_delay(0, p, rng, retry_after=7.0) == 7.0
    assert backoff_delay(0, p, rng, retry_after=99.0) == p.max_retry_after_s


def test_async_client_error_is_from_the_tree(server):
    server.script = [lambda h, b: (422, {"detail": "bad"}, {})] * 4

    async def main():
        async with AsyncRewardClient(settings(url_of(server), chunk_size=2)) as c:
            await c.score(items(6))

    with pytest.raises(RewardValidationError):
        asyncio.run(main())


@pytest.mark.parametrize("d", [
    {"id": "a", "score": 1.0, "status": "correct", "scorer": "math", "scorer_version": "2.1",
     "extracted": "18", "extracted_gold": "18", "reason": None, "elapsed_s": 0.0004,
     "cached": False},
    {"score": 0, "status": "timeout", "reason": "deadline of 5s exceeded"},  # minimal; int score
])
def test_a_parsed_result_is_the_constructors(d: dict) -> None:
    """``from_json`` skips the frozen ``__init__``: it must give exactly what the constructor
    gives (every field set, converted the same way) and stay frozen."""
    import dataclasses

    got = ScoreResult.from_json(d)
    want = ScoreResult(score=float(d["score"]), status=d["status"], extracted=d.get("extracted"),
                       scorer=d.get("scorer", ""), scorer_version=d.get("scorer_version", ""),
                       elapsed_s=float(d.get("elapsed_s", 0.0)), reason=d.get("reason"),
                       id=d.get("id"))
    assert got == want and hash(got) == hash(want) and type(got.score) is float
    assert set(vars(got)) == {f.name for f in dataclasses.fields(ScoreResult)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.score = 0.0  # type: ignore[misc]
    with pytest.raises(RewardProtocolError):
        ScoreResult.from_json({"status": "correct"})  # no score
