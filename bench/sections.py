"""Benchmark sections beyond the core throughput table: one module each, registered here.

A section is a name, a ``run(ctx) -> dict`` (figures, saved under ``perf.json[name]``) and a
``report(figures) -> str`` (Markdown appended to docs/PERFORMANCE.md). ``python -m bench``
runs the core passes and then every section; ``python -m bench --only long,ray`` runs just
those (and writes ``bench/results/<name>.json`` instead of the doc). To add one, write a
module with a ``SECTION`` and add it to :func:`registered`.
"""

from __future__ import annotations

import statistics
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
    service: Callable[..., Service]  # a fresh plain service: service(workers, **env)


@dataclass(frozen=True)
class Section:
    name: str
    run: Callable[[Context], dict[str, Any]]
    report: Callable[[dict[str, Any]], str]


def median_ratio(pairs: Sequence[tuple[float, float]]) -> float:
    """Median of a/b over bracketed measurements (this VM's speed drifts within minutes)."""
    return statistics.median(a / b for a, b in pairs)


def registered() -> list[Section]:
    """Every section, in the order ``python -m bench`` runs them (imported here, lazily: a
    section module imports this one)."""
    from bench import (
        long_bench,
        overhead_bench,
        per_sample,
        profile_bench,
        ray_bench,
        targets_bench,
    )

    return [targets_bench.SECTION, per_sample.SECTION, profile_bench.SECTION,
            long_bench.SECTION, ray_bench.SECTION, overhead_bench.SECTION]
