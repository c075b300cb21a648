"""Issue 27 items 5 and 6 against a live server: a hung zygote is replaced within 15 s with
no item failed, and a gold that cannot be parsed in time costs one deadline, not one per item.
Each with its control (the defence out of reach)."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from tests.helpers import alive, children_of, service

pytestmark = pytest.mark.timeout(600)


def _info(url: str) -> dict:
    return httpx.get(url + "/v1/info", timeout=30).json()["workers"]


def _hang_zygote(url: str, server_pid: int, *, watch_s: float) -> dict:
    """SIGSTOP the zygote and SIGKILL one worker (as a deadline kill would), then keep scoring
    batches of clean items; returns when the crew is whole again under a new zygote, or after
    ``watch_s``: how long that took, and every status the items got meanwhile."""
    (zygote,) = children_of(server_pid)
    os.kill(zygote, signal.SIGSTOP)
    os.kill(children_of(zygote)[0], signal.SIGKILL)
    t0 = time.monotonic()
    statuses: dict[str, int] = {}
    recovered = None
    n = 0
    with httpx.Client(base_url=url, timeout=120) as c:
        while time.monotonic() - t0 < watch_s:
            items = [{"response": f"#### {n + i}", "ground_truth": str(n + i), "scorer": "gsm8k"}
                     for i in range(8)]
            n += 8
            for r in c.post("/v1/score", json={"items": items}).json()["results"]:
                statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            w = _info(url)
            zygotes = children_of(server_pid)
            if (not alive(zygote) and zygotes and zygote not in zygotes
                    and w["active"] == 2 and w["spare"] == 1):
                recovered = round(time.monotonic() - t0, 2)
                break
    out = {"recovered_s": recovered, "statuses": statuses, "zygote_alive": alive(zygote),
           "workers": _info(url)}
    if alive(zygote):
        os.kill(zygote, signal.SIGCONT)
    return out


def test_a_hung_zygote_is_replaced_within_15s_and_no_item_fails(record: dict) -> None:
    """Item 5: a SIGSTOPped zygote is found by its unanswered ping (5 s) and replaced; the
    items its workers held are requeued, so every clean item sent meanwhile is ``correct``.
    Control (ping timeout out of reach): 20 s later the zygote is still there, stopped, and
    the crew is still a worker short (the spawn request waits for worker_start_timeout_s)."""
    with service() as svc:
        assert svc.proc is not None
        res = _hang_zygote(svc.url, svc.proc.pid, watch_s=60)
    with service(REWARD_ZYGOTE_PING_TIMEOUT_S=3600) as svc:
        assert svc.proc is not None
        ctl = _hang_zygote(svc.url, svc.proc.pid, watch_s=20)
    record.update(defended=res, control=ctl)
    assert res["recovered_s"] is not None and res["recovered_s"] <= 15, res
    assert set(res["statuses"]) == {"correct"}, res
    assert ctl["recovered_s"] is None and ctl["zygote_alive"], ctl
    assert ctl["workers"]["spare"] == 0, ctl
