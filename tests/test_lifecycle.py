"""Process lifecycle of the real server: SIGTERM drains, SIGKILL leaves no orphans."""

from __future__ import annotations

import os
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


def test_the_server_and_its_workers_run_under_sched_batch() -> None:
    """``REWARD_SCHED_BATCH`` (default on): the server, the zygote and every worker are
    ``SCHED_BATCH`` and still score; off, all stay ``SCHED_OTHER`` (the control)."""
    for on, policy in ((True, os.SCHED_BATCH), (False, os.SCHED_OTHER)):
        with Service(REWARD_SCHED_BATCH=str(on).lower(), REWARD_LOG_LEVEL="info") as svc:
            r = httpx.post(svc.url + "/v1/score", json={"items": _batch(4, "s")}, timeout=30)
            assert r.status_code == 200 and {x["status"] for x in r.json()["results"]} == {
                "correct"}
            assert svc.proc is not None
            pids = [svc.proc.pid, *svc.worker_pids()]
            assert len(pids) >= 4  # server, zygote, workers
            assert {p: os.sched_getscheduler(p) for p in pids} == dict.fromkeys(pids, policy)
            assert f"sched={'batch' if on else 'normal'}" in svc.log()
