"""The Ray Serve app (deploy/ray/reward_app.py): real Ray on CPU, 2 replicas, scored over HTTP
and through the deployment handle (``RayRewardClient``).

Starts a local Ray (2 CPUs, no dashboard), Serve's HTTP proxy on a free loopback port, and two
replicas of one worker each; each replica's FastAPI lifespan starts its own pool (its own
zygote). Everything is shut down at the end and no zygote or worker is left running.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from tests.helpers import (
    ROOT,
    alive,
    children_of,
    descendants_of,
    free_port,
    total_cpu_seconds,
    wait_until,
)

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
httpx = pytest.importorskip("httpx")

APP_DIR = ROOT / "deploy" / "ray"

ITEMS = [
    ({"response": "so the answer is $\\boxed{\\frac{1}{2}}$.", "ground_truth": "0.5"}, "correct"),
    ({"response": "9 * 2 = 18\n#### 18", "ground_truth": "18", "data_source": "openai/gsm8k"},
     "correct"),
    ({"response": "I get \\boxed{17}.", "ground_truth": "18"}, "incorrect"),
    ({"response": "I don't know.", "ground_truth": "42"}, "no_answer"),
    ({"response": "The answer is (B).", "ground_truth": "B", "scorer": "choice"}, "correct"),
]


def _processes_titled(prefix: bytes) -> set[int]:
    """Processes whose title (``/proc/PID/cmdline``) starts with ``prefix``."""
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as fh:
                    if fh.read().startswith(prefix):
                        out.add(int(entry))
            except OSError:
                continue
    return out


def _zygotes_under(pids: set[int]) -> list[int]:
    """Zygote processes whose parent is one of ``pids`` (the Serve replica actors)."""
    out = []
    for pid in pids:
        for child in children_of(pid):
            try:
                with open(f"/proc/{child}/cmdline", "rb") as fh:
                    if b"reward_service.sandboxed.zygote" in fh.read():
                        out.append(child)
            except OSError:
                continue
    return out


@pytest.fixture(scope="module")
def reward_app() -> Iterator[object]:
    from bench.ray_serve.section import import_reward_app

    yield import_reward_app()


def test_split_body_keeps_order_fields_and_limits(reward_app: object) -> None:
    import orjson
    from fanout import merge_replies, split_body

    items = [{"response": str(i), "ground_truth": str(i)} for i in range(130)]
    body = orjson.dumps({"items": items, "timeout_s": 2.5})
    parts = split_body(body, parts=2, min_part=64, max_items=1000)
    assert parts is not None and len(parts) == 2
    docs = [orjson.loads(p) for p in parts]
    assert [len(d["items"]) for d in docs] == [65, 65]
    assert [x for d in docs for x in d["items"]] == items  # contiguous, in order
    assert all(d["timeout_s"] == 2.5 for d in docs)  # the other fields go with every part
    assert split_body(body, parts=4, min_part=64, max_items=1000) is not None  # 2 parts of 65
    assert split_body(body, parts=2, min_part=66, max_items=1000) is None  # too few to split
    assert split_body(body, parts=2, min_part=64, max_items=129) is None  # the app's 413
    assert split_body(b'{"items": "nope"}', 2, 1, 1000) is None  # the app's 422
    assert split_body(b"{not json", 2, 1, 1000) is None
    merged = orjson.loads(merge_replies([
        orjson.dumps({"results": [{"id": "a"}], "count": 1, "statuses": {"correct": 1}}),
        orjson.dumps({"results": [{"id": "b"}, {"id": "c"}], "count": 2,
                      "statuses": {"correct": 1, "no_answer": 1}}),
    ], 0.5))
    assert merged == {"results": [{"id": "a"}, {"id": "b"}, {"id": "c"}], "count": 3,
                      "statuses": {"correct": 2, "no_answer": 1}, "elapsed_s": 0.5}


def test_policy_scales_on_outstanding_items(reward_app: object) -> None:
    from ray.serve._private.common import DeploymentID, ReplicaID
    from ray.serve.config import AutoscalingConfig, AutoscalingContext

    dep = DeploymentID(name="reward-service", app_name="reward")
    replicas = [ReplicaID(unique_id=str(i), deployment_id=dep) for i in range(2)]
    config = AutoscalingConfig(min_replicas=1, max_replicas=8, target_ongoing_requests=4)

    def ctx(items: list[float], requests: float) -> AutoscalingContext:
        return AutoscalingContext(
            deployment_id=dep, deployment_name=dep.name, app_name=dep.app_name,
            current_num_replicas=2, target_num_replicas=2, running_replicas=replicas,
            total_num_requests=requests, total_queued_requests=0.0,
            aggregated_metrics={"outstanding_items": dict(zip(replicas, items, strict=True))},
            raw_metrics={}, capacity_adjusted_min_replicas=1, capacity_adjusted_max_replicas=8,
            policy_state={}, last_scale_up_time=None, last_scale_down_time=None,
            current_time=time.time(), config=config,
        )

    policy = reward_app.QueueDepthPolicy(target_items_per_replica=1000)  # type: ignore[attr-defined]
    assert policy(ctx([0, 0], 0))[0] == 1  # idle: down to min_replicas
    assert policy(ctx([2500, 2400], 2))[0] == 5  # 4900 items waiting: 5 replicas
    assert policy(ctx([100, 0], 20))[0] == 5  # many small requests: the request rule wins
    assert policy(ctx([50_000, 50_000], 2))[0] == 8  # capped at max_replicas


@dataclass
class Deployed:
    """The module's one Serve deployment (2 replicas of 1 worker) and what its start saw."""

    app_name: str
    base: str
    picked: list[int]
    started_s: float
    replica_pids: set[int] = field(default_factory=set)
    zygotes: list[int] = field(default_factory=list)


