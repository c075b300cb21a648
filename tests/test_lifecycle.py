"""Process lifecycle of the real server: SIGTERM drains, SIGKILL leaves no orphans."""

from __future__ import annotations

import signal
import threading
import time

import httpx

from tests.helpers import Service, alive, wait_until


def _batch(n: int, tag: str) -> list[dict]:
    # distinct items (no cache or dedup shortcut), ~1 ms each on a worker
    return [{"response": f"{tag} so \\boxed{{{i}}}", "ground_truth": str(i), "id": f"{tag}{i}"}
            for i in range(n)]


def test_sigterm_during_a_large_batch_answers_it_in_full() -> None:
    svc = Service(REWARD_LOG_LEVEL="info", REWARD_DRAIN_S=60).start()
    try:
        descendants = svc.worker_pids()
        assert len(descendants) >= 4  # zygote + 2 active + 1 spare
        reply: dict[str, httpx.Response] = {}

        def post() -> None:
            with httpx.Client(timeout=120) as c:
                reply["r"] = c.post(svc.url + "/v1/score", json={"items": _batch(6000, "t")})

        t = threading.Thread(target=post)
        t.start()

        def in_flight() -> bool:  # the batch reached the pool (not merely uploading)
            info = httpx.get(svc.url + "/v1/info", timeout=5).json()
            return bool(info["workers"]["outstanding_items"] > 0)

        assert wait_until(in_flight, 60.0)
        assert svc.proc is not None
        svc.proc.send_signal(signal.SIGTERM)
        # new connections are refused while the batch finishes
        time.sleep(0.3)
        try:
            late = httpx.post(svc.url + "/v1/score", json={"items": _batch(1, "late")}, timeout=5)
            assert late.status_code == 503 and "retry-after" in late.headers
        except httpx.TransportError:
            pass  # listener already closed: equally a refusal
        t.join(timeout=120)
        r = reply["r"]
        assert r.status_code == 200
        results = r.json()["results"]
        assert len(results) == 6000
        assert {x["status"] for x in results} == {"correct"}
        assert svc.proc.wait(timeout=30) in (0, -signal.SIGTERM)
        assert "pool stopped" in svc.log()
        assert wait_until(lambda: not [p for p in descendants if alive(p)], 2.0)
    finally:
        svc.stop()


def test_sigkill_of_the_server_takes_every_worker_down() -> None:
    svc = Service().start()
    try:
        descendants = svc.worker_pids()
        assert len(descendants) >= 4
        assert svc.proc is not None
        svc.proc.kill()
        svc.proc.wait(timeout=5)
        assert wait_until(lambda: not [p for p in descendants if alive(p)], 1.0), [
            p for p in descendants if alive(p)
        ]
    finally:
        svc.stop()
