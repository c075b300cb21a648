"""The peers' side-by-side table (Markdown) from the figures ``run`` returns."""

from __future__ import annotations

from typing import Any

HEADING = "## Against the peers a user would run instead (issue 40)"


def _ms(m: dict[str, float | None]) -> str:
    p50, p99 = m.get("p50_ms"), m.get("p99_ms")
    if p50 is None or p99 is None:
        return ""
    return " / ".join(f"{x:.1f}" if x < 10 else f"{x:.0f}" for x in (p50, p99))


def _counts(c: dict[str, int] | None) -> str:
    if c is None:
        return ""
    return ", ".join(f"{k} {v}" for k, v in c.items() if v) or "none"


def report(r: dict[str, Any]) -> str:
    lines = [
        HEADING, "",
        f"{r['rows']} corpus rows (the first half in file order, the second drawn from the rest "
        "and shuffled), each peer on its own contract and ours on the same one; each peer's "
        "pass between two passes of ours (fresh processes each: a fresh service, fresh peer "
        "processes), so ours ÷ peer has a bracket. Hostile mix: the same rows with "
        f"{r['hostile_items']} (2%) replaced by `adversarial.jsonl` items, one pass each, cut "
        f"at {r['cap_s']:.0f} s of wall time; outcome counts over the hostile items "
        "(verdict: any answer of the scorer; timeout: the scorer's own; error; unanswered: no "
        "answer by the cap). Target: ours ≥ 5x each peer's items/s, and nothing that hangs or "
        "kills a peer does either to ours. `make bench-peers` (`python -m bench.peers`).", "",
        "| peer, contract | peer items/s | ours items/s (before, after) | ours ÷ peer | "
        "p50 / p99 ms per item, peer | ours | hostile items: peer | ours | clean rows agree |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|"]
    notes = []
    for p in r["peers"]:
        if not p["ran"]:
            lines.append(f"| {p['name']}, {p['contract']} | not run: {p['why']} |||||||")
            continue
        ag = p["agreement"]
        met = "✓" if p["met_x"] else "✗"  # the median; the summary says if the whole bracket
        lines.append(
            f"| {p['name']}, {p['contract']} | {p['items_s']:.0f} | "
            + " / ".join(f"{x:.0f}" for x in p["ours_items_s_each"])
            + f" | **{p['x_peer']:.1f}x** [{min(p['x_peer_each']):.1f}-"
            f"{max(p['x_peer_each']):.1f}] {met} | {_ms(p['peer_ms'])} | {_ms(p['ours_ms'])} | "
            f"{_counts(p['hostile'])} | {_counts(p['ours_hostile'])} | "
            f"{ag['agree']}/{ag['compared']} |")
        right = ag["right"]
        notes.append(
            f"* **{p['name']}**: items/s = {p.get('rate', 'items ÷ wall time of the pass')}; "
            f"installed {p['installed']}; started {p['started']}; "
            f"configured {p['configured']}; driven by {p['driver']}. Hostile pass: peer "
            f"{p['hostile_wall_s']:.0f} s, ours {p['ours_hostile_wall_s']:.0f} s; the clean rows "
            f"of that pass: peer {_counts(p['hostile_clean_rows'])}, ours "
            f"{_counts(p['ours_hostile_clean_rows'])}"
            + (f"; {p['hostile_silent_zero']} hostile items answered reward 0.0 with nothing "
               "extracted (a killed child, a parse failure and a wrong answer look the same)"
               if p.get("hostile_silent_zero") else "")
            + f". Hostile target (ours hangs on and loses nothing): "
            f"{'met' if p['met_hostile'] else 'NOT met'}. Verdicts differ on {ag['differ']} "
            f"clean rows (the first 40 listed in peers.json); the corpus label sides with ours on "
            f"{right['ours']} of them and with the peer on {right['peer']}.")
    boxed = ["", f"On the rows both peers score ({r.get('boxed_rows', '?')} corpus rows with a "
             "`\\boxed{}` in the response; without one each peer answers 0.0 at once, unparsed, "
             "so most of the rows above cost them nothing), bracketed the same way:", "",
             "| peer | peer items/s | ours items/s (before, after) | ours ÷ peer | p50 / p99 ms, "
             "peer | ours | verdicts agree |", "|---|---:|---:|---:|---:|---:|---:|"]
    for p in r["peers"]:
        if p["ran"] and "x_peer_boxed_each" in p:
            ag, xs = p["agreement_boxed"], p["x_peer_boxed_each"]
            boxed.append(f"| {p['name']} | {p['items_s_boxed']:.0f} | "
                         + " / ".join(f"{x:.0f}" for x in p["ours_items_s_boxed_each"])
                         + f" | **{p['x_peer_boxed']:.1f}x** [{min(xs):.1f}-{max(xs):.1f}] | "
                         f"{_ms(p['peer_boxed_ms'])} | {_ms(p['ours_boxed_ms'])} | "
                         f"{ag['agree']}/{ag['compared']} |")
    if len(boxed) > 5:
        lines += boxed
    return "\n".join([*lines, "", *notes]) + "\n"
