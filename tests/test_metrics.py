"""``reward_service.server.metrics``: the lock-free counters and histograms expose exactly what
prometheus_client's own ``Counter`` and ``Histogram`` expose for the same operations (less
the ``_created`` samples), and the app's ``Metrics`` still renders every family."""

from __future__ import annotations

import random

import prometheus_client as pc
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from reward_service.server import metrics as m


def _families(counter: type, histogram: type) -> tuple[CollectorRegistry, tuple]:
    r = CollectorRegistry(auto_describe=True)
    return r, (
        counter("reward_http_requests_total", "requests", ["route", "code"], registry=r),
        histogram("reward_request_duration_seconds", "latency", ["route"],
                  buckets=m._LATENCY, registry=r),
        histogram("reward_batch_items", "items", buckets=(1, 8, 32), registry=r),
        counter("reward_cache_hits_total", "hits", registry=r),
    )


def _exposition(registry: CollectorRegistry) -> list[str]:
    return [line for line in generate_latest(registry).decode().splitlines()
            if "_created" not in line]


def test_the_exposition_is_prometheus_clients() -> None:
    ref, ours = _families(pc.Counter, pc.Histogram), _families(m.Counter, m.Histogram)
    rng = random.Random(0)
    # values on and around every bucket bound, below the first and above the last
    values = [*m._LATENCY, *(b * 1.0001 for b in m._LATENCY), 0.0, 1e-9, 1e6]
    for _ in range(2000):
        v = rng.choice([*values, rng.random() * 70])
        route, n = rng.choice(["score", "get_reward"]), rng.choice([1, 8, 9, 32, 33, 0.5])
        code = rng.choice(["200", "422"])
        for _, (requests, seconds, items, hits) in (ref, ours):
            requests.labels(route=route, code=code).inc()
            seconds.labels(route=route).observe(v)
            items.observe(n)
            hits.inc(3)
    assert _exposition(ours[0]) == _exposition(ref[0])


def test_the_counts_read_back_from_the_text() -> None:
    ref, ours = _families(pc.Counter, pc.Histogram), _families(m.Counter, m.Histogram)
    rng = random.Random(1)
    ops = [(rng.choice(["a", "b"]), rng.random() * 3, rng.choice([1, 9, 40])) for _ in range(500)]
    for _, (requests, seconds, items, hits) in (ref, ours):
        for route, v, n in ops:
            requests.labels(route=route, code="200").inc(2)
            seconds.labels(route=route).observe(v)
            items.observe(n)
            hits.inc()
    assert _exposition(ours[0]) == _exposition(ref[0])
    text = "\n".join(_exposition(ours[0]))
    parsed = {f.name: f for f in text_string_to_metric_families(text)}
    hist = parsed["reward_request_duration_seconds"]
    count = [s for s in hist.samples if s.name.endswith("_count") and s.labels["route"] == "a"]
    assert count[0].value == sum(1 for route, _, _ in ops if route == "a")


def test_bad_use_is_refused_as_the_library_refuses_it() -> None:
    r = CollectorRegistry()
    c = m.Counter("x_total", "x", ["a"], registry=r)
    with pytest.raises(ValueError):
        c.labels(a="1").inc(-1)
    with pytest.raises(ValueError):
        c.labels(b="1")  # the wrong name
    with pytest.raises(ValueError):
        c.labels(a="1", b="2")  # one too many
    with pytest.raises(ValueError):
        m.Counter("x_total", "again", registry=r)  # a duplicate name in one registry


def test_the_apps_metrics_render_every_family() -> None:
    metrics = m.Metrics()
    metrics.items.labels(scorer="math", status="correct").inc(5)
    metrics.item_seconds.labels(scorer="math").observe(0.002)
    metrics.cache_hits.inc()
    text = metrics.render().decode()
    assert 'reward_items_total{scorer="math",status="correct"} 5.0' in text
    assert 'reward_item_duration_seconds_bucket{le="0.005",scorer="math"} 1.0' in text
    assert "reward_cache_hits_total 1.0" in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"reward_http_requests", "reward_request_duration_seconds", "reward_workers",
            "reward_outstanding_items", "reward_worker_message_items"} <= names
