"""Escape attempts inside a real sandboxed worker, through the test-only probe hook.

Every attempt has a live target the test sets up (a listening socket, a world-writable file,
a process of the worker's uid, the host's IPC namespace, the server's log file), a control
(the same probe function in an unsandboxed process of the worker's uid succeeds against the
same kind of target) and asserts the errno that shows which defence stopped it: EPERM is the
seccomp filter's answer.

Two pools: ``sandboxed`` is a production worker (every layer this host has); ``seccomp_only``
skips Landlock (``sandbox_landlock=False``), so that the seccomp rules for items of issue 13
(other processes' limits, IPC, PDEATHSIG, signals) are what is tested, as on a kernel without
Landlock ABI 6. Both workers' fd 2 starts as a file standing in for the server's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reward_service.sandboxed.worker import PROBE_PREFIX
from reward_service.server.pool import Task, WorkerPool
from reward_service.settings import Settings
from tests.helpers import ROOT, alive, wait_until

ROOT_TEST = os.geteuid() == 0
_DEFAULTS = Settings()
# the worker drops to worker_uid when the server is root, else keeps the server's uid
WORKER_UID = _DEFAULTS.worker_uid if ROOT_TEST else os.getuid()
WORKER_GID = _DEFAULTS.worker_gid if ROOT_TEST else os.getgid()
MEMORY_MB = 1024
LOG_LINE = "server log line that must survive\n"


@dataclass(frozen=True)
class Probe:
    status: str  # correct = blocked, incorrect = escaped, error = the probe broke
    errno: str | None
    detail: str

    def assert_blocked(self, errno_name: str) -> None:
        assert (self.status, self.errno) == ("correct", errno_name), self


class PoolThread:
    """A WorkerPool on its own event loop in a thread, so that every test can submit probes
    to the same warm workers. Entered and left by a module fixture."""

    def __init__(self, settings: Settings, stderr_path: Path) -> None:
        self.settings = settings
        self.stderr_path = stderr_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="probe-pool")
        self.pool = WorkerPool(settings)
        self.report: dict[str, Any] = {}

    def _call(self, coro: Any, timeout_s: float) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def __enter__(self) -> PoolThread:
        self.thread.start()
        # the zygote (and every worker it forks) inherits fd 2 as it is now: the "server log"
        saved = os.dup(2)
        with open(self.stderr_path, "a") as log:
            os.dup2(log.fileno(), 2)
        try:
            self._call(self.pool.start(), 300)
        except BaseException:
            self.__exit__()
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        self.report = self.pool.sandbox_report
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._call(self.pool.stop(), 120)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(30)
            self.loop.close()

    def probe(self, name: str, /, **arg: Any) -> Probe:
        task = Task(PROBE_PREFIX + name, json.dumps(arg), "", 30.0)
        [out] = self._call(self.pool.submit([task]), 120)
        v = out.verdict
        return Probe(v.status, v.extracted, v.reason or "")


_CONTROL = """
import ctypes, json, os, sys
from reward_service.sandboxed.probes import outcome
name, arg, uid, gid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if uid >= 0 and os.geteuid() == 0:
    os.setgroups([]); os.setgid(gid); os.setuid(uid)
