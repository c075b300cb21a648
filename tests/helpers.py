"""Test helpers: run the real service as a subprocess on a loopback port."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
# the team's shared data (corpus, datasets, adversarial inputs); a clone outside the workspace
# sets REWARD_TEST_DATA to that folder (tests marked needs_data are skipped without it)
DATA = Path(os.environ.get("REWARD_TEST_DATA") or ROOT.parent / "shared" / "data")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(entry))
    return out


def descendants_of(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out.extend(kids)
        todo.extend(kids)
    return out


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds ``pid`` has used; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def total_cpu_seconds(pids: Iterable[int]) -> float:
    """CPU seconds of the ``pids`` still there, summed."""
    return sum(c for c in map(cpu_seconds, pids) if c is not None)


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def read_jsonl(name: str) -> list[dict]:
    with open(DATA / name) as fh:
        return [json.loads(line) for line in fh]


class Service:
    """``python -m reward_service serve`` on a free loopback port, stopped on exit."""

    def __init__(self, *, preexec_fn: Callable[[], None] | None = None,
                 **env: str | int | float) -> None:
        self.preexec_fn = preexec_fn  # e.g. lower the server's RLIMIT_NOFILE
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "REWARD_HOST": "127.0.0.1",
            "REWARD_PORT": str(self.port),
            "REWARD_WORKERS": "2",
            "REWARD_SPARES": "1",
            "REWARD_LOG_LEVEL": "warning",
            **{k: str(v) for k, v in env.items()},
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"reward-service-{self.port}.log"

    def start(self, timeout_s: float = 60.0) -> Service:
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reward_service", "serve"],
            env=self.env, stdout=self._log, stderr=subprocess.STDOUT, cwd=ROOT,
            preexec_fn=self.preexec_fn,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited {self.proc.returncode}: {self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/readyz", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"service not ready after {timeout_s}s: {self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def worker_pids(self) -> list[int]:
        """The zygote and every worker it forked (all descendants of the server)."""
        assert self.proc is not None
        return descendants_of(self.proc.pid)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def service(**env: str | int | float) -> Iterator[Service]:
    with Service(**env) as svc:
        yield svc


def wait_until(predicate, timeout_s: float, interval_s: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval_s)
    return bool(predicate())
