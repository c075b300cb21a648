"""``<output_dir>/rollouts/step_<N>.jsonl``: every sampled completion of a training step.

One file per logged step (``log.rollouts_every``), the same layout and record format as
``eval/step_<N>.jsonl`` (:mod:`trainer_client.tracking.records`). Why one file per step
rather than one file with a ``step`` field:

- each step file is written whole, through a temporary file and a rename: a reader (or a
  crash, or a full disk) never leaves half a step or half a line;
- resume is a file operation: a run resumed from the checkpoint of step S keeps the files of
  steps <= S untouched, and moves those of later steps (written by the crashed run after its
  last checkpoint: steps that the resumed run does again) into ``rollouts/discarded/``, so
  no step appears twice and nothing is silently deleted (``eval/`` gets the same rule, so
  the report never pairs an eval of a crashed attempt; a fresh run sets every earlier step
  file aside, as it starts ``metrics.jsonl`` anew);
- one step opens on its own (``jq . rollouts/step_120.jsonl``), and the report reads first
  and last steps without scanning the run.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer_client.tracking.files import disk_full_as_error, write_text_atomic
from trainer_client.tracking.records import fit_to_bytes, jsonl_text

__all__ = ["RolloutLog", "set_aside_steps_after", "step_files"]

logger = logging.getLogger(__name__)
_NAME = re.compile(r"step_(\d+)\.jsonl")


def step_files(directory: Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of the ``step_<N>.jsonl`` files in ``directory``, by step."""
    if not directory.is_dir():
        return []
    found = [(int(m.group(1)), f) for f in directory.iterdir()
             if (m := _NAME.fullmatch(f.name))]
    return sorted(found)


def set_aside_steps_after(directory: Path, keep_through: int) -> list[int]:
    """Move ``directory/step_<N>.jsonl`` with N > ``keep_through`` into
    ``directory/discarded/`` (renamed ``step_<N>.<time>.jsonl``); return their steps.
    Resume keeps what its checkpoint covers; a fresh run (``keep_through`` -1) keeps nothing,
    as ``metrics.jsonl`` is started anew."""
    stale = [(s, f) for s, f in step_files(directory) if s > keep_through]
    if stale:
        dest = directory / "discarded"
        dest.mkdir(exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        with disk_full_as_error(dest):
            for s, f in stale:
                f.rename(dest / f"step_{s}.{stamp}.jsonl")
        logger.warning("step files after the run's starting point moved aside",
                       extra={"steps": [s for s, _ in stale], "to": str(dest),
                              "kept_through_step": keep_through})
    return [s for s, _ in stale]


class RolloutLog:
    """Writes ``root/step_<N>.jsonl`` every ``every`` steps (0: never)."""

    def __init__(self, root: Path, *, every: int, max_bytes: int, keep_through: int) -> None:
        """``keep_through``: the resumed checkpoint's step (-1 for a fresh run); step files
        after it are moved to ``root/discarded/``."""
        self.root = root
        self.every = every
        self.max_bytes = max_bytes
        root.mkdir(parents=True, exist_ok=True)
        set_aside_steps_after(root, keep_through)

    def wants(self, step: int) -> bool:
        return self.every > 0 and step % self.every == 0

    def write(self, step: int, records: Sequence[dict[str, Any]]) -> Path:
        """Write the step's records (texts clipped to ``max_bytes``) as one file."""
        path = self.root / f"step_{step}.jsonl"
        write_text_atomic(path, jsonl_text(fit_to_bytes(list(records), self.max_bytes)))
        return path