@pytest.fixture(scope="module")
def deployed(reward_app: object) -> Iterator[Deployed]:
    """Started once for the tests that need real replicas; on teardown, the replicas' lifespan
    shutdown must take every zygote and replica down."""
    from bench.ray_serve.section import local_serve

    app_name = f"reward-test-{os.getpid()}"
    taken = socket.socket()  # a port another process holds when Serve's proxy comes to bind it
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    picked: list[int] = []

    def pick_port() -> int:
        picked.append(taken.getsockname()[1] if not picked else free_port())
        return picked[-1]

    t0 = time.monotonic()
    app = reward_app.build_app(  # type: ignore[attr-defined]
        {"settings": {"workers": 1, "spares": 0, "cache_items": 0}, "num_replicas": 2}
    )
    with taken, local_serve(app, app_name, pick_port=pick_port, ready_timeout_s=120) as base:
        d = Deployed(app_name, base, picked, time.monotonic() - t0)
        d.replica_pids = _processes_titled(f"ray::ServeReplica:{app_name}:".encode())
        d.zygotes = _zygotes_under(d.replica_pids)
        yield d
    # replica teardown ran the lifespan shutdown: pool.stop() took the zygotes down
    assert wait_until(lambda: not any(alive(p) for p in d.zygotes), timeout_s=30), d.zygotes
    assert wait_until(lambda: not any(alive(p) for p in d.replica_pids), timeout_s=30)


