"""The registry of benchmark sections beyond the core throughput table, in the order
``python -m bench`` runs them.

A section (``bench/base.Section``) is a name, a ``run(ctx) -> dict`` (figures, saved under
``perf.json[name]``) and a ``report(figures) -> str`` (Markdown appended to
docs/PERFORMANCE.md). ``python -m bench`` runs the core passes and then every section;
``python -m bench --only long,ray`` runs just those (and writes ``bench/results/<name>.json``
instead of the doc). To add one, write a module with a ``SECTION`` and list it here. Sections
import ``bench.base``, never this module, so the registry has no import cycle.

Rooms: ``bench/targets`` (the ratios the issues target, their floors and the summary table),
``bench/peers`` (the servers a user would run instead), ``bench/long``, ``bench/ray_serve``;
``bench/correctness`` writes docs/CORRECTNESS.md on its own.
"""

from __future__ import annotations

from bench import profile_bench
from bench.base import Section
from bench.long import section as long
from bench.peers import SECTION as PEERS
from bench.ray_serve import section as ray
from bench.targets import overhead, per_sample, ratios


def registered() -> list[Section]:
    """Every section, in the order ``python -m bench`` runs them."""
    return [ratios.SECTION, per_sample.SECTION, profile_bench.SECTION, long.SECTION,
            ray.SECTION, overhead.SECTION, PEERS]
