"""Prometheus metrics, defined once (units in the names). One registry per app instance.

The counters and histograms the scoring path touches per request and per item are counted
in plain Python (:class:`Counter`, :class:`Histogram`: a float per label set, a list of
bucket counts) and handed to prometheus_client only when ``/metrics`` is scraped. The
library's own ``Counter.inc`` takes a lock and checks the metric on every call (13 calls and
16 lock operations per single-item request, ~10% of the server's Python calls); here the
only writer is the event loop, and a scrape reads a copy. The exposition is the library's:
the same names, types, labels and buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

__all__ = ["Counter", "Histogram", "Metrics"]

_LATENCY = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class _Count:
    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("counters only go up")
        self.value += amount


class _Buckets:
    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # the first bound >= value (le)
        self.sum += value


_C = TypeVar("_C", _Count, _Buckets)


class _Family(Generic[_C]):
    """A labelled family whose children are created on first use and kept (as
    prometheus_client keeps them); ``labels`` takes the label values by name. A subclass
    makes a child (``_new``) and renders the family (``collect``)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], _C] = {}
        if not self.labelnames:
            self._default: _C = self._child(())
        registry.register(self)  # type: ignore[arg-type]  # a Collector: collect, describe

    def _new(self) -> _C:
        raise NotImplementedError

    def _child(self, key: tuple[str, ...]) -> _C:
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._new()
        return child

    def labels(self, **labels: str) -> _C:
        if len(labels) == len(self.labelnames):
            try:
                return self._child(tuple(str(labels[n]) for n in self.labelnames))
            except KeyError:
                pass
        raise ValueError(f"{self.name}: labels {sorted(labels)}, expected {self.labelnames}")

    def _items(self) -> list[tuple[tuple[str, ...], _C]]:
        return list(self._children.items())  # one C call: a consistent copy

    def _family(self) -> Metric:
        raise NotImplementedError

    def describe(self) -> list[Metric]:
        """The family without samples: lets the registry refuse a duplicate name."""
        return [self._family()]


class Counter(_Family[_Count]):
    """prometheus_client's ``Counter`` (``labels(...).inc(n)``, ``inc(n)``), lock-free."""

    def _new(self) -> _Count:
        return _Count()

    def inc(self, amount: float = 1.0) -> None:
        self._default.inc(amount)

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for key, child in self._items():
            family.add_metric(list(key), child.value)
        yield family


class Histogram(_Family[_Buckets]):
    """prometheus_client's ``Histogram`` (``labels(...).observe(v)``, ``observe(v)``),
    lock-free."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 buckets: Sequence[float], registry: CollectorRegistry) -> None:
        self.bounds = tuple(sorted(float(b) for b in buckets if b != float("inf")))
        super().__init__(name, documentation, labelnames, registry=registry)

    def _new(self) -> _Buckets:
        return _Buckets(self.bounds)

    def observe(self, value: float) -> None:
        self._default.observe(value)

    def _family(self) -> HistogramMetricFamily:
        return HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for key, child in self._items():
            cumulative, buckets = 0, []
            for bound, n in zip((*self.bounds, float("inf")), list(child.counts), strict=True):
                cumulative += n
                buckets.append((floatToGoString(bound), cumulative))
            family.add_metric(list(key), buckets, sum_value=child.sum)
        yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            "reward_http_requests_total", "HTTP requests by route and status code",
            ["route", "code"], registry=r,
        )
        self.request_seconds = Histogram(
            "reward_request_duration_seconds", "Time to answer a scoring request",
            ["route"], buckets=_LATENCY, registry=r,
        )
        self.batch_items = Histogram(
            "reward_batch_items", "Items per scoring request",
            buckets=(1, 8, 32, 128, 512, 2048, 8192, 32768), registry=r,
        )
        self.message_items = Histogram(
            "reward_worker_message_items",
            "Items per message to a worker (small requests arriving together share one)",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512), registry=r,
        )
        self.items = Counter(
            "reward_items_total", "Scored items by scorer and status", ["scorer", "status"],
            registry=r,
        )
        self.item_seconds = Histogram(
            "reward_item_duration_seconds", "Worker time per scored item", ["scorer"],
            buckets=_LATENCY, registry=r,
        )
        self.rule_overrides = Counter(
            "reward_rule_overrides_total",
            "Verdicts a scoring rule decided against the plain reading, by scorer and rule "
            "(hedged, exact, percent, rescued, units, dropped, scientific: "
            "reward_service.scorers.rule_labels)",
            ["scorer", "rule"], registry=r,
        )
        self.cache_hits = Counter(
            "reward_cache_hits_total", "Items answered from the verdict cache", registry=r
        )
        self.cache_misses = Counter(
            "reward_cache_misses_total", "Items not in the verdict cache", registry=r
        )
        self.dedup_items = Counter(
            "reward_dedup_items_total", "Items answered by an identical item of the same request",
            registry=r,
        )
        self.worker_restarts = Counter(
            "reward_worker_restarts_total",
            "Workers replaced, by reason (timeout, crash, recycle_items, recycle_rss, ...)",
            ["reason"], registry=r,
        )
        self.compat_rejected = Counter(
            "reward_compat_rejected_total",
            "Framework requests refused as a whole (a misconfiguration), by route and reason "
            "(labels_missing, labels_empty, label_missing, length_mismatch)",
            ["route", "reason"], registry=r,
        )
        self.compat_located = Counter(
            "reward_compat_located_total",
            "OpenRLHF responses not located by their prompt, by how (prompt_suffix, "
            "assistant_marker, whole_query)", ["how"], registry=r,
        )
        self.workers = Gauge("reward_workers", "Worker processes by state", ["state"], registry=r)
        self.outstanding_items = Gauge(
            "reward_outstanding_items", "Items submitted and not yet answered", registry=r
        )
        self.held_bytes = Gauge(  # read from the MemoryBudget at each scrape (app.py)
            "reward_held_bytes", "Bytes held for clients against REWARD_MAX_INFLIGHT_BODY_BYTES: "
            "request bodies being read or handled (kind=body), reply bytes slow readers have "
            "not taken (kind=unsent_reply)", ["kind"], registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
