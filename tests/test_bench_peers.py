"""``bench/peers``: the rows and the hostile mix, the figures' schema when a peer is missing,
and the whole bench end to end on a handful of rows where ``make peers`` built both peers'
venvs (skipped, saying so, where it did not: ``make test`` does not build them, ~2 GB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.base import Context, plain_service, warm_rows
from bench.peers import run as peers_run
from bench.peers.items import OUTCOMES, Answer, Pass, agreement, hostile_mix, peer_rows
from bench.peers.report import report
from bench.peers.venvs import peer_venv
from tests.helpers import read_jsonl

pytestmark = pytest.mark.needs_data


def _ctx(quick: bool = True) -> Context:
    return Context(rows=[], warm_rows=warm_rows(read_jsonl)[:20], quick=quick,
                   log=lambda m: None, service=plain_service)


def test_rows_half_in_file_order_half_shuffled_and_two_percent_hostile() -> None:
    corpus = read_jsonl("corpus.jsonl")
    rows = peer_rows(corpus, 200)
    assert [r["response"] for r in rows[:100]] == [r["response"] for r in corpus[:100]]
    tail = [r["response"] for r in rows[100:]]
    assert set(tail) <= {r["response"] for r in corpus[100:]} and len(set(tail)) == 100
    assert tail != [r["response"] for r in corpus[100:200]]  # drawn and shuffled
    hostile = read_jsonl("adversarial.jsonl")
    mix, at = hostile_mix(rows, hostile)
    assert len(at) == 4 and len(mix) == 200
    assert [mix[i]["hostile_id"] for i in at] == [h["id"] for h in hostile[:4]]
    assert all(mix[i] == rows[i] for i in range(200) if i not in at)
    assert peer_rows(corpus, 200) == rows and hostile_mix(rows, hostile) == (mix, at)  # seeded
    with pytest.raises(ValueError, match="n must be within"):
        peer_rows(corpus, 1)


def test_agreement_lists_each_difference_with_the_side_the_label_takes() -> None:
    rows = [{"response": "r", "gold": "1", "label": True}] * 3
    peer = Pass([Answer("verdict", correct=False), Answer("verdict", correct=True),
                 Answer("timeout")], 1.0)
    ours = Pass([Answer("verdict", correct=True), Answer("verdict", correct=True),
                 Answer("verdict", correct=True)], 1.0)
    got = agreement(rows, peer, ours)
    assert (got["compared"], got["agree"], got["differ"]) == (2, 1, 1)  # the timeout: not compared
    assert got["differences"][0]["row"] == 0 and got["differences"][0]["right"] == "ours"
    assert got["right"] == {"peer": 0, "ours": 1}
    assert peer.counts() == {"verdict": 2, "timeout": 1, "error": 0, "unanswered": 0}


def test_a_peer_that_is_not_installed_is_reported_with_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REWARD_PEERS_DIR", str(tmp_path))
    assert "make peers" in (peer_venv("nemo-gym").why or "")
    got = peers_run.run(_ctx(), n=10, cap_s=30)
    assert [p["ran"] for p in got["peers"]] == [False, False]
    for p in got["peers"]:
        assert str(tmp_path) in p["why"] and "make peers" in p["why"]
        assert {"name", "ran", "why", "items_s", "ours_items_s", "hostile", "ours_hostile"} <= set(p)
    assert report(got).count("not run:") == 2


@pytest.mark.skipif(bool(peer_venv("nemo-gym").why or peer_venv("verifiers").why),
                    reason="the peers' venvs are not built (`make peers`; not part of `make test`)")
def test_both_peers_and_ours_end_to_end_on_a_handful_of_rows() -> None:
    """Both released peers started and driven, ours on each contract, brackets and the hostile
    mix (one item of 12: ``adversarial.jsonl``'s first, a nested power math-verify takes >5 s
    on); ours answers every item of its mix pass."""
    got = peers_run.run(_ctx(), n=12, cap_s=90)
    assert got["hostile_items"] == 1
    for p in got["peers"]:
        assert p["ran"] and p["why"] is None, p
        assert p["items_s"] > 0 and len(p["ours_items_s_each"]) == 2
        assert all(x > 0 for x in p["x_peer_each"])
        for key in ("hostile", "ours_hostile"):
            assert set(p[key]) == set(OUTCOMES) and sum(p[key].values()) == 1
        assert p["met_hostile"], p["ours_hostile"]
        assert p["ours_hostile_clean_rows"]["verdict"] == 11
        assert p["agreement"]["compared"] >= 10  # both answered the clean rows with verdicts
    assert "ours ÷ peer" in report(got)
