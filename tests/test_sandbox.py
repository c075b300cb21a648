"""Escape attempts inside a real sandboxed worker, through the test-only probe hook."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from reward_service.pool import Task, WorkerPool
from reward_service.probes import PROBES, TARGET
from reward_service.settings import Settings


@pytest.fixture(scope="module")
def probe_results() -> Iterator[tuple[dict[str, tuple[str, str]], dict]]:
    # a file any uid could destroy without the sandbox (world-writable, in /tmp)
    with open(TARGET, "w") as fh:
        fh.write("keep me")
    os.chmod(TARGET, 0o666)

    async def main() -> tuple[dict[str, tuple[str, str]], dict]:
        pool = WorkerPool(Settings(workers=1, spares=1, enable_test_probes=True,
                                   worker_memory_mb=1024, sandbox="best-effort"))
        await pool.start()
        try:
            names = sorted(PROBES)
            outs = await pool.submit([Task(f"__probe__:{n}", "", "", 5.0) for n in names])
            return ({n: (o.verdict.status, o.verdict.reason or "") for n, o in zip(names, outs, strict=True)},
                    pool.sandbox_report)
        finally:
            await pool.stop()

    try:
        yield asyncio.run(main())
        with open(TARGET) as fh:
            assert fh.read() == "keep me"
    finally:
        for path in (TARGET, TARGET + ".moved"):
            if os.path.exists(path):
                os.unlink(path)


NETWORK = ["tcp_connect", "udp_send", "dns", "unix_connect"]
FILES = ["write_cwd", "write_tmp", "write_dev_shm", "unlink_file", "rename_file", "truncate_file"]
PROCESSES = ["fork", "exec", "thread"]
PRIVILEGE = ["setuid_root", "signal_parent", "signal_sibling", "read_parent_environ"]


@pytest.mark.parametrize("probe", NETWORK + FILES + PROCESSES + PRIVILEGE + ["alloc_over_cap"])
def test_escape_is_blocked(probe: str, probe_results: tuple[dict, dict]) -> None:
    results, _ = probe_results
    status, detail = results[probe]
    assert status == "correct", f"{probe} escaped: {detail}"


def test_uid_is_not_root(probe_results: tuple[dict, dict]) -> None:
    results, report = probe_results
    if os.geteuid() != 0:
        pytest.skip("server not root: the worker keeps the server's uid by design")
    assert report["uid"]["status"] == "active"
    assert results["uid_not_root"][0] == "correct", results["uid_not_root"]


def test_report_lists_every_layer(probe_results: tuple[dict, dict]) -> None:
    _, report = probe_results
    assert set(report) == {"clean_env", "rlimits", "netns", "landlock", "uid", "seccomp"}
    for name in ("clean_env", "rlimits", "seccomp"):
        assert report[name]["status"] == "active", report[name]
    for name in ("netns", "landlock"):
        if report[name]["status"] != "active":
            pytest.skip(f"{name} not available here: {report[name]['detail']}")
