"""``bench/targets/summary.py``: the targets (issue 28's, restated by issue 40) read from the
sections' figures, each with its bracket and verdict (no benchmark runs here: hand-made figures)."""

from __future__ import annotations

from bench.targets import summary


def test_each_target_is_read_with_its_bracket_and_verdict() -> None:
    res = {
        "targets": {"rows": 10, "batch": 512, "passes": {
            "math, file order": {"x_stock_pair_each": [2.9, 3.3], "x_verl_each": [6.5, 7.0]},
            # issue 40: shuffled on the median of fresh passes, the bracket their min-max
            "math, shuffled": {"x_stock_pair_each": [5.0, 5.5],
                               "x_stock_pair_passes": [5.0, 6.5, 6.1, 5.9, 6.2]},
            "math_verify, shuffled": {"x_stock_pair_each": [5.0, 5.5]}}},  # one pass: as before
        "per_sample": {"rows": 10, "callers": 256, "items_s": {"raw_lean": 50.0},
                       "batched_items_s_each": [100.0, 125.0], "server_ms_per_request": 0.3,
                       "floor_server_ms_each": [0.2, 0.25],
                       "floor": {"raw_lean": {"ceiling_x_batched": 0.37}},
                       "relay_server_ms_each": [0.22, 0.3], "relay_ceiling_x_batched": 0.36},
        "overhead": {"trivial": {"n": 300, "round_trip_ms": {"p50": 0.6},
                                 "worker_ms": {"p50": 0.05}},
                     "relay_round_trip_ms": [{"p50": 0.4}, {"p50": 0.5}],
                     "round_trip_x_bare": [3.0, 3.2], "floor_x_bare": [1.8, 1.95]},
        "ray": {"rows": 10, "handle_client_defaults": {
                    "cpu_ratio_bracket": [0.9, 1.1], "passes_cpu_ratio": [0.9, 0.95, 1.0, 0.88, 0.92]},
                "handle1_client_defaults": {"cpu_ratio_bracket": [0.8, 0.84]}},
        "peers": {"rows": 10, "peers": [
            {"name": "P", "contract": "POST /verify", "ran": True, "x_peer_each": [4.0, 6.0]},
            {"name": "Q", "contract": "a call", "ran": False, "why": "not installed"}]},
    }
    got = {t.name: (round(t.ratio, 3), t.verdict) for t in summary.targets(res)}
    straddles = "yes (median; the bracket straddles it)"
    assert got == {
        "file order, `math`: service ÷ stock pair": (3.1, straddles),
        "shuffled, `math`: service ÷ stock pair, median of 5 fresh passes": (6.1, straddles),
        "shuffled, `math_verify`: service ÷ stock pair": (5.25, "**no**"),
        "service ÷ verl PR #5839's pattern (`math`, file order)": (6.75, "**yes** (whole bracket)"),
        # 50/100, 50/125 of the relay's ceiling 0.36
        "per-sample ÷ batched, as a share of this machine's ceiling": (1.25, "**yes** (whole bracket)"),
        # 0.3 ms over the relay's 0.22 and 0.3 ms
        "server CPU per one-item request ÷ the relay app's": (1.182, "**yes** (whole bracket)"),
        # 0.6 ms over 0.4 + 0.05 and 0.5 + 0.05 ms
        "single-item round trip ÷ the relay + scoring floor": (1.212, straddles),
        "Ray handle client (2 replicas x 1 worker): CPU per item, plain service ÷ handle, "
        "median of 5 fresh passes": (0.92, "**yes** (whole bracket)"),
        "Ray handle client (1 replica x 2 workers): CPU per item, plain service ÷ handle": (
            0.82, "**no**"),
        "ours ÷ P (POST /verify), items/s": (5.0, straddles),  # Q did not run: no row
    }
    table = summary.report(res)
    assert table.count("\n| ") == 11 and "≤ 1.5x" in table and "≤ 1.3x" in table
    assert "≥ 0.85x" in table and "≥ 5x" in table
    assert "from the relay app's CPU: 0.36x (from the zero-cost app's: 0.37x)" in table
    assert "the relay ÷ the zero-cost app 0.200, 0.250 ms: 1.10/1.20x" in table
    assert "the `relay` app's round trip 0.400/0.500 ms (before, after) plus the worker's " \
        "scoring 0.050 ms; ÷ bare uvicorn: 3.00/3.20x" in table
    assert summary.report({}) == ""  # nothing measured, nothing claimed


def test_the_verl_target_is_held_on_the_pool_fed_as_the_service_is() -> None:
    """Issue 40: with the pool fed one slice after another measured, the target reads that
    (like for like) and names the every-row-at-once figure beside it, not the other way."""
    res = {"targets": {"rows": 10, "batch": 512, "passes": {"math, file order": {
        "x_verl_each": [6.5, 7.0], "x_verl_batched_each": [4.5, 5.0]}}}}
    (t,) = summary.targets(res)
    assert (t.ratio, t.verdict) == (4.75, "**no**")
    assert "one 512-item slice after another" in t.how and "6.50/7.00x" in t.how


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
