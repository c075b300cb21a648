"""``bench/summary.py``: issue 28's targets read from the sections' figures, each with its
bracket and verdict (no benchmark runs here: hand-made figures)."""

from __future__ import annotations

from bench import summary


def test_each_target_is_read_with_its_bracket_and_verdict() -> None:
    res = {
        "targets": {"rows": 10, "batch": 512, "passes": {
            "math, file order": {"x_stock_pair_each": [2.9, 3.3], "x_verl_each": [6.5, 7.0]},
            "math, shuffled": {"x_stock_pair_each": [5.0, 5.5]}}},
        "per_sample": {"rows": 10, "callers": 256, "items_s": {"raw_lean": 50.0},
                       "batched_items_s_each": [100.0, 125.0], "server_ms_per_request": 0.3,
                       "floor_server_ms_each": [0.2, 0.25],
                       "floor": {"raw_lean": {"ceiling_x_batched": 0.37}}},
        "overhead": {"trivial": {"n": 300}, "round_trip_x_bare": [1.9, 2.1]},
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
    assert summary.report({}) == ""  # nothing measured, nothing claimed
