"""Sandbox layers a worker applies to itself before it reads untrusted text.

What is covered (docs/RELIABILITY.md has the table of syscall classes, what blocks each with
and without Landlock, and the test of each): a worker cannot open network sockets (seccomp +
a private network namespace + Landlock TCP rules); cannot create, write, rename, delete or
re-stamp files (seccomp on open flags and path/metadata syscalls + Landlock + RLIMIT_FSIZE=0 +
an unprivileged uid); cannot start processes or threads (seccomp + RLIMIT_NPROC=0); cannot
signal, trace, read the fds of, or change the limits, priority or affinity of any other process
(seccomp argument rules: only itself as a target, the same with or without Landlock; Landlock
signal scoping and a different uid on top where present); cannot make SysV/POSIX IPC objects
(seccomp + a private IPC namespace); cannot clear its parent-death signal (seccomp); cannot
exceed its address-space and CPU caps (rlimits); holds no inherited environment and no
inherited fd but its two pipes (fds 0-2 are /dev/null, not the server's stderr).

What is not: reading world-readable files is allowed (Python imports lazily); advisory locks
on files it can read; the supervisor enforces wall-clock deadlines from outside by killing the
worker; seccomp here is a deny-list, so a syscall a later kernel adds is allowed until listed;
kernel bugs.

Each layer returns a :class:`Layer`: ``active``, ``unavailable`` (this host cannot provide it,
e.g. no privilege to create a namespace inside a default container, or not root so there is
no uid to drop), ``failed`` (it should have worked and did not) or ``off`` (disabled by
settings: the whole sandbox, or Landlock alone in tests). In ``strict`` mode a
worker refuses to run if any layer is ``failed`` or a required layer is ``unavailable``.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import resource
import signal
import struct
from dataclasses import asdict, dataclass
from typing import Literal

__all__ = ["LAYERS", "Layer", "SandboxConfig", "apply_sandbox", "set_parent_death_signal"]

LayerStatus = Literal["active", "unavailable", "failed", "off"]
LAYERS = ("clean_env", "rlimits", "netns", "landlock", "uid", "seccomp")
# Layers strict mode insists on wherever they could exist at all.
_REQUIRED_IN_STRICT = {"clean_env", "rlimits", "seccomp", "netns"}


@dataclass(frozen=True, slots=True)
class Layer:
    status: LayerStatus
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    mode: Literal["strict", "best-effort", "off"] = "strict"
    memory_mb: int = 2048
    cpu_s: int = 3600
    uid: int = 65534
    gid: int = 65534
    max_open_files: int = 64
    landlock: bool = True  # False only in tests, so that the seccomp rules alone are tested


try:  # imported now, while the process may still read temp dirs and load libraries
    import pyseccomp as _sc

    _SECCOMP_IMPORT_ERROR: str | None = None
except Exception as _exc:  # libseccomp missing
    _sc = None
    _SECCOMP_IMPORT_ERROR = str(_exc)

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def _errno_str() -> str:
    e = ctypes.get_errno()
    return f"{errno.errorcode.get(e, e)}: {os.strerror(e)}"


def set_parent_death_signal(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies; exit at once if the parent is gone already."""
    if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent_pid:
        os._exit(0)


def _clean_env(keep_fds: tuple[int, ...]) -> Layer:
    """No inherited environment; fds 0-2 on /dev/null; every other inherited fd closed.

    fd 2 was the server's stderr (its log file or pipe): a worker could truncate it or write
    forged log lines. What a worker has to say reaches the server in result frames.
    """
    os.environ.clear()
    try:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        for fd in {null, *(int(name) for name in os.listdir("/proc/self/fd"))}:
            if fd > 2 and fd not in keep_fds:
                with contextlib.suppress(OSError):  # the listing's own fd is gone already
                    os.close(fd)
    except OSError as exc:
        return Layer("failed", f"stdio to /dev/null: {exc}")
    return Layer("active", "environment cleared; fds 0-2 /dev/null, no other inherited fd")


def _rlimits(cfg: SandboxConfig) -> Layer:
    mem = cfg.memory_mb * 1024 * 1024
    highest_fd = max((int(x) for x in os.listdir("/proc/self/fd")), default=2)
    nofile = max(cfg.max_open_files, highest_fd + 8)
    limits = {
        "AS": (resource.RLIMIT_AS, mem),
        "CPU": (resource.RLIMIT_CPU, cfg.cpu_s),
        "CORE": (resource.RLIMIT_CORE, 0),
        "FSIZE": (resource.RLIMIT_FSIZE, 0),
        "NOFILE": (resource.RLIMIT_NOFILE, nofile),
        "NPROC": (resource.RLIMIT_NPROC, 0),
    }
    try:
        for rlim, value in limits.values():
            resource.setrlimit(rlim, (value, value))
    except (OSError, ValueError) as exc:
        return Layer("failed", f"setrlimit: {exc}")
    shown = ", ".join(f"{k}={v}" for k, (_, v) in limits.items())
    note = "" if os.geteuid() != 0 else " (NPROC binds after the uid drop)"
    return Layer("active", shown + note)


