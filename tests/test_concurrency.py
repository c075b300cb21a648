"""Many clients at once: every item answered exactly once; overload is a 503, not a failure."""

from __future__ import annotations

import asyncio
from collections import Counter

import httpx

from tests.helpers import Service, service


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
