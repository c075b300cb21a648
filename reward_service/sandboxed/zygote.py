"""The zygote: a warm, single-threaded template process that forks scoring workers.

``python -m reward_service.sandboxed.zygote CONFIG_JSON`` is started by the supervisor as a fresh
interpreter (spawn semantics: nothing inherited from the threaded server). It imports every
scorer and warms it up once, then forks a worker per request: a fork of a warm process costs
tens of milliseconds instead of the ~1 s a cold interpreter needs, so replacing a killed worker
does not eat the CPU the others are scoring with. This is multiprocessing's ``forkserver``
model, with the fork made from a process that never starts a thread.

Control socket: SOCK_SEQPACKET, one typed record per packet, defined in ``control.py`` (the
supervisor's side, ``pool/zygote_link.py``, uses the same module):

    server → zygote  Spawn(id)  + SCM_RIGHTS [task_read_fd, result_write_fd] | Ping(n)
    zygote → server  Ready(warmup_s, dfa_states) | Spawned(id, pid)
                     | SpawnFailed(id, reason) | Exited(pid, rc) | Pong(n)

The zygote reaps its children and reports their exit. It dies with the server (PDEATHSIG);
its workers die with it (PDEATHSIG). On EOF of the control socket it SIGKILLs every worker
it forked, reaps them, and exits.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import signal
import socket
import sys
import traceback

import orjson

from reward_service import control
from reward_service.logs import configure_logging
from reward_service.sandboxed.sandbox import SandboxConfig, set_parent_death_signal

__all__ = ["main"]


def _send(sock: socket.socket, msg: control.Message) -> None:
    sock.send(control.encode(msg))


def _reap(sock: socket.socket, children: set[int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        rc = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _send(sock, control.Exited(pid=pid, returncode=rc))


def main(argv: list[str] | None = None) -> int:
    cfg = orjson.loads((sys.argv[1:] if argv is None else argv)[0])
    server_pid = cfg["parent_pid"]
    set_parent_death_signal(server_pid)
    sock = socket.socket(fileno=cfg["ctrl_fd"])

    from reward_service.sandboxed.worker import GOLD_PHASE, WARMUP, serve
    from reward_service.scorers.impl import build_scorers  # heavy: math-verify, sympy
    from reward_service.scorers.patches import dfa_states, install_patches, warm_parser

    configure_logging("warning")  # stderr is the server's: a refused patch is seen there
    if cfg.get("library_patches", True):  # REWARD_LIBRARY_PATCHES; on a version they were not
        install_patches()  # proven on, none (an ERROR line on stderr): once, before the fork
    scorers = build_scorers(on_gold_parse=GOLD_PHASE)  # phase frames, once in a worker
    for scorer, response, gold in WARMUP:
        scorers[scorer](response, gold, {})
    warmup_s = warm_parser() if cfg.get("warm_parser", True) else 0.0  # scorers/patches/warmup.py
    sandbox = SandboxConfig(**cfg["sandbox"])
    probes = bool(cfg.get("probes", False))
    gc.collect()
    gc.freeze()  # the warm heap is shared copy-on-write with every worker: keep gc off it
    me = os.getpid()
    children: set[int] = set()
    _send(sock, control.Ready(warmup_s=warmup_s, dfa_states=dfa_states()))
    while True:
        readable, _, _ = select.select([sock], [], [], 0.02)
        _reap(sock, children)
        if not readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, control.MAX_PACKET, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        try:
            msg = control.decode(data)
        except control.ControlError:
            msg = None
        if isinstance(msg, control.Ping):  # liveness check of the supervisor
            _send(sock, control.Pong(n=msg.n))
        if not isinstance(msg, control.Spawn) or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            continue
        in_fd, out_fd = fds
        try:
            pid = os.fork()
        except OSError as exc:
            _send(sock, control.SpawnFailed(id=msg.id, reason=str(exc)))
            os.close(in_fd)
            os.close(out_fd)
            continue
        if pid == 0:  # the worker
            code = 70
            try:
                sock.close()
                os.setsid()  # its own process group: the supervisor kills the group
                set_parent_death_signal(me)
                code = serve(in_fd, out_fd, scorers, sandbox, parent_pid=me, probes=probes)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(in_fd)
        os.close(out_fd)
        children.add(pid)
        _send(sock, control.Spawned(id=msg.id, pid=pid))
    # The server is gone or stopping: take every worker down with us.
    for pid in children:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    while children:
        try:
            pid, _ = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        children.discard(pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