def _netns() -> Layer:
    """Private network (no interfaces up) and IPC namespaces (its SysV/POSIX IPC objects die
    with it); a user namespace too where that is the only way to get them."""
    if _libc.unshare(_CLONE_NEWNET | _CLONE_NEWIPC) == 0:
        return Layer("active", "private network and IPC namespaces (no interfaces up)")
    first = _errno_str()
    if _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET | _CLONE_NEWIPC) == 0:
        return Layer("active", "private user, network and IPC namespaces")
    return Layer(
        "unavailable",
        f"unshare(CLONE_NEWNET|CLONE_NEWIPC): {first}; with CLONE_NEWUSER: {_errno_str()}",
    )


# --- Landlock (ctypes; syscall numbers are the same on x86_64 and aarch64) ----------------
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
# Write-like filesystem rights (reads stay allowed: Python imports lazily).
_FS_WRITE_RIGHTS = {
    1: (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10)
    | (1 << 11) | (1 << 12),  # WRITE_FILE, REMOVE_DIR/FILE, MAKE_CHAR/DIR/REG/SOCK/FIFO/BLOCK/SYM
    2: 1 << 13,  # REFER
    3: 1 << 14,  # TRUNCATE
}
_NET_RIGHTS = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_SCOPES = (1 << 0) | (1 << 1)  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)


