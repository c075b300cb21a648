"""Sandbox escape probes: test-only code, imported by a worker only in probe mode.

A worker imports this module only when its pool was built with ``enable_test_probes=True``
(never set by the server, and no HTTP route reaches it); a production worker never loads it.
A probe is dispatched like an item with the reserved scorer name ``__probe__:<name>`` and its
argument, a JSON object, as the item's response. Each probe makes one attempt against a target
the test set up (a listening socket, a file, a process of the worker's uid, the host's IPC
namespace) and either returns what it did (an escape) or raises ``OSError``.

The verdict says which: ``correct`` = blocked, with the errno name in ``extracted`` (the test
asserts it: EPERM is seccomp's answer); ``incorrect`` = the attempt worked; ``error`` = the probe
itself failed in some other way (that is neither). ``reason`` carries the detail. The tests run
the same function in an unsandboxed process as the control (:func:`outcome`).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import mmap
import os
import resource
import signal
import socket
import struct
from collections.abc import Callable
from typing import Any

import pyseccomp  # for syscall numbers (per arch); imported while imports still work

from reward_service.scorers.base import Status, Verdict

__all__ = ["PROBES", "outcome", "verdict"]

Arg = dict[str, Any]

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def _syscall(name: str, *args: Any) -> int:
    nr = pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)
    return _check(_libc.syscall(ctypes.c_long(nr), *args), name)


# --- network: a listening socket the test opened --------------------------------------------
def _tcp(a: Arg) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:  # no getaddrinfo, no imports
        s.settimeout(5.0)
        s.connect(("127.0.0.1", a["port"]))
    return f"connected to 127.0.0.1:{a['port']}"


def _udp(a: Arg) -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"escaped", ("127.0.0.1", a["port"]))
    return f"sent a datagram to 127.0.0.1:{a['port']}"


def _unix(a: Arg) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5.0)
        s.connect(a["path"])
    return f"connected to {a['path']}"


# --- files: a world-writable directory or file the test created -----------------------------
def _create(a: Arg) -> str:
    path = os.path.join(a["dir"], f"probe-{os.getpid()}.txt")
    with open(path, "w") as fh:
        fh.write("escaped")
    return f"wrote {path}"


def _unlink(a: Arg) -> str:
    os.unlink(a["path"])
    return f"unlinked {a['path']}"


def _rename(a: Arg) -> str:
    os.rename(a["path"], a["path"] + ".moved")
    return f"renamed {a['path']}"


def _truncate(a: Arg) -> str:
    with open(a["path"], "r+b") as fh:
        fh.truncate(0)
    return f"truncated {a['path']}"


def _utime(a: Arg) -> str:
    os.utime(a["path"], (0, 0))
    return f"set the times of {a['path']} to 1970"


def _xattr(a: Arg) -> str:
    os.setxattr(a["path"], "user.probe", b"escaped")
    return f"set an extended attribute on {a['path']}"


# --- processes, threads, memory -------------------------------------------------------------
def _fork(a: Arg) -> str:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def _thread(a: Arg) -> str:
    # pthread_create, not threading: it answers with the errno (threading only RuntimeError)
    start = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(lambda _: None)
    tid = ctypes.c_ulong()
    rc = _libc.pthread_create(ctypes.byref(tid), None, start, None)
    if rc:
        raise OSError(rc, f"pthread_create: {os.strerror(rc)}")
    _libc.pthread_join(tid, None)
    return "started a thread"


def _exec(a: Arg) -> str:
    # Where exec works the process becomes echo, which prints this probe's escape outcome.
    said = json.dumps({"outcome": "escaped", "errno": None, "detail": "exec replaced the process"})
    os.execv("/bin/echo", ["/bin/echo", said])
    return "exec returned"  # unreachable


def _alloc(a: Arg) -> str:
    with mmap.mmap(-1, a["bytes"], flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS):
        return f"mapped {a['bytes']} bytes"


# --- privilege ------------------------------------------------------------------------------
def _uid(a: Arg) -> str:
    if os.getuid() == 0 or os.geteuid() == 0:
        return "running as root"
    raise PermissionError(errno.EPERM, f"uid {os.getuid()}")


def _setuid0(a: Arg) -> str:
    os.setuid(0)
    return "became root"


def _signal_parent(a: Arg) -> str:
    os.kill(os.getppid(), 0)
    return f"may signal the parent {os.getppid()}"


def _parent_environ(a: Arg) -> str:
    with open(f"/proc/{os.getppid()}/environ", "rb") as fh:
        data = fh.read()
    return f"read {len(data)} bytes of the parent's environment"


# --- item 10: other processes' limits, priority, affinity (a process of the worker's uid) ----
def _prlimit(a: Arg) -> str:
    resource.prlimit(a["pid"], resource.RLIMIT_NOFILE, (10, 10))
    return f"set RLIMIT_NOFILE of {a['pid']} to 10"


def _setpriority(a: Arg) -> str:
    os.setpriority(os.PRIO_PROCESS, a["pid"], 19)
    return f"reniced {a['pid']} to 19"


def _affinity(a: Arg) -> str:
    os.sched_setaffinity(a["pid"], {a["cpu"]})
    return f"pinned {a['pid']} to CPU {a['cpu']}"


# --- item 11: IPC objects in the host's IPC namespace that outlive the worker ---------------
_IPC_CREAT_EXCL = 0o1000 | 0o2000 | 0o600


def _shm(a: Arg) -> str:
    _check(_libc.shmget(a["key"], ctypes.c_size_t(1 << 20), _IPC_CREAT_EXCL), "shmget")
    return f"created SysV shared memory with key {a['key']}"


def _msg(a: Arg) -> str:
    _check(_libc.msgget(a["key"], _IPC_CREAT_EXCL), "msgget")
    return f"created a SysV message queue with key {a['key']}"


def _sem(a: Arg) -> str:
    _check(_libc.semget(a["key"], 1, _IPC_CREAT_EXCL), "semget")
    return f"created a SysV semaphore set with key {a['key']}"


def _mq(a: Arg) -> str:
    fd = _syscall("mq_open", a["name"].lstrip("/").encode(), os.O_CREAT | os.O_EXCL | os.O_RDWR,
                  0o600, None)
    os.close(fd)
    return f"created POSIX message queue {a['name']}"


def _pidfd_getfd(a: Arg) -> str:
    pidfd = os.pidfd_open(a["pid"])
    try:
        stolen = _syscall("pidfd_getfd", pidfd, 0, 0)  # the target's fd 0
    finally:
        os.close(pidfd)
    os.close(stolen)
    return f"took a copy of fd 0 of {a['pid']}"


# --- item 12: inherited file descriptors ----------------------------------------------------
def _stderr(a: Arg) -> str:
    os.ftruncate(2, 0)
    os.write(2, b"FORGED server log line\n")
    return "truncated fd 2 and wrote a forged log line"


def _fds(a: Arg) -> str:
    return json.dumps({fd: os.readlink(f"/proc/self/fd/{fd}")
                       for fd in os.listdir("/proc/self/fd")
                       if os.path.exists(f"/proc/self/fd/{fd}")})


def _dfa(a: Arg) -> str:
    """Not an attack: how many LaTeX-parser DFA states this worker inherited and learned
    (the zygote's warm-up, ``scorers/patches/warmup.py``, is tested with it)."""
    from reward_service.scorers.patches import dfa_states

    return json.dumps({"pid": os.getpid(), "dfa_states": dfa_states()})


def _patches(a: Arg) -> str:
    """Not an attack: whether this worker runs our library patches (``REWARD_LIBRARY_PATCHES``
    and the start-up version check, ``scorers/patches/__init__.py``, are tested with it)."""
    import math_verify.parser as mv_parser

    from reward_service.scorers.patches import patches_installed

    return json.dumps({"installed": patches_installed(),
                       "tail_scan": bool(getattr(mv_parser.extract_target_from_pred,
                                                 "tail_scan", False))})


# --- item 13: the parent-death signal -------------------------------------------------------
_PR_SET_PDEATHSIG, _PR_GET_PDEATHSIG = 1, 2


def _pdeathsig(a: Arg) -> str:
    _check(_libc.prctl(_PR_SET_PDEATHSIG, 0, 0, 0, 0), "prctl(PR_SET_PDEATHSIG, 0)")
    now = ctypes.c_int(-1)
    _check(_libc.prctl(_PR_GET_PDEATHSIG, ctypes.byref(now), 0, 0, 0), "prctl(PR_GET_PDEATHSIG)")
    return f"parent-death signal cleared (now {now.value})"


# --- item 15: signals to a process of the worker's uid (every way the kernel offers) -------
_SIGINFO = struct.Struct("iii4xii")  # si_signo, si_errno, si_code, (pad), si_pid, si_uid
_SI_QUEUE = -1


def _siginfo() -> ctypes.Array[ctypes.c_char]:
    raw = _SIGINFO.pack(signal.SIGKILL, 0, _SI_QUEUE, os.getpid(), os.getuid())
    return ctypes.create_string_buffer(raw.ljust(128, b"\0"), 128)


def _kill(a: Arg) -> str:
    os.kill(a["pid"], signal.SIGKILL)
    return f"killed {a['pid']} (kill)"


def _tkill(a: Arg) -> str:
    _syscall("tkill", a["pid"], signal.SIGKILL)
    return f"killed {a['pid']} (tkill)"


def _tgkill(a: Arg) -> str:
    _syscall("tgkill", a["pid"], a["pid"], signal.SIGKILL)
    return f"killed {a['pid']} (tgkill)"


def _sigqueue(a: Arg) -> str:
    _syscall("rt_sigqueueinfo", a["pid"], signal.SIGKILL, _siginfo())
    return f"killed {a['pid']} (rt_sigqueueinfo)"


def _tgsigqueue(a: Arg) -> str:
    _syscall("rt_tgsigqueueinfo", a["pid"], a["pid"], signal.SIGKILL, _siginfo())
    return f"killed {a['pid']} (rt_tgsigqueueinfo)"


def _pidfd(a: Arg) -> str:
    fd = os.pidfd_open(a["pid"])
    try:
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)
    return f"killed {a['pid']} (pidfd_send_signal)"