ctypes.CDLL(None).prctl(1, 9, 0, 0, 0)  # SIGKILL on parent death, as a worker has it
sys.stdout.write(json.dumps(outcome(name, arg)))
"""


def control(name: str, /, *, as_worker: bool = True, stderr: Any = None, **arg: Any) -> dict:
    """The same probe in an unsandboxed process (the worker's uid unless ``as_worker=False``)."""
    uid = WORKER_UID if as_worker else -1
    proc = subprocess.run(
        [sys.executable, "-c", _CONTROL, name, json.dumps(arg), str(uid), str(WORKER_GID)],
        stdout=subprocess.PIPE, stderr=stderr, cwd=ROOT, timeout=120, check=True,
    )
    return json.loads(proc.stdout)


def escaped(name: str, /, **kw: Any) -> dict:
    out = control(name, **kw)
    assert out["outcome"] == "escaped", f"control of {name} did not work: {out}"
    return out


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("server-log") / "server.log"
    path.write_text(LOG_LINE)
    return path


def _settings(**kw: Any) -> Settings:
    base = {"workers": 1, "spares": 1, "enable_test_probes": True, "worker_memory_mb": MEMORY_MB,
            "sandbox": "best-effort"}
    return Settings(**{**base, **kw})


@pytest.fixture(scope="module")
def sandboxed(server_log: Path) -> Iterator[PoolThread]:
    with PoolThread(_settings(), server_log) as p:
        yield p


@pytest.fixture(scope="module")
def seccomp_only(server_log: Path) -> Iterator[PoolThread]:
    with PoolThread(_settings(sandbox_landlock=False), server_log) as p:
        assert p.report["landlock"]["status"] == "off", p.report
        assert p.report["seccomp"]["status"] == "active", p.report
        yield p


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A directory every uid may write into (not sticky: any uid may unlink in it)."""
    with tempfile.TemporaryDirectory(prefix="reward-probe-") as d:
        os.chmod(d, 0o777)
        yield Path(d)


@pytest.fixture
def victims() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Processes of the worker's uid (standing in for a sibling worker, or for the server
    where it is not root), started and killed here."""
    started: list[subprocess.Popen[bytes]] = []

    def make() -> subprocess.Popen[bytes]:
        ids: dict[str, Any] = {"user": WORKER_UID, "group": WORKER_GID, "extra_groups": []}
        proc = subprocess.Popen(["sleep", "600"], **(ids if ROOT_TEST else {}))
        started.append(proc)
        return proc

    yield make
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(30)


# --------------------------------------------------------------------------- network
def test_tcp_connect_to_a_listening_port(sandboxed: PoolThread) -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        escaped("tcp_connect", port=port)
        sandboxed.probe("tcp_connect", port=port).assert_blocked("EPERM")


def test_udp_datagram_to_a_bound_port(sandboxed: PoolThread) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as srv:
        srv.bind(("127.0.0.1", 0))
        srv.settimeout(30)
        port = srv.getsockname()[1]
        escaped("udp_send", port=port)
        assert srv.recv(64) == b"escaped"
        sandboxed.probe("udp_send", port=port).assert_blocked("EPERM")
        srv.setblocking(False)
        with pytest.raises(BlockingIOError):
            srv.recv(64)


def test_unix_connect_to_a_listening_socket(sandboxed: PoolThread, world_dir: Path) -> None:
    path = str(world_dir / "s.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
        srv.bind(path)
        os.chmod(path, 0o777)
        srv.listen(8)
        escaped("unix_connect", path=path)
        sandboxed.probe("unix_connect", path=path).assert_blocked("EPERM")


# --------------------------------------------------------------------------- files
@pytest.mark.parametrize("base", ["/tmp", "/dev/shm"])
def test_create_a_file_in_a_world_writable_dir(sandboxed: PoolThread, base: str) -> None:
    with tempfile.TemporaryDirectory(dir=base) as d:
        os.chmod(d, 0o777)
        escaped("create_file", dir=d)
        assert len(os.listdir(d)) == 1
        sandboxed.probe("create_file", dir=d).assert_blocked("EPERM")
        assert len(os.listdir(d)) == 1


@pytest.mark.parametrize("probe", ["unlink_file", "rename_file", "truncate_file"])
def test_destroy_a_world_writable_file(sandboxed: PoolThread, world_dir: Path, probe: str) -> None:
    def target(name: str) -> Path:
        path = world_dir / name
        path.write_text("keep me")
        path.chmod(0o666)
        return path

    victim = target("control")
    escaped(probe, path=str(victim))
    assert not victim.exists() or victim.read_text() == ""
    kept = target("kept")
    sandboxed.probe(probe, path=str(kept)).assert_blocked("EPERM")
    assert kept.read_text() == "keep me"
    assert "kept.moved" not in os.listdir(world_dir)


@pytest.mark.parametrize("probe", ["utime_file", "setxattr_file"])
def test_change_the_metadata_of_a_file_of_its_uid(sandboxed: PoolThread, world_dir: Path,
                                                  probe: str) -> None:
    def target(name: str) -> Path:
        path = world_dir / name
        path.write_text("keep me")
        os.chown(path, WORKER_UID, WORKER_GID)
        return path

    def changed(path: Path) -> bool:
        return path.stat().st_mtime == 0 or bool(os.listxattr(path))

    victim = target("control")
    escaped(probe, path=str(victim))
    assert changed(victim)
    kept = target("kept")
    sandboxed.probe(probe, path=str(kept)).assert_blocked("EPERM")
    assert not changed(kept)


# --------------------------------------------------------------------------- processes
@pytest.mark.parametrize("probe", ["fork", "thread", "exec"])
def test_no_new_process_thread_or_program(sandboxed: PoolThread, probe: str) -> None:
    escaped(probe)
    sandboxed.probe(probe).assert_blocked("EPERM")


def test_address_space_cap(sandboxed: PoolThread) -> None:
    size = 2 * MEMORY_MB * 1024 * 1024
    escaped("alloc_over_cap", bytes=size)
    sandboxed.probe("alloc_over_cap", bytes=size).assert_blocked("ENOMEM")


# --------------------------------------------------------------------------- privilege
needs_root = pytest.mark.skipif(not ROOT_TEST, reason="the uid drop needs a root server")


@needs_root
def test_setuid_root(sandboxed: PoolThread) -> None:
    escaped("setuid_root", as_worker=False)
    sandboxed.probe("setuid_root").assert_blocked("EPERM")


@needs_root
def test_signal_and_read_the_parent(sandboxed: PoolThread) -> None:
    escaped("signal_parent", as_worker=False)
    escaped("read_parent_environ", as_worker=False)
    sandboxed.probe("signal_parent").assert_blocked("EPERM")
    sandboxed.probe("read_parent_environ").assert_blocked("EACCES")


@needs_root
def test_uid_is_not_root(sandboxed: PoolThread) -> None:
    assert sandboxed.report["uid"]["status"] == "active"
    sandboxed.probe("uid_not_root").assert_blocked("EPERM")


def test_report_lists_every_layer(sandboxed: PoolThread) -> None:
    report = sandboxed.report
    assert set(report) == {"clean_env", "rlimits", "netns", "landlock", "uid", "seccomp"}
    for name in ("clean_env", "rlimits", "seccomp"):
        assert report[name]["status"] == "active", report[name]
    for name in ("netns", "landlock"):
        if report[name]["status"] != "active":
            pytest.skip(f"{name} not available here: {report[name]['detail']}")


def test_probes_are_not_loaded_outside_probe_mode() -> None:
    code = ("import sys, reward_service.sandboxed.zygote, reward_service.sandboxed.worker, reward_service.server.pool; "
            "sys.exit('reward_service.sandboxed.probes' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=120).returncode == 0


# --------------------------------------------------------------------------- issue 13, item 10
def _nofile(pid: int) -> int:
    """Hard RLIMIT_NOFILE of ``pid`` (from /proc: prlimit would need CAP_SYS_RESOURCE)."""
    with open(f"/proc/{pid}/limits") as fh:
        line = next(x for x in fh if x.startswith("Max open files"))
    return int(line.split()[4])


def test_prlimit_of_another_process(seccomp_only: PoolThread, victims: Callable) -> None:
    target = victims()
    escaped("prlimit_other", pid=target.pid)
    assert _nofile(target.pid) == 10
    target = victims()
    before = _nofile(target.pid)
    seccomp_only.probe("prlimit_other", pid=target.pid).assert_blocked("EPERM")
    assert _nofile(target.pid) == before != 10


def test_setpriority_of_another_process(seccomp_only: PoolThread, victims: Callable) -> None:
    target = victims()
    escaped("setpriority_other", pid=target.pid)
    assert os.getpriority(os.PRIO_PROCESS, target.pid) == 19
    target = victims()
    seccomp_only.probe("setpriority_other", pid=target.pid).assert_blocked("EPERM")
    assert os.getpriority(os.PRIO_PROCESS, target.pid) == 0


def test_affinity_of_another_process(seccomp_only: PoolThread, victims: Callable) -> None:
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip("one CPU: pinning to it changes nothing")
    cpu = max(cpus)
    target = victims()
    escaped("sched_setaffinity_other", pid=target.pid, cpu=cpu)
    assert os.sched_getaffinity(target.pid) == {cpu}
    target = victims()
    seccomp_only.probe("sched_setaffinity_other", pid=target.pid, cpu=cpu).assert_blocked("EPERM")
    assert os.sched_getaffinity(target.pid) == cpus


def test_take_an_fd_of_another_process(seccomp_only: PoolThread, victims: Callable) -> None:
    escaped("pidfd_getfd_other", pid=victims().pid)
    seccomp_only.probe("pidfd_getfd_other", pid=victims().pid).assert_blocked("EPERM")


# --------------------------------------------------------------------------- item 11
_libc = ctypes.CDLL(None, use_errno=True)
_IPC_RMID = 0


def _take_sysv(kind: str, key: int) -> bool:
    """Remove the host's SysV object with ``key``; True if there was one."""
    get, ctl = {"sysv_shm": (lambda: _libc.shmget(key, 0, 0), _libc.shmctl),
                "sysv_msg": (lambda: _libc.msgget(key, 0), _libc.msgctl),
                "sysv_sem": (lambda: _libc.semget(key, 0, 0), None)}[kind]
    ident = get()
    if ident < 0:
        return False
    if ctl is None:
        _libc.semctl(ident, 0, _IPC_RMID)
    else:
        ctl(ident, _IPC_RMID, None)
    return True


def _take_mq(name: str) -> bool:
    return _libc.mq_unlink(name.encode()) == 0


@pytest.mark.parametrize("kind", ["sysv_shm", "sysv_msg", "sysv_sem", "posix_mq"])
def test_ipc_objects_that_outlive_the_worker(seccomp_only: PoolThread, kind: str) -> None:
    key = random.randrange(1 << 24, 1 << 30)
    name = f"/reward-probe-{key}"
    take = (lambda: _take_mq(name)) if kind == "posix_mq" else (lambda: _take_sysv(kind, key))
    try:
        escaped(kind, key=key, name=name)
        assert take(), f"the control's {kind} object is not in the host's IPC namespace"
        seccomp_only.probe(kind, key=key, name=name).assert_blocked("EPERM")
    finally:
        left = take()
    assert not left


# --------------------------------------------------------------------------- item 12
def test_stderr_is_not_the_servers(seccomp_only: PoolThread, server_log: Path,
                                   tmp_path: Path) -> None:
    log = tmp_path / "control.log"
    log.write_text(LOG_LINE)
    with open(log, "r+") as fh:
        escaped("stderr_truncate", stderr=fh)
    assert log.read_text() == "FORGED server log line\n"
    # fd 2 of the worker is /dev/null: ftruncate answers EINVAL (not a regular file)
    seccomp_only.probe("stderr_truncate").assert_blocked("EINVAL")
    assert server_log.read_text().startswith(LOG_LINE)
    assert "FORGED" not in server_log.read_text()


def test_no_inherited_fd_but_its_pipes(sandboxed: PoolThread, server_log: Path) -> None:
    out = sandboxed.probe("list_fds")
    assert out.status == "incorrect", out  # the listing itself is allowed
    fds = {int(fd): target for fd, target in json.loads(out.detail).items()}
    assert {fds[0], fds[1], fds[2]} == {"/dev/null"}, fds
    rest = [target for fd, target in fds.items() if fd > 2]
    assert len(rest) == 2 and all(t.startswith("pipe:") for t in rest), fds


# --------------------------------------------------------------------------- item 13
def test_parent_death_signal_stays_set(server_log: Path) -> None:
    assert "now 0" in escaped("clear_pdeathsig")["detail"]
    # its own pool: the test SIGKILLs the zygote, and the worker must die with it
    with PoolThread(_settings(spares=0, sandbox_landlock=False), server_log) as p:
        [worker] = p.pool.worker_pids()
        zygote = p.pool.zygote_pid
        assert zygote is not None
        p.probe("clear_pdeathsig").assert_blocked("EPERM")
        try:
            os.kill(zygote, signal.SIGKILL)
            assert wait_until(lambda: not alive(worker), 60), "the worker outlived its zygote"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGKILL)


# --------------------------------------------------------------------------- item 15
SIGNALS = ["kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
           "pidfd_send_signal", "sigio"]


@pytest.mark.parametrize("probe", SIGNALS)
def test_signal_a_process_of_the_same_uid(seccomp_only: PoolThread, victims: Callable,
                                          probe: str) -> None:
    target = victims()
    escaped(probe, pid=target.pid)
    assert target.wait(60) < 0  # killed by a signal (SIGKILL, or SIGIO's default action)
    target = victims()
    seccomp_only.probe(probe, pid=target.pid).assert_blocked("EPERM")
    assert target.poll() is None
