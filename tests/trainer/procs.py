"""Processes of this machine by what their command line mentions (for "nothing left
running" checks)."""

from __future__ import annotations

import os

__all__ = ["procs_mentioning"]


def procs_mentioning(text: str) -> list[int]:
    """Pids whose ``/proc/<pid>/cmdline`` contains ``text``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if text.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found
