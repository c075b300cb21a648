"""Checkpoint directories: naming, discovery of the latest complete one, keep-last-k.

Layout of ``OUTPUT/checkpoints/``::

    step_000010/
        model/               Hugging Face model dir (config, model.safetensors, tokenizer):
                             full, unsharded weights; loads with from_pretrained / grpo-eval
        optimizer.pt         full (unsharded) optimizer state dict
        trainer_state.json   {"step": 10, ...}; written last: its presence marks a complete
                             checkpoint
    step_000020/ ...

A checkpoint is written under ``step_NNNNNN.tmp`` and renamed when complete, so a crash
mid-save leaves no directory that :func:`latest_checkpoint` would pick.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

__all__ = [
    "TRAINER_STATE",
    "checkpoint_path",
    "finalize_checkpoint",
    "latest_checkpoint",
    "list_checkpoints",
    "prune_checkpoints",
    "read_trainer_state",
    "tmp_checkpoint_path",
]

TRAINER_STATE = "trainer_state.json"
_NAME = re.compile(r"^step_(\d{6,})$")


def checkpoint_path(root: str | Path, step: int) -> Path:
    return Path(root) / f"step_{step:06d}"


def tmp_checkpoint_path(root: str | Path, step: int) -> Path:
    return Path(root) / f"step_{step:06d}.tmp"


def finalize_checkpoint(root: str | Path, step: int, state: dict[str, Any]) -> Path:
    """Write ``trainer_state.json`` into the tmp dir and rename it into place."""
    tmp = tmp_checkpoint_path(root, step)
    (tmp / TRAINER_STATE).write_text(json.dumps({"step": step, **state}, indent=1))
    final = checkpoint_path(root, step)
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    return final


def list_checkpoints(root: str | Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root`` as ``(step, path)``, oldest first."""
    r = Path(root)
    if not r.is_dir():
        return []
    out = []
    for p in r.iterdir():
        m = _NAME.match(p.name)
        if m and (p / TRAINER_STATE).is_file():
            out.append((int(m.group(1)), p))
    return sorted(out)


def latest_checkpoint(root: str | Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def read_trainer_state(ckpt: str | Path) -> dict[str, Any]:
    return dict(json.loads((Path(ckpt) / TRAINER_STATE).read_text()))


def prune_checkpoints(root: str | Path, keep_last: int) -> list[Path]:
    """Delete all but the newest ``keep_last`` complete checkpoints, and stale ``.tmp``
    dirs; return what was deleted. ``keep_last <= 0`` keeps everything."""
    removed: list[Path] = []
    if keep_last > 0:
        for _, p in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(p)
            removed.append(p)
    r = Path(root)
    if r.is_dir():
        for p in r.glob("step_*.tmp"):
            shutil.rmtree(p)
            removed.append(p)
    return removed
