"""The zygote's parser warm-up reaches every worker it forks (``scorers/patches/warmup.py``).

Real pools, real forked workers: each worker reports, through the ``parser_dfa_states``
probe, its pid and how many LaTeX-parser DFA states it holds. With the warm-up (the default)
every worker, a replacement forked after a SIGKILL included, starts with the zygote's cache;
with ``warm_parser=False`` (the control) workers hold only what the scorers' short warm-up
left.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal

import pytest

from reward_service.sandboxed.worker import PROBE_PREFIX
from reward_service.server.pool import Task, WorkerPool
from reward_service.settings import Settings

_PROBE = Task(PROBE_PREFIX + "parser_dfa_states", "{}", "", 30.0)


async def _states(pool: WorkerPool) -> dict[int, int]:
    """{pid: DFA states} of the workers that answered a request of 8 probes (a request is
    cut into chunks that go to every active worker)."""
    got: dict[int, int] = {}
    for out in await pool.submit([_PROBE] * 8):
        assert out.verdict.status == "incorrect", out.verdict  # "escaped": the probe ran
        report = json.loads(out.verdict.reason or "{}")
        got[report["pid"]] = report["dfa_states"]
    return got


def _run(warm: bool) -> tuple[dict[int, int], dict[int, int]]:
    """States before and after one active worker is SIGKILLed and replaced."""
    async def main() -> tuple[dict[int, int], dict[int, int]]:
        pool = WorkerPool(Settings(workers=2, spares=1, enable_test_probes=True,
                                   warm_parser=warm))
        await pool.start()
        try:
            first = await _states(pool)
            victim = pool.worker_pids("active")[0]
            os.kill(victim, signal.SIGKILL)
            await asyncio.wait_for(pool.until(lambda: victim not in pool.worker_pids()
                                              and len(pool.worker_pids("active")) == 2), 60)
            return first, await _states(pool)
        finally:
            await pool.stop()

    return asyncio.run(main())


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "control"])
def test_every_worker_starts_with_the_zygotes_parser_cache(warm: bool) -> None:
    first, after = _run(warm)
    assert len(first) == 2 and len(after) == 2, (first, after)
    assert set(after) != set(first)  # a replacement answered
    for states in (*first.values(), *after.values()):
        assert (states > 1000) if warm else (states < 500), (first, after)