def test_two_replicas_score_over_serve_http(deployed: Deployed) -> None:
    app_name, base, picked = deployed.app_name, deployed.base, deployed.picked
    # the first port was taken: the proxy failed there and Serve restarted on the next
    assert len(picked) == 2 and base == f"http://127.0.0.1:{picked[1]}", (picked, base)
    status = serve.status().applications[app_name].deployments["reward-service"]
    assert status.replica_states.get("RUNNING") == 2, status
    replica_pids = deployed.replica_pids
    assert len(replica_pids) == 2, replica_pids
    assert len(deployed.zygotes) == 2, deployed.zygotes  # one pool (one zygote) per replica

    with httpx.Client(base_url=base, timeout=60.0) as client:
        for _ in range(4):  # several requests: the proxy spreads them over both replicas
            r = client.post("/v1/score", json={"items": [item for item, _ in ITEMS]})
            assert r.status_code == 200, r.text
            assert [x["status"] for x in r.json()["results"]] == [s for _, s in ITEMS]
        info = client.get("/v1/info").json()
        assert info["workers"]["configured"] == 1
        assert set(info["sandbox"]["layers"]) >= {"rlimits", "seccomp"}
        # malformed input is still a 422 from the service, not a Serve error
        assert client.post("/v1/score", json={"items": "nope"}).status_code == 422

    # one large request is split over both replicas: both pools score a part of it
    big = [{"response": f"so the answer is $\\boxed{{{i}}}$.",
            "ground_truth": str(i if i % 3 else i + 1), "id": str(i)} for i in range(480)]
    cpu0 = [total_cpu_seconds(descendants_of(pid)) for pid in replica_pids]
    with httpx.Client(base_url=base, timeout=120.0) as client:
        r = client.post("/v1/score", json={"items": big})
    assert r.status_code == 200, r.text
    reply = r.json()
    assert [x["id"] for x in reply["results"]] == [x["id"] for x in big]
    assert [x["status"] for x in reply["results"]] == [
        "correct" if i % 3 else "incorrect" for i in range(480)]
    assert reply["count"] == 480 and reply["statuses"]["correct"] == 320
    used = [total_cpu_seconds(descendants_of(pid)) - c
            for pid, c in zip(replica_pids, cpu0, strict=True)]
    assert min(used) > 0.02, used
    # an error in a split request is the plain service's: the whole body is answered by
    # one app, so the 422 names the item's index in the request (the part alone would
    # say item 140, its index in the second part)
    bad = [dict(x) for x in big[:400]]
    bad[340]["scorer"] = "no-such-scorer"
    with httpx.Client(base_url=base, timeout=120.0) as client:
        r = client.post("/v1/score", json={"items": bad})
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["detail"]] == [["body", "items", 340, "scorer"]], r.text
    print(f"ray serve: 2 replicas ready after {deployed.started_s:.1f}s; split request CPU s "
          f"{used}")


def test_handle_clients_answer_as_http_does(deployed: Deployed) -> None:
    """``RayRewardClient`` and ``AsyncRayRewardClient`` through the deployment's handle, no
    proxy: the results are HTTP's, field for field, chunked over both replicas; a per-item
    failure is a status; a bad request is the client's ``RewardValidationError`` with the
    service's own 422 detail; a handle method given a document answers as its bytes do."""
    import asyncio

    import orjson

    from trainer_client.errors import RewardValidationError
    from trainer_client.reward_client import (
        AsyncRayRewardClient,
        RayClientSettings,
        RayRewardClient,
    )

    items = [item for item, _ in ITEMS] + [{"response": "\\boxed{3}", "ground_truth": ""}]
    statuses = [s for _, s in ITEMS] + ["bad_ground_truth"]
    with httpx.Client(base_url=deployed.base, timeout=60.0) as client:
        over_http = client.post("/v1/score", json={"items": items * 2}).json()["results"]
    settings = RayClientSettings(app_name=deployed.app_name, chunk_size=4)  # 3 chunks
    with RayRewardClient(settings) as ray_client:
        assert ray_client.wait_ready(timeout_s=30) == settings.urls[0]
        results = ray_client.score(items * 2)
        assert [r.status for r in results] == statuses * 2
        fields = ("score", "status", "extracted", "scorer", "scorer_version", "reason", "id")
        assert [[getattr(r, f) for f in fields] for r in results] == [
            [x[f] for f in fields] for x in over_http]
        with pytest.raises(RewardValidationError) as bad:
            ray_client.score([*items[:2], {**items[0], "scorer": "no-such-scorer"}])
        assert bad.value.status_code == 422, bad.value.body
        assert [e["loc"] for e in orjson.loads(bad.value.body)["detail"]] == [
            ["body", "items", 2, "scorer"]], bad.value.body

    async def main() -> list[str]:
        async with AsyncRayRewardClient(settings) as c:
            await c.wait_ready(timeout_s=30)
            got = await asyncio.gather(c.score(items[:3]), c.score(items[3:]))  # coalesced
            return [r.status for part in got for r in part]

    assert asyncio.run(main()) == statuses
    handle = serve.get_deployment_handle("reward-service", deployed.app_name)
    status, _, body = handle.score.remote({"items": "nope"}).result(timeout_s=30)
    assert status == 422 and b"items" in body, body


