"""What every benchmark section shares: the section contract (:class:`Section`), what a section
is given (:class:`Context`), the plain service the passes start, and the warm-up rows. Imports nothing of ``bench`` (the registry, ``bench/sections.py``, imports the
sections, and each section imports this)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.helpers import Service

Row = dict[str, Any]


@dataclass(frozen=True)
class Context:
    """What a section gets: the corpus rows of this run, the warm-up rows every fresh service
    and interpreter sees first, whether this is a ``--quick`` run, and a logger."""

    rows: Sequence[Row]
    warm_rows: Sequence[Row]
    quick: bool
    log: Callable[[str], None]
    service: Callable[[int], Service]  # a fresh plain service: service(workers)


@dataclass(frozen=True)
class Section:
    """A section: a name, a ``run(ctx) -> dict`` (figures, saved under ``perf.json[name]``)
    and a ``report(figures) -> str`` (Markdown appended to docs/PERFORMANCE.md)."""

    name: str
    run: Callable[[Context], dict[str, Any]]
    report: Callable[[dict[str, Any]], str]


def plain_service(workers: int) -> Service:
    """A service to start with ``with``: verdict cache off (no pass may replay another's
    verdicts), large batches allowed."""
    return Service(REWARD_WORKERS=workers, REWARD_SPARES=1, REWARD_CACHE_ITEMS=0,
                   REWARD_MAX_ITEMS=16384, REWARD_LOG_LEVEL="warning")


def warm_rows(read_jsonl: Callable[[str], list[dict[str, Any]]]) -> list[Row]:
    """OlympiadBench's 675 reference solutions against their final answers (problems not in
    the corpus): what every fresh service and interpreter scores first."""
    return [{"response": r["solution"][0] if isinstance(r["solution"], list) else r["solution"],
             "gold": r["final_answer"][0].strip("$")}
            for r in read_jsonl("qwen25math_olympiadbench_test.jsonl")]


#: docs/PERFORMANCE.md: what follows this line is maintained by hand; ``make bench`` keeps it.
HAND_MARKER = "<!-- sections below are maintained by hand; make bench keeps them -->"