def _landlock(cfg: SandboxConfig) -> Layer:
    if not cfg.landlock:
        return Layer("off", "skipped by settings (tests of the seccomp rules alone)")
    syscall = _libc.syscall
    syscall.restype = ctypes.c_long
    abi = syscall(_SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                  ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    if abi < 0:
        return Layer("unavailable", f"kernel without Landlock ({_errno_str()})")
    fs = 0
    for version, rights in _FS_WRITE_RIGHTS.items():
        if abi >= version:
            fs |= rights
    fields = [fs]
    parts = ["fs writes denied"]
    if abi >= 4:
        fields.append(_NET_RIGHTS)
        parts.append("TCP bind/connect denied")
    if abi >= 6:
        fields.append(_SCOPES)
        parts.append("signals and abstract sockets scoped")
    attr = ctypes.create_string_buffer(struct.pack(f"={len(fields)}Q", *fields))
    fd = syscall(_SYS_LANDLOCK_CREATE_RULESET, attr, ctypes.c_size_t(len(attr.raw)),
                 ctypes.c_uint32(0))
    if fd < 0:
        return Layer("failed", f"landlock_create_ruleset: {_errno_str()}")
    try:
        if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return Layer("failed", f"PR_SET_NO_NEW_PRIVS: {_errno_str()}")
        if syscall(_SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) != 0:
            return Layer("failed", f"landlock_restrict_self: {_errno_str()}")
    finally:
        os.close(fd)
    return Layer("active", f"ABI {abi}: " + ", ".join(parts))


def _drop_uid(cfg: SandboxConfig, parent_pid: int, start_uid: int) -> Layer:
    # start_uid: the uid before any user namespace (inside one, geteuid() is the overflow uid)
    if start_uid != 0 or os.geteuid() != 0:
        return Layer("unavailable", f"server not root; worker keeps uid {start_uid}")
    try:
        os.setgroups([])
        os.setgid(cfg.gid)
        os.setuid(cfg.uid)
    except OSError as exc:
        return Layer("failed", f"setuid({cfg.uid}): {exc}")
    set_parent_death_signal(parent_pid)  # setuid clears PDEATHSIG: set it again
    return Layer("active", f"uid={os.getuid()} gid={os.getgid()}")


_DENY_ALWAYS = (
    # network
    "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4",
    # processes and threads
    "fork", "vfork", "clone", "execve", "execveat",
    # other processes' memory, files, privilege, namespaces, mounts
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "process_madvise", "process_mrelease", "move_pages", "migrate_pages",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setfsuid", "setfsgid", "capset", "unshare", "setns", "mount", "umount2", "pivot_root",
    "chroot", "fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "move_mount",
    "mount_setattr",
    # signals whose target the filter cannot see (a pidfd)
    "pidfd_send_signal",
    # resource limits: set none after the sandbox (reading its own stays allowed, see below)
    "setrlimit",
    # SysV and POSIX IPC objects outlive the worker
    "msgget", "msgsnd", "msgrcv", "msgctl", "semget", "semop", "semtimedop", "semctl",
    "shmget", "shmat", "shmdt", "shmctl", "mq_open", "mq_unlink", "mq_timedsend",
    "mq_timedreceive", "mq_notify", "mq_getsetattr",
    # filesystem changes
    "creat", "unlink", "unlinkat", "rename", "renameat", "renameat2", "mkdir", "mkdirat",
    "rmdir", "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat",
    "fchmodat2", "chown", "fchown", "lchown", "fchownat", "truncate", "mknod", "mknodat",
    "memfd_create", "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr",
    "fremovexattr", "utime", "utimes", "utimensat", "futimesat", "name_to_handle_at",
    "open_by_handle_at",
    # kernel attack surface and host state a scorer never needs
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
    "fanotify_init", "quotactl", "syslog", "vhangup", "sethostname", "setdomainname",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
)

# Linux constants the argument rules compare against (the same on x86_64 and aarch64).
_PRIO_PROCESS = 0
_IOPRIO_WHO_PROCESS = 1
_F_SETOWN, _F_SETOWN_EX = 8, 15


def _arg_rules(sc: object, pid: int) -> list[tuple[str, tuple[object, ...]]]:
    """(syscall, conditions): each pair is one rule, denied when all its conditions hold.

    Several rules for one syscall are alternatives, so "deny unless the target is this
    process" is written as one rule per way the target can differ.
    """
    arg, ne, eq = sc.Arg, sc.NE, sc.EQ  # type: ignore[attr-defined]
    rules: list[tuple[str, tuple[object, ...]]] = []
    # signals only to itself (kill(0) would reach its process group: the worker leads its own)
    for name in ("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rules.append((name, (arg(0, ne, pid),)))
    # SIGIO/SIGURG sent by the kernel to a process the worker names as a file's owner (the
    # ioctl forms, FIOSETOWN/SIOCSPGRP, work on sockets only, and sockets are denied)
    for cmd in (_F_SETOWN, _F_SETOWN_EX):
        rules.append(("fcntl", (arg(1, eq, cmd),)))
    # limits, priority, affinity and scheduling: of itself only (pid 0); getrlimit is
    # prlimit64(0, r, NULL, old) in glibc, so that stays; setting any limit does not
    rules.append(("prlimit64", (arg(0, ne, 0),)))
    rules.append(("prlimit64", (arg(2, ne, 0),)))
    for name in ("sched_setaffinity", "sched_setscheduler", "sched_setparam", "sched_setattr"):
        rules.append((name, (arg(0, ne, 0),)))
    rules.append(("setpriority", (arg(0, ne, _PRIO_PROCESS),)))  # PRIO_PGRP, PRIO_USER
    rules.append(("setpriority", (arg(1, ne, 0),)))
    rules.append(("ioprio_set", (arg(0, ne, _IOPRIO_WHO_PROCESS),)))
    rules.append(("ioprio_set", (arg(1, ne, 0),)))
    # the parent-death signal, set before the filter, stays set: it is the death chain
    rules.append(("prctl", (arg(0, eq, _PR_SET_PDEATHSIG),)))
    return rules


def _seccomp() -> Layer:
    sc = _sc
    if sc is None:
        return Layer("unavailable", f"pyseccomp/libseccomp not loadable: {_SECCOMP_IMPORT_ERROR}")
    eperm = sc.ERRNO(errno.EPERM)
    pid = os.getpid()
    rules = _arg_rules(sc, pid)
    try:
        f = sc.SyscallFilter(defaction=sc.ALLOW)
        for name in _DENY_ALWAYS:
            f.add_rule(eperm, name)
        # clone3 → ENOSYS makes libc fall back to clone, which is denied above
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
        f.add_rule(sc.ERRNO(errno.ENOSYS), "openat2")
        # open for writing or creating is denied; read-only opens stay allowed
        for flag in (os.O_WRONLY, os.O_RDWR, os.O_CREAT, os.O_TRUNC):
            f.add_rule(eperm, "openat", sc.Arg(2, sc.MASKED_EQ, flag, flag))
            f.add_rule(eperm, "open", sc.Arg(1, sc.MASKED_EQ, flag, flag))
        for name, conditions in rules:
            f.add_rule(eperm, name, *conditions)
        f.load()
    except Exception as exc:
        return Layer("failed", f"seccomp: {exc}")
    return Layer(
        "active",
        f"deny-list of {len(_DENY_ALWAYS) + 2} syscalls, write-opens denied, "
        f"{len(rules)} argument rules (no other process as a target)",
    )


def apply_sandbox(
    cfg: SandboxConfig, parent_pid: int, keep_fds: tuple[int, ...] = ()
) -> tuple[dict[str, Layer], str | None]:
    """Apply every layer in order; return the report and, in strict mode, why to refuse.

    ``keep_fds``: the worker's own pipes; every other inherited fd is closed.
    """
    if cfg.mode == "off":
        return {name: Layer("off", "sandbox disabled by settings") for name in LAYERS}, None
    report: dict[str, Layer] = {}
    start_uid = os.geteuid()
    report["clean_env"] = _clean_env(keep_fds)
    report["netns"] = _netns()  # needs privilege: before the uid drop
    report["rlimits"] = _rlimits(cfg)
    report["uid"] = _drop_uid(cfg, parent_pid, start_uid)
    report["landlock"] = _landlock(cfg)
    report["seccomp"] = _seccomp()  # last: it forbids the calls the steps above make
    refusal = None
    if cfg.mode == "strict":
        bad = [
            f"{name}: {layer.status} ({layer.detail})"
            for name, layer in report.items()
            if layer.status == "failed"
            or (layer.status == "unavailable" and name in _REQUIRED_IN_STRICT)
        ]
        if bad:
            refusal = "strict sandbox: " + "; ".join(bad)
    return report, refusal


def report_dict(report: dict[str, Layer]) -> dict[str, dict[str, str]]:
    return {name: asdict(layer) for name, layer in report.items()}
