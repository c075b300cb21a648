"""Prometheus metrics, defined once (units in the names). One registry per app instance."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]

_LATENCY = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


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
            "reward_service.scorers.rules)",
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

    def render(self) -> bytes:
        return generate_latest(self.registry)
