"""The peers section: each peer's pass between two passes of ours on its contract, then the
hostile mix for both (see ``bench/peers/__init__.py``)."""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from bench.base import Context
from bench.peers import nemo_gym_peer, ours, verifiers_peer, verify_driver
from bench.peers.items import Pass, Row, agreement, boxed_rows, hostile_mix, peer_rows
from bench.peers.venvs import peer_venv
from tests.helpers import read_jsonl

ROWS, QUICK_ROWS = 2000, 200
CAP_S, QUICK_CAP_S = 420.0, 120.0  # wall-clock cap of one pass
TARGET_X = 5.0


def _lat(p: Pass) -> dict[str, float | None]:
    return p.latency_ms()


def _figures(name: str, contract: str, rows: Sequence[Row], at: Sequence[int],
             boxed: Sequence[Row], passes: dict[str, Pass], setup: dict[str, str]) -> dict[str, Any]:
    peer, before, after = passes["peer"], passes["ours_before"], passes["ours_after"]
    b_peer, b_before, b_after = (passes["peer_boxed"], passes["ours_boxed_before"],
                                 passes["ours_boxed_after"])
    boxed_each = [b_before.items_s / b_peer.items_s, b_after.items_s / b_peer.items_s]
    mix, ours_mix = passes["peer_hostile"], passes["ours_hostile"]
    clean_at = sorted(set(range(len(rows))) - set(at))
    each = [before.items_s / peer.items_s, after.items_s / peer.items_s]
    ours_hostile = ours_mix.counts(at)
    ours_clean_in_mix = ours_mix.counts(clean_at)
    return {
        "name": name, "ran": True, "why": None, "contract": contract, **setup,
        "items_s": peer.items_s,
        "ours_items_s": statistics.mean([before.items_s, after.items_s]),
        "ours_items_s_each": [before.items_s, after.items_s],
        "x_peer": statistics.median(each), "x_peer_each": each,
        "peer_ms": _lat(peer), "ours_ms": _lat(before), "ours_after_ms": _lat(after),
        "hostile": mix.counts(at), "ours_hostile": ours_hostile,
        "hostile_clean_rows": mix.counts(clean_at), "ours_hostile_clean_rows": ours_clean_in_mix,
        "hostile_wall_s": mix.wall_s, "ours_hostile_wall_s": ours_mix.wall_s,
        "hostile_silent_zero": sum(mix.answers[i].detail == "silent_zero" for i in at),
        "hostile_items": len(at), "notes": {k: p.notes for k, p in passes.items()},
        "agreement": agreement(rows, peer, before),
        "target_x": TARGET_X, "met_x": statistics.median(each) >= TARGET_X,
        "met_x_whole_bracket": min(each) >= TARGET_X,
        # the rows both score (a \\boxed{} in the response), bracketed the same way
        "boxed_rows": len(boxed), "items_s_boxed": b_peer.items_s,
        "ours_items_s_boxed_each": [b_before.items_s, b_after.items_s],
        "x_peer_boxed": statistics.median(boxed_each), "x_peer_boxed_each": boxed_each,
        "peer_boxed_ms": _lat(b_peer), "ours_boxed_ms": _lat(b_before),
        "agreement_boxed": agreement(boxed, b_peer, b_before),
        # nothing that hangs or kills a peer may do either to ours: every item of our mix
        # pass answered (no item left without an answer, no clean row failed by a hostile one)
        "met_hostile": ours_hostile["unanswered"] == 0
        and ours_clean_in_mix["verdict"] == len(clean_at),
    }


def _bracketed(log: Callable[[str], None], name: str, ours_pass: Callable[[Sequence[Row]], Pass],
               peer_pass: Callable[[Sequence[Row]], Pass], rows: Sequence[Row],
               mix: Sequence[Row], boxed: Sequence[Row]) -> dict[str, Pass]:
    out: dict[str, Pass] = {}
    for key, fn, subset in (("ours_before", ours_pass, rows), ("peer", peer_pass, rows),
                            ("ours_after", ours_pass, rows), ("peer_hostile", peer_pass, mix),
                            ("ours_hostile", ours_pass, mix),
                            ("ours_boxed_before", ours_pass, boxed), ("peer_boxed", peer_pass, boxed),
                            ("ours_boxed_after", ours_pass, boxed)):
        log(f"peers: {name}, {key} ({len(subset)} rows) ...")
        out[key] = fn(subset)
        log(f"peers: {name}, {key}: {out[key].items_s:.0f} items/s, {out[key].counts()}")
    return out


def _not_run(name: str, contract: str, why: str) -> dict[str, Any]:
    return {"name": name, "ran": False, "why": why, "contract": contract, "items_s": None,
            "ours_items_s": None, "hostile": None, "ours_hostile": None}