def _sigio(a: Arg) -> str:
    """Name the target as owner of a pipe's read end, then make the pipe readable: the kernel
    sends the owner SIGIO, whose default action ends it."""
    r, w = os.pipe()
    try:
        fcntl.fcntl(r, fcntl.F_SETOWN, a["pid"])
        fcntl.fcntl(r, fcntl.F_SETFL, fcntl.fcntl(r, fcntl.F_GETFL) | os.O_ASYNC)
        os.write(w, b"x")
    finally:
        os.close(r)
        os.close(w)
    return f"sent SIGIO to {a['pid']} (F_SETOWN)"


PROBES: dict[str, Callable[[Arg], str]] = {
    "tcp_connect": _tcp,
    "udp_send": _udp,
    "unix_connect": _unix,
    "create_file": _create,
    "unlink_file": _unlink,
    "rename_file": _rename,
    "truncate_file": _truncate,
    "utime_file": _utime,
    "setxattr_file": _xattr,
    "fork": _fork,
    "thread": _thread,
    "exec": _exec,
    "alloc_over_cap": _alloc,
    "uid_not_root": _uid,
    "setuid_root": _setuid0,
    "signal_parent": _signal_parent,
    "read_parent_environ": _parent_environ,
    "prlimit_other": _prlimit,
    "setpriority_other": _setpriority,
    "sched_setaffinity_other": _affinity,
    "pidfd_getfd_other": _pidfd_getfd,
    "sysv_shm": _shm,
    "sysv_msg": _msg,
    "sysv_sem": _sem,
    "posix_mq": _mq,
    "stderr_truncate": _stderr,
    "list_fds": _fds,
    "parser_dfa_states": _dfa,
    "library_patches": _patches,
    "clear_pdeathsig": _pdeathsig,
    "kill": _kill,
    "tkill": _tkill,
    "tgkill": _tgkill,
    "rt_sigqueueinfo": _sigqueue,
    "rt_tgsigqueueinfo": _tgsigqueue,
    "pidfd_send_signal": _pidfd,
    "sigio": _sigio,
}


def outcome(name: str, arg_json: str) -> dict[str, Any]:
    """Run one probe: ``{"outcome": "blocked" | "escaped" | "error", "errno", "detail"}``."""
    try:
        detail = PROBES[name](json.loads(arg_json or "{}"))
    except OSError as exc:
        code = exc.errno
        name_ = errno.errorcode.get(code, str(code)) if code is not None else None
        kind = "blocked" if name_ is not None else "error"
        return {"outcome": kind, "errno": name_, "detail": f"{type(exc).__name__}: {exc}"[:300]}
    except BaseException as exc:  # a probe that broke: neither blocked nor escaped
        return {"outcome": "error", "errno": None, "detail": f"{type(exc).__name__}: {exc}"[:300]}
    return {"outcome": "escaped", "errno": None, "detail": detail[:2000]}


_STATUS: dict[str, Status] = {"blocked": "correct", "escaped": "incorrect", "error": "error"}


def verdict(name: str, arg_json: str) -> Verdict:
    """A probe's outcome as the worker reports it (see the module docstring)."""
    out = outcome(name, arg_json)
    return Verdict(_STATUS[out["outcome"]], extracted=out["errno"], reason=out["detail"])
