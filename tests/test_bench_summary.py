"""``bench/targets/summary.py``: issue 28's targets read from the sections' figures, each with its
bracket and verdict (no benchmark runs here: hand-made figures)."""

from __future__ import annotations

from bench.targets import summary


def test_each_target_is_read_with_its_bracket_and_verdict() -> None:
    res = {
        "targets": {"rows": 10, "batch": 512, "passes": {
            "math, file order": {"x_stock_pair_each": [2.9, 3.3], "x_verl_each": [6.5, 7.0]},
            "math, shuffled": {"x_stock_pair_each": [5.0, 5.5]}}},
        "per_sample": {"rows": 10, "callers": 256, "items_s": {"raw_lean": 50.0},
                       "batched_items_s_each": [100.0, 125.0], "server_ms_per_request": 0.3,
                       "floor_server_ms_each": [0.2, 0.25],
                       "floor": {"raw_lean": {"ceiling_x_batched": 0.37}},
                       "relay_server_ms_each": [0.22, 0.3], "relay_ceiling_x_batched": 0.36},
        "overhead": {"trivial": {"n": 300}, "round_trip_x_bare": [1.9, 2.1],
                     "floor_x_bare": [1.8, 1.95]},
        "ray": {"rows": 10, "handle_client_defaults": {"cpu_ratio_bracket": [0.9, 1.1]},
                "handle1_client_defaults": {"cpu_ratio_bracket": [0.8, 0.84]}},
    }
    got = {t.name: (round(t.ratio, 3), t.verdict) for t in summary.targets(res)}
    assert got == {
        "file order, `math`: service ÷ stock pair": (3.1, "yes (median; the bracket straddles it)"),
        "shuffled, `math`: service ÷ stock pair": (5.25, "**no**"),
        "service ÷ verl PR #5839's pattern (`math`, file order)": (6.75, "**yes** (whole bracket)"),
        "per-sample ÷ batched": (0.45, "yes (median; the bracket straddles it)"),
        "server CPU per one-item request ÷ zero-cost ASGI app's": (1.35, "**yes** (whole bracket)"),
        "single-item round trip ÷ bare uvicorn's": (2.0, "yes (median; the bracket straddles it)"),
        "Ray handle client: CPU per item, plain service ÷ handle": (1.0, "**yes** (whole bracket)"),
        "Ray handle client: CPU per item, plain service ÷ handle (1 replica x 2 workers)": (
            0.82, "**no**"),
    }
    table = summary.report(res)
    assert table.count("\n| ") == 9 and "≤ 1.5x" in table and "≥ 0.85x" in table
    assert "ceiling for any server, from the zero-cost app's CPU: 0.37x" in table
    # the relay floors, beside the targets they bound (each relay pass over its zero-cost pass)
    assert ", from the relay app's: 0.36x" in table
    assert "(`relay`, one frame each, no packing) 0.220, 0.300 ms, 1.10/1.20x" in table
    assert "plus the worker's scoring) 1.80/1.95x" in table
    assert summary.report({}) == ""  # nothing measured, nothing claimed


def test_the_relay_floor_app_answers_after_a_round_trip_to_its_echo_process() -> None:
    """``bench/targets/floor_app.py``'s ``relay`` under uvicorn, as the benches start it: each request
    is answered after its frame went to the echo child and came back; the child lives as the
    server's child and is gone when the server stops."""
    import http.client

    from bench.targets.floor_app import REPLY
    from bench.targets.per_sample import _floor_server
    from tests.helpers import alive, children_of, wait_until

    with _floor_server("relay") as (url, pid):
        echo = children_of(pid)
        assert len(echo) == 1  # started by the lifespan, before any request
        host, port = url.split("//", 1)[1].rsplit(":", 1)
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        for body in (b"{}", b"x" * 100_000):  # a frame larger than one pipe read
            conn.request("POST", "/get_reward", body=body)
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (200, REPLY)
        conn.close()
    assert wait_until(lambda: not alive(echo[0]), 10.0)
