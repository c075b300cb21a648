"""Where the peers' own virtual environments are, and whether each is installed.

Each peer runs from its released package in a venv of its own (``make peers`` builds them):
``nemo-gym`` 0.7.0 needs Python 3.13 and pins its own FastAPI and math-verify, ``verifiers``
0.4.0 brings ~90 packages of its own; neither goes into the project's venv. The folder is
``$REWARD_PEERS_DIR`` or ``.venv/peers`` beside the project's venv.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def peers_dir() -> Path:
    return Path(os.environ.get("REWARD_PEERS_DIR") or ROOT / ".venv" / "peers")


@dataclass(frozen=True)
class PeerVenv:
    """A peer's venv: ``python`` to run, and ``why`` it cannot run (None when it can)."""

    name: str
    python: Path
    why: str | None


def peer_venv(name: str) -> PeerVenv:
    """The venv ``peers_dir()/name`` that ``make peers`` marks done with ``.installed``."""
    home = peers_dir() / name
    python = home / "bin" / "python"
    if not (home / ".installed").exists() or not python.exists():
        return PeerVenv(name, python, f"{home} is not installed: run `make peers` "
                        "(its own venv from the released package; ~1.5 GB, ~2 min)")
    return PeerVenv(name, python, None)