def test_build_app_rejects_unknown_args(reward_app: object) -> None:
    with pytest.raises(ValueError, match="unknown build_app args"):
        reward_app.build_app({"replicas": 2})  # type: ignore[attr-defined]
    app = reward_app.build_app({"settings": {"workers": 3}})  # type: ignore[attr-defined]
    assert app is not None


def test_serve_config_is_valid_and_builds(reward_app: object) -> None:
    from ray.serve.schema import ServeDeploySchema

    yaml = pytest.importorskip("yaml")
    cfg = ServeDeploySchema.model_validate(
        yaml.safe_load((APP_DIR / "serve_config.yaml").read_text())
    )
    (app,) = cfg.applications
    module, _, builder = app.import_path.partition(":")
    assert (APP_DIR / f"{module}.py").exists() and builder == "build_app"
    assert getattr(reward_app, builder)(app.args) is not None  # the args are ones it takes


def test_a_replica_with_work_in_hand_scores_a_request_whole(reward_app: object) -> None:
    """FanOut's split decision, without Ray: the replica's app is a stand-in ASGI app that
    answers each body it gets with one result per item (the real app and a real split over two
    replicas are in ``test_two_replicas_score_over_serve_http``). An idle replica splits a
    large request and hands the second part to ``remote``; one that already holds at least
    ``min_part`` items of work scores the whole request itself."""
    import asyncio

    import orjson
    from fanout import FanOut

    seen: list[int] = []  # item counts of the bodies the local app scored

    def reply(body: bytes) -> tuple[list[object], bytes]:
        """A part's items and a reply to it: one result per item, by id."""
        items = orjson.loads(body)["items"]
        return items, orjson.dumps({"results": [{"id": x["id"]} for x in items],
                                    "count": len(items), "statuses": {"correct": len(items)},
                                    "elapsed_s": 0.0})

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        body = b""
        more = True
        while more:
            message = await receive()  # type: ignore[operator]
            body += message.get("body", b"")
            more = message.get("more_body", False)
        items, answer = reply(body)
        seen.append(len(items))
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": answer})  # type: ignore[operator]

    remote_parts: list[int] = []

    async def remote(path: str, headers: list[tuple[bytes, bytes]], body: bytes,
                     ) -> tuple[int, bytes]:
        items, answer = reply(body)
        remote_parts.append(len(items))
        return 200, answer

    backlog = [0]
    fan = FanOut(app, remote, parts=2, min_part=64, max_items=1000, max_body_bytes=1 << 20,
                 body_timeout_s=5.0, backlog=lambda: backlog[0])
    body = orjson.dumps({"items": [{"response": "1", "ground_truth": "1", "id": str(i)}
                                   for i in range(200)]})

    async def post() -> list[str]:
        sent = False
        out: list[bytes] = []

        async def receive() -> dict[str, object]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            if message["type"] == "http.response.body":
                out.append(message["body"])  # type: ignore[arg-type]

        scope = {"type": "http", "method": "POST", "path": "/v1/score", "query_string": b"",
                 "headers": [(b"content-type", b"application/json"),
                             (b"content-length", str(len(body)).encode())]}
        await fan(scope, receive, send)
        return [x["id"] for x in orjson.loads(b"".join(out))["results"]]

    in_order = [str(i) for i in range(200)]
    for held, local, remote_expected in ((0, [100], [100]), (63, [100], [100]),
                                         (64, [200], []), (5000, [200], [])):
        seen.clear()
        remote_parts.clear()
        backlog[0] = held
        assert asyncio.run(post()) == in_order, held
        assert (seen, remote_parts) == (local, remote_expected), held
