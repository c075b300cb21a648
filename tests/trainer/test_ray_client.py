"""``RayRewardClient``'s answers to what a Serve handle can raise, with a scripted stand-in for
the handle (real Ray cannot be made to refuse on demand; the real deployment is in
``tests/test_ray_serve.py``). Ray's own exception classes are used, as the handle raises them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from trainer_client.errors import RewardProtocolError, RewardServiceUnavailable
from trainer_client.reward_client import (
    AsyncRayRewardClient,
    RayClientSettings,
    RayRewardClient,
    RetryPolicy,
)

ray_exceptions = pytest.importorskip("ray.exceptions")
serve_exceptions = pytest.importorskip("ray.serve.exceptions")

FAST = RetryPolicy(max_attempts=4, backoff_initial_s=0.001, backoff_max_s=0.002, deadline_s=5)


def ok(body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    items = orjson.loads(body)["items"]
    return 200, [], orjson.dumps({"results": [
        {"score": 1.0, "status": "correct", "id": it.get("id")} for it in items]})


class Response:
    """A ``DeploymentResponse``: ``result`` runs the scripted step, ``cancel`` is recorded."""

    def __init__(self, step: Callable[[], Any]) -> None:
        self.step = step
        self.cancelled = False

    def result(self, timeout_s: float) -> Any:
        return self.step()

    def __await__(self) -> Any:
        yield from asyncio.sleep(0).__await__()
        return self.step()

    def cancel(self) -> None:
        self.cancelled = True


class Handle:
    """``handle.score.remote(body, headers)``: each call takes the next scripted step (an
    exception to raise, or None for a real answer)."""

    def __init__(self, script: list[BaseException | None]) -> None:
        self.script = script
        self.calls: list[Response] = []
        self.score = self

    def remote(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> Response:
        todo = self.script.pop(0) if self.script else None

        def step() -> Any:
            if todo is not None:
                raise todo
            return ok(body)

        self.calls.append(Response(step))
        return self.calls[-1]


def client(script: list[BaseException | None]) -> tuple[RayRewardClient, Handle]:
    handle = Handle(script)
    return RayRewardClient(RayClientSettings(retry=FAST), handle=handle, seed=0), handle


ITEMS = [{"response": "1", "ground_truth": "1", "id": "a"}]


def test_serve_refusals_and_lost_replicas_are_retried() -> None:
    refusals = [serve_exceptions.BackPressureError(10, 10, retry_after_s=0.001),
                serve_exceptions.DeploymentUnavailableError("reward-service"),
                ray_exceptions.ActorUnavailableError("gone", b"\0" * 16)]
    c, handle = client(list(refusals))
    with c:
        assert [r.id for r in c.score(ITEMS)] == ["a"]
    assert len(handle.calls) == 4


def test_a_reply_that_does_not_come_is_not_resent() -> None:
    c, handle = client([TimeoutError("no reply")])
    with c, pytest.raises(RewardServiceUnavailable, match="lost after sending"):
        c.score(ITEMS)
    assert len(handle.calls) == 1 and handle.calls[0].cancelled  # the replica stops too


def test_an_error_in_the_replica_is_a_protocol_error_and_retries_run_out() -> None:
    c, _ = client([ray_exceptions.RayTaskError("score", "Traceback ...", ValueError("bug"))])
    with c, pytest.raises(RewardProtocolError, match="500"):
        c.score(ITEMS)
    c, handle = client([serve_exceptions.DeploymentUnavailableError("reward-service")] * 9)
    with c, pytest.raises(RewardServiceUnavailable, match="serve://reward/reward-service"):
        c.score(ITEMS)
    assert len(handle.calls) == FAST.max_attempts


def test_async_client_retries_the_same_way() -> None:
    handle = Handle([serve_exceptions.BackPressureError(1, 1)])

    async def main() -> list[str | None]:
        async with AsyncRayRewardClient(RayClientSettings(retry=FAST), handle=handle) as c:
            return [r.id for r in await c.score(ITEMS)]

    assert asyncio.run(main()) == ["a"]
    assert len(handle.calls) == 2
