"""Sandbox escape probes run inside a worker: test-only.

A probe runs only in a worker whose pool was built with ``enable_test_probes=True`` (never
set by the server, and no HTTP route reaches it). It is dispatched like an item with the
reserved scorer name ``__probe__:<name>``; the verdict's ``status`` is ``correct`` when the
attempt was blocked and ``incorrect`` when it succeeded (an escape), with details in ``reason``.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable

__all__ = ["PROBES", "PROBE_PREFIX", "run_probe"]

PROBE_PREFIX = "__probe__:"


def _tcp() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        s.connect(("127.0.0.1", 1))
    return "connected over TCP"


def _udp() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", ("127.0.0.1", 9))
    return "sent a UDP datagram"


def _dns() -> str:
    # A raw DNS query to a loopback resolver address (never a host off this machine).
    query = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01"
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(query, ("127.0.0.53", 53))
    return "sent a DNS query"


def _unix() -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect("/run/probe.sock")
    return "connected a Unix socket"


def _write(directory: str) -> Callable[[], str]:
    def probe() -> str:
        path = os.path.join(directory, f"probe-{os.getpid()}.txt")
        with open(path, "w") as fh:
            fh.write("escaped")
        return f"wrote {path}"

    return probe


# A file the test creates (world-writable, in a world-writable directory) for the worker to
# try to destroy: without the sandbox, any uid could unlink or rename it.
TARGET = "/tmp/reward-probe-target"


def _unlink() -> str:
    os.unlink(TARGET)
    return f"unlinked {TARGET}"


def _rename() -> str:
    os.rename(TARGET, TARGET + ".moved")
    return f"renamed {TARGET}"


def _truncate() -> str:
    with open(TARGET, "r+b") as fh:
        fh.truncate(0)
    return f"truncated {TARGET}"


def _signal_sibling() -> str:
    me, parent = os.getpid(), os.getppid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent:
            os.kill(int(entry), 0)
            return f"may signal sibling {entry}"
    raise LookupError("no sibling worker found")


def _fork() -> str:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def _exec() -> str:
    os.execv("/bin/true", ["/bin/true"])
    return "exec returned"  # unreachable when exec works: the worker is replaced


def _thread() -> str:
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    return "started a thread"


def _alloc() -> str:
    block = bytearray(8 * 1024**3)  # over any cap the tests configure
    return f"allocated {len(block)} bytes"


def _uid() -> str:
    if os.getuid() == 0 or os.geteuid() == 0:
        return "running as root"
    raise PermissionError(f"uid {os.getuid()}")


def _setuid0() -> str:
    os.setuid(0)
    return "became root"


def _signal_parent() -> str:
    os.kill(os.getppid(), 0)
    return "may signal the parent"


def _parent_environ() -> str:
    with open(f"/proc/{os.getppid()}/environ", "rb") as fh:
        data = fh.read()
    return f"read {len(data)} bytes of the parent's environment"


PROBES: dict[str, Callable[[], str]] = {
    "tcp_connect": _tcp,
    "udp_send": _udp,
    "dns": _dns,
    "unix_connect": _unix,
    "write_cwd": _write("."),
    "write_tmp": _write("/tmp"),
    "write_dev_shm": _write("/dev/shm"),
    "unlink_file": _unlink,
    "rename_file": _rename,
    "truncate_file": _truncate,
    "signal_sibling": _signal_sibling,
    "fork": _fork,
    "exec": _exec,
    "thread": _thread,
    "alloc_over_cap": _alloc,
    "uid_not_root": _uid,
    "setuid_root": _setuid0,
    "signal_parent": _signal_parent,
    "read_parent_environ": _parent_environ,
}


def run_probe(name: str) -> tuple[bool, str]:
    """Run a probe; return ``(blocked, detail)``."""
    try:
        detail = PROBES[name]()
    except BaseException as exc:  # MemoryError, OSError, RuntimeError (thread), ...
        return True, f"{type(exc).__name__}: {exc}"[:300]
    return False, detail
