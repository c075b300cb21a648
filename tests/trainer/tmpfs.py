"""Run a command with a small, real tmpfs mounted: how the tests fill a disk for real.

The mount lives in a private mount namespace (``unshare --mount``; ``--map-root-user``
as well where user namespaces allow it), so it disappears with the command and is never
seen by anything else on the machine. Where neither works, :func:`tmpfs_runner` says why and
the test is skipped.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

__all__ = ["run_on_tmpfs", "tmpfs_runner"]

_PROBE = "mount -t tmpfs -o size=16k tmpfs {d} && touch {d}/x"


def tmpfs_runner(tmp: Path) -> list[str] | str:
    """The ``unshare`` prefix that can mount a tmpfs here, or the reason none can."""
    if shutil.which("unshare") is None:
        return "no `unshare` on this machine"
    probe = tmp / "tmpfs-probe"
    probe.mkdir(exist_ok=True)
    tried = []
    for prefix in (["unshare", "--mount", "--map-root-user"], ["unshare", "--mount"]):
        r = subprocess.run([*prefix, "sh", "-c", _PROBE.format(d=shlex.quote(str(probe)))],
                           capture_output=True, text=True, timeout=30)
        if r.returncode == 0:
            return prefix
        tried.append(f"{' '.join(prefix)}: {r.stderr.strip()[:200]}")
    return "cannot mount a tmpfs in a private mount namespace (" + "; ".join(tried) + ")"


def run_on_tmpfs(prefix: list[str], mountpoint: Path, size: str, command: str, *,
                 timeout_s: float, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """``command`` (a shell line) with a tmpfs of ``size`` mounted on ``mountpoint``."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    line = (f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(mountpoint))} && "
            f"{command}")
    return subprocess.run([*prefix, "sh", "-c", line], capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, **(env or {})})
