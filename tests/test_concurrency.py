"""Many clients at once: every item answered exactly once; overload is a 503, not a failure."""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter

import httpx
import pytest

from tests.helpers import Service, service, wait_until


async def _client(url: str, k: int, requests: int, per_request: int) -> tuple[list[str], list[int]]:
    seen: list[str] = []
    codes: list[int] = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as c:
        for r in range(requests):
            items = [{"response": f"\\boxed{{{k * 1000 + r * 100 + i}}}",
                      "ground_truth": str(k * 1000 + r * 100 + i), "id": f"{k}-{r}-{i}"}
                     for i in range(per_request)]
            resp = await c.post("/v1/score", json={"items": items})
            codes.append(resp.status_code)
            if resp.status_code == 200:
                body = resp.json()["results"]
                assert [x["id"] for x in body] == [x["id"] for x in items]
                assert {x["status"] for x in body} == {"correct"}
                seen.extend(x["id"] for x in body)
            else:
                assert resp.status_code == 503, resp.text
                assert int(resp.headers["retry-after"]) >= 1
    return seen, codes


async def _swarm(svc: Service, clients: int, requests: int, per_request: int):  # type: ignore[no-untyped-def]
    return await asyncio.gather(*(_client(svc.url, k, requests, per_request)
                                  for k in range(clients)))


def test_fifty_clients_every_item_exactly_once(svc: Service) -> None:
    out = asyncio.run(_swarm(svc, clients=50, requests=3, per_request=20))
    ids = [i for seen, _ in out for i in seen]
    assert len(ids) == 50 * 3 * 20
    assert max(Counter(ids).values()) == 1
    assert {c for _, codes in out for c in codes} == {200}


def test_overload_shows_as_503_with_retry_after() -> None:
    with service(REWARD_MAX_QUEUE_ITEMS=100, REWARD_MAX_ITEMS=50, REWARD_WORKERS=1,
                 REWARD_SPARES=0) as svc:
        out = asyncio.run(_swarm(svc, clients=50, requests=2, per_request=40))
    codes = Counter(c for _, cs in out for c in cs)
    assert codes[503] > 0 and codes[200] > 0, codes
    assert set(codes) == {200, 503}
    ids = [i for seen, _ in out for i in seen]
    assert len(ids) == codes[200] * 40 and max(Counter(ids).values()) == 1


@pytest.mark.parametrize("route", ["/v1/score", "/get_reward"])
def test_a_client_that_disconnects_gets_its_batch_withdrawn(route: str) -> None:
    """A trainer whose read timed out closes the connection: its batch must not keep the
    workers busy. The handler is cancelled (counted as 499) and its queued items dropped, so
    by the time the 499 is counted nothing is outstanding; the service then answers as usual."""
    n = 16_000  # several seconds of work on two workers
    answers = [f"\\boxed{{{i}}} and $x^2 + {i}$" for i in range(n)]
    if route == "/v1/score":
        payload: dict[str, object] = {
            "items": [{"response": a, "ground_truth": str(i)} for i, a in enumerate(answers)]}
    else:  # OpenRLHF: prompt + response per query, labels
        payload = {"query": [f"Q{i}: {a}" for i, a in enumerate(answers)],
                   "prompts": [f"Q{i}: " for i in range(n)], "labels": [str(i) for i in range(n)]}
    body = json.dumps(payload).encode()
    with service(REWARD_MAX_ITEMS=n, REWARD_MAX_QUEUE_ITEMS=2 * n, REWARD_CACHE_ITEMS=0) as svc:
        sock = socket.create_connection(("127.0.0.1", svc.port))
        sock.sendall(b"POST %s HTTP/1.1\r\nHost: test\r\nContent-Type: application/json"
                     b"\r\nContent-Length: %d\r\n\r\n" % (route.encode(), len(body)) + body)

        def outstanding() -> int:
            return int(httpx.get(svc.url + "/v1/info").json()["workers"]["outstanding_items"])

        assert wait_until(lambda: outstanding() > 0, timeout_s=10), "the batch never started"
        sock.close()

        def gone() -> bool:
            return f'code="499",route="{route}"' in httpx.get(svc.url + "/metrics").text

        assert wait_until(gone, timeout_s=5), "the disconnect was not noticed"
        left = outstanding()
        assert left == 0, f"{left} items still queued for a client that is gone"
        r = httpx.post(svc.url + "/v1/score", json={"items": payload["items"][:3]}, timeout=30) \
            if route == "/v1/score" else httpx.post(svc.url + route, json={
                "query": payload["query"][:3], "prompts": payload["prompts"][:3],
                "labels": payload["labels"][:3]}, timeout=30)
        assert r.status_code == 200, r.text