NEMO = "NeMo-Gym 0.7.0 math_with_judge"
NEMO_CONTRACT = "POST /verify, one request per item, all at once"
VF = "verifiers 0.4.0 verify_boxed_math_answer"
VF_CONTRACT = "one async scoring call per rollout"


def run_nemo_gym(ctx: Context, rows: Sequence[Row], mix: Sequence[Row], at: Sequence[int],
                 boxed: Sequence[Row], cap_s: float) -> dict[str, Any]:
    venv = peer_venv("nemo-gym")
    if venv.why:
        return _not_run(NEMO, NEMO_CONTRACT, venv.why)

    def peer_pass(subset: Sequence[Row]) -> Pass:
        with nemo_gym_peer.NemoGymServer(venv) as server:
            verify_driver.drive(server.url, ctx.warm_rows[:64], nemo_gym_peer.classify, cap_s)
            return verify_driver.drive(server.url, subset, nemo_gym_peer.classify, cap_s)

    passes = _bracketed(ctx.log, "NeMo-Gym", lambda s: ours.verify_pass(s, ctx.warm_rows, cap_s),
                        peer_pass, rows, mix, boxed)
    setup = {"installed": "nemo-gym==0.7.0 (pip --ignore-requires-python, pyenv Python 3.13.0) "
                          "and math-verify==0.8.0 (its server's requirements.txt) in their own venv",
             "started": "resources_servers/math_with_judge/app.py as ng_run starts a child: "
                        "NEMO_GYM_CONFIG_DICT from nemo_gym's own config parser over "
                        "configs/math_with_judge.yaml, NEMO_GYM_CONFIG_PATH=math_with_judge, "
                        "127.0.0.1; a fresh server per pass, warmed with 64 rows",
             "configured": "as shipped: should_use_judge false, library_verifier_max_concurrency "
                           "32, library_verifier_timeout_seconds 10",
             "driver": "aiohttp, keep-alive, limit_per_host 1024 (NeMo-Gym's default), every "
                       "item dispatched at once (num_samples_in_parallel: None, its default); "
                       "ours: the same driver and bodies on our POST /verify"}
    return _figures(NEMO, NEMO_CONTRACT, rows, at, boxed, passes, setup)


def run_verifiers(ctx: Context, rows: Sequence[Row], mix: Sequence[Row], at: Sequence[int],
                  boxed: Sequence[Row], cap_s: float) -> dict[str, Any]:
    venv = peer_venv("verifiers")
    if venv.why:
        return _not_run(VF, VF_CONTRACT, venv.why)
    procs = os.cpu_count() or 1
    passes = _bracketed(
        ctx.log, "verifiers", lambda s: ours.client_pass(s, ctx.warm_rows, cap_s),
        lambda s: verifiers_peer.race(venv, s, ctx.warm_rows, procs, cap_s), rows, mix, boxed)
    setup = {"installed": "verifiers==0.4.0 in its own venv (pyenv Python 3.11.7)",
             "started": f"{procs} fresh processes (one per core), each warmed with the 675 "
                        "warm-up rows, then started together on its share of the rows",
             "rate": f"the sum of the {procs} processes' own rates (each: its items ÷ its own "
                     "time), ours: items ÷ wall time of the pass",
             "configured": "verify_boxed_math_answer(response, answer), its defaults "
                           "(timeout_seconds=5), called in each process's main thread",
             "driver": "ours: AsyncRewardClient defaults, one score([item]) per row, all "
                       "awaited together (coalesced into shared requests)"}
    return _figures(VF, VF_CONTRACT, rows, at, boxed, passes, setup)


def run(ctx: Context, n: int | None = None, cap_s: float | None = None) -> dict[str, Any]:
    """Both peers on ``n`` rows (default 2,000, ``--quick`` 200), each pass cut at ``cap_s``."""
    n = n or (QUICK_ROWS if ctx.quick else ROWS)
    cap_s = cap_s or (QUICK_CAP_S if ctx.quick else CAP_S)
    corpus = read_jsonl("corpus.jsonl")
    rows = peer_rows(corpus, n)
    mix, at = hostile_mix(rows, read_jsonl("adversarial.jsonl"))
    boxed = boxed_rows(corpus, max(2, n // 2) if n < ROWS else None)
    return {"rows": n, "cap_s": cap_s, "hostile_items": len(at), "boxed_rows": len(boxed),
            "peers": [run_nemo_gym(ctx, rows, mix, at, boxed, cap_s),
                      run_verifiers(ctx, rows, mix, at, boxed, cap_s)]}
