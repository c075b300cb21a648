"""The registry of benchmark sections beyond the core throughput table, in the order
``python -m bench`` runs them.

A section (``bench/base.Section``) is a name, a ``run(ctx) -> dict`` (figures, saved under
``perf.json[name]``) and a ``report(figures) -> str`` (Markdown appended to
docs/PERFORMANCE.md). ``python -m bench`` runs the core passes and then every section;
``python -m bench --only long,ray`` runs just those (and writes ``bench/results/<name>.json``
instead of the doc). To add one, write a module with a ``SECTION`` and list it here. Sections
import ``bench.base``, never this module, so the registry has no import cycle.
"""

from __future__ import annotations

from bench import long_bench, overhead_bench, per_sample, profile_bench, ray_bench, targets_bench
from bench.base import Section
from bench.peers import SECTION as PEERS


def registered() -> list[Section]:
    """Every section, in the order ``python -m bench`` runs them."""
    return [targets_bench.SECTION, per_sample.SECTION, profile_bench.SECTION,
            long_bench.SECTION, ray_bench.SECTION, overhead_bench.SECTION, PEERS]
