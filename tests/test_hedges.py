"""One committed answer (issue 15): the generated hedge corpus, and the rule's visibility.

``tests/golden/hedge_corpus.py`` writes hedged responses and near-miss non-hedges around the
real answers of ``../shared/data/corpus.jsonl``. The corpus runs in-process (thousands of
items: scorer calls, not HTTP); one hedge of each scorer also goes through the real service,
where the override is counted in ``reward_rule_overrides_total`` and in ``/get_reward``'s
``extra_logs``. Figures per fold are in ``docs/CORRECTNESS.md`` (``python -m bench.correctness``).
"""

from __future__ import annotations

import re
from collections import Counter

import httpx
import pytest

from reward_service.scorers import RULE_KEYS, rule_of
from reward_service.scorers.impl import build_scorers
from reward_service.scorers.patches import install_patches
from reward_service.scorers.rules.strict_commit import MATH_VALUE_WORDS
from tests.golden.hedge_corpus import generate

pytestmark = pytest.mark.needs_data

install_patches()
S = build_scorers()


def _run(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """(kind, fold) → rows the scorer got wrong: a hedge paid, or a near miss lost (refused by
    the scorer where, for ``math``, the library as released pays it: a near miss the library
    itself misreads is its extraction's doing, listed under ("library", fold))."""
    wrong: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        v = S[r["scorer"]](r["response"], r["gold"], {})
        refused = v.status != "correct"
        if refused == (r["kind"] == "hedge"):
            continue
        key = (r["kind"], r["fold"])
        if r["kind"] == "near_miss" and r["scorer"] == "math" \
                and S["math_verify"](r["response"], r["gold"], {}).status != "correct":
            key = ("library", r["fold"])
        wrong.setdefault(key, []).append({**r, "got": v.status, "why": v.reason})
    return wrong


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    rows = list(generate())
    sizes = Counter(r["kind"] for r in rows)
    assert sizes["hedge"] >= 1000 and sizes["near_miss"] >= 1000, sizes
    return rows


@pytest.mark.parametrize("fold", ["dev", "held_out"])
def test_hedges_refused_and_near_misses_kept(corpus: list[dict], fold: str) -> None:
    rows = [r for r in corpus if r["fold"] == fold]
    hedges = sum(r["kind"] == "hedge" for r in rows)
    wrong = _run(rows)
    paid = wrong.get(("hedge", fold), [])
    lost = wrong.get(("near_miss", fold), [])
    assert len(paid) <= 0.01 * hedges, [(x["template"], x["response"][:80]) for x in paid[:10]]
    assert lost == [], [(x["template"], x["response"][:80], x["why"]) for x in lost[:10]]
    # near misses the library itself misreads (math/or-more-after with a LaTeX answer: it
    # takes the 5 of "5 or more"): none of them refused by a rule of ours
    library = wrong.get(("library", fold), [])
    assert all(rule_of(x["why"]) is None for x in library), library[:3]


def test_hedges_are_paid_without_the_rule(corpus: list[dict]) -> None:
    """Control: the library as released pays for most math hedges (the rule is what refuses
    them), and each held-out fold holds hedges of every scorer."""
    math_hedges = [r for r in corpus if r["kind"] == "hedge" and r["scorer"] == "math"]
    paid = sum(S["math_verify"](r["response"], r["gold"], {}).status == "correct"
               for r in math_hedges)
    assert paid >= 0.5 * len(math_hedges), (paid, len(math_hedges))
    held = {r["scorer"] for r in corpus if r["fold"] == "held_out" and r["kind"] == "hedge"}
    assert held == {"math", "gsm8k", "choice"}


def test_hedges_through_the_service_are_counted(client: httpx.Client) -> None:
    """A hedge of each scorer is refused by the real service with a ``hedged`` reason, shows
    in ``reward_rule_overrides_total{scorer,rule}`` and in OpenRLHF's ``extra_logs``."""
    def overrides() -> dict[str, float]:
        text = client.get("/metrics").text
        pattern = r'reward_rule_overrides_total\{rule="hedged",scorer="(\w+)"\} ([0-9.e+]+)'
        return {m.group(1): float(m.group(2)) for m in re.finditer(pattern, text)}

    before = overrides()
    items = [
        {"response": "The final answer is 5. Or maybe 6.", "ground_truth": "5", "scorer": "math"},
        {"response": "She has 28.\n#### 20\n#### 24\n#### 28", "ground_truth": "28",
         "scorer": "gsm8k"},
        {"response": "The answer is (B). Or maybe (C).", "ground_truth": "B", "scorer": "choice"},
        {"response": "The final answer is 5.", "ground_truth": "5", "scorer": "math"},  # control
    ]
    r = client.post("/v1/score", json={"items": items, "timeout_s": 30})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["status"] for x in results] == ["incorrect", "incorrect", "incorrect", "correct"]
    assert [rule_of(x["reason"]) for x in results] == ["hedged", "hedged", "hedged", None]
    after = overrides()
    for scorer in ("math", "gsm8k", "choice"):
        assert after.get(scorer, 0) >= before.get(scorer, 0) + 1, (scorer, before, after)

    prompt = "<|im_start|>user\nHow many?<|im_end|>\n<|im_start|>assistant\n"
    body = {"query": [prompt + "The final answer is 5. Or maybe 6.<|im_end|>",
                      prompt + "The final answer is 5.<|im_end|>"],
            "prompts": [prompt, prompt], "labels": ["5", "5"]}
    r = client.post("/get_reward", json=body)
    assert r.status_code == 200, r.text
    logs = r.json()["extra_logs"]
    assert set(RULE_KEYS) <= set(logs)
    assert logs["rule/hedged"] == [1.0, 0.0] and r.json()["rewards"] == [0.0, 1.0]


@pytest.mark.parametrize("scorer", ["math", "gsm8k", "choice"])
def test_hedge_rule_is_linear_on_adversarial_text(scorer: str) -> None:
    """Runs of spaces and alternative words that made the closing-part regexes backtrack
    (minutes per item before they were made possessive): each well under the bound, in CPU
    time so a busy machine does not fail it. The bound is the point, with a wide margin."""
    import time

    n = 20000
    gold = "B" if scorer == "choice" else "5"
    answer = "The answer is (B)." if scorer == "choice" else "The answer is 5."
    shapes = [
        "Maybe" + " " * n + "x. " + answer,
        "Or " + "5 or " * n + "x. " + answer,
        answer + " " + "or maybe " * n,
        answer + " Maybe" + " ," * n + "y",
        answer + " " + "it is " * n + "y",
        answer + " " + "x = " * n,
    ]
    for response in shapes:
        t = time.process_time()
        S[scorer](response, gold, {})
        assert time.process_time() - t < 10.0, (scorer, response[:30])


def test_guarded_clause_end_finds_the_same_matches() -> None:
    """hedge._CLAUSE_END and the ``math`` lead scanner are their patterns behind a start
    guard: the same matches (spans) on every corpus response and hedge-corpus text, and on
    the characters that fold to the guard's letters under IGNORECASE (the long s, the Kelvin
    sign, the dotted and dotless i)."""
    from reward_service.scorers.rules import hedge
    from tests.helpers import read_jsonl

    plain = re.compile(hedge.CLAUSE_END_UNGUARDED, re.IGNORECASE)
    texts = [r["response"] for r in read_jsonl("corpus.jsonl")]
    texts += [r["response"] for r in generate()]
    texts += ["\u017fo it is 5. \u017fo, Thus\nBUT then, hence; so again 6! THEREFORE? ok",
              "x,y;z: a.b!c?d \u212a so"]
    led = hedge._scanners(MATH_VALUE_WORDS)[0]
    assert led.pattern.startswith(hedge.LED_GUARD)
    led_plain = re.compile(led.pattern.removeprefix(hedge.LED_GUARD), led.flags)
    texts += ["\u0130t could be 5; \u0131f not 6, F\u0130NAL ANSWER: 7; #### 8; OR 9, BUT may be 10"]
    found = leads = 0
    for text in texts:
        spans = [m.span() for m in hedge._CLAUSE_END.finditer(text)]
        assert spans == [m.span() for m in plain.finditer(text)], text[:80]
        found += len(spans)
        spans = [m.span() for m in led.finditer(text)]
        assert spans == [m.span() for m in led_plain.finditer(text)], text[:80]
        leads += len(spans)
    assert found > len(texts) and leads > len(texts) / 2, (found, leads)


def test_last_end_is_the_plain_scan() -> None:
    """hedge._last_end (a 40-character window first) gives what the 200/3000-character scan
    it stands for gives, for both patterns it is used with, at every 13th position of every
    corpus response and hedge-corpus text and around every match."""
    from reward_service.scorers.rules import hedge
    from tests.helpers import read_jsonl

    def plain(pattern: re.Pattern[str], text: str, pos: int) -> int:
        for window in (200, hedge._WINDOW):
            lo = max(0, pos - window)
            ends = [lo]
            for m in pattern.finditer(text, lo):
                if m.end() > pos:
                    break
                ends.append(m.end())
            if len(ends) > 1 or lo == 0:
                return ends[-1]
        return max(0, pos - hedge._WINDOW)

    texts = [r["response"] for r in read_jsonl("corpus.jsonl")]
    texts += [r["response"] for r in generate()]
    texts += ["so " * 30 + "x" * 300 + " 5", "." * 50 + "therefore" + " " * 45 + "6"]
    checked = 0
    for text in texts:
        for pattern in (hedge._CLAUSE_END, hedge._SENTENCE_END):
            around = {p for m in pattern.finditer(text) for p in (m.end() + 39, m.end() + 41)}
            for pos in sorted({*range(0, len(text) + 1, 13), *around}):
                assert hedge._last_end(pattern, text, pos) == plain(pattern, text, pos), \
                    (text[max(0, pos - 60):pos], pos)
                checked += 1
    assert checked > 50_000


def test_nothing_offered_skips_only_closing_parts_without_candidates(monkeypatch) -> None:
    """hedge_skip.nothing_offered (the test that lets ``candidates`` skip its scans) is never
    true where the scans find a candidate: every ``candidates`` call the ``math`` profile
    makes on the corpus, the generated hedge corpus (both rounds) and delimiter shapes is
    replayed with the test turned off."""
    from reward_service.scorers.rules import hedge
    from tests.helpers import read_jsonl

    calls: list[tuple] = []
    full = hedge.candidates

    def recorded(text, start, answer, value, scan=None, holds=None):  # type: ignore[no-untyped-def]
        calls.append((text, start, answer, value, scan, holds))
        return full(text, start, answer, value, scan, holds)

    monkeypatch.setattr(hedge, "candidates", recorded)
    rows = [(r["response"], r["gold"]) for r in read_jsonl("corpus.jsonl")]
    rows += [(r["response"], r["gold"]) for r in generate() if r["scorer"] == "math"]
    rows += [(f"The answer is {a}5{b} or {c}", "5") for a, b in
             [("$", "$"), ("\\(", "\\)"), ("\\boxed{", "}"), ("**", "**"), ("$$", "$$")]
             for c in ("$6$", "**6**", "six", "\\(6\\)", "\\boxed{6}", "$", "$ $", "\\sqrt{2}",
                       "\\pi", "$x$", "\\(y\\)", "\\sqrt{x}", "Thirty-One", "\u017fix")]
    for response, gold in rows:
        S["math"](response, gold, {})
    nothing = hedge.nothing_offered
    monkeypatch.setattr(hedge, "nothing_offered", lambda *a: False)  # the scans, always
    skipped = offered = 0
    for text, start, answer, value, scan, holds in calls:
        assert holds is not None
        found = list(full(text, start, answer, value, scan, holds))
        offered += bool(found)
        if nothing(text, start, *answer, holds):
            skipped += 1
            assert not found, (text[start:][:200], found)
    assert skipped > 2000 and offered > 1000, (skipped, offered)


def test_pattern_memo_is_by_identity_and_holds_its_patterns() -> None:
    """``per_pattern`` (the rules' memo of patterns built from a value pattern): one build per
    pattern object, hits by identity (an equal pattern is another entry, never a wrong hit),
    and an entry keeps its pattern alive, so a freed pattern's id cannot alias a new one."""
    import gc
    import weakref

    from reward_service.scorers.rules import pattern_memo

    built: list[re.Pattern[str]] = []

    @pattern_memo.per_pattern
    def build(p: re.Pattern[str]) -> str:
        built.append(p)
        return p.pattern + "!"

    a = re.compile("a+")
    assert build(a) == "a+!" and build(a) == "a+!" and built == [a]
    b = re.compile("b+", re.IGNORECASE)
    assert build(b) == "b+!" and built == [a, b]
    ref = weakref.ref(b)
    del b
    gc.collect()
    assert ref() is not None  # held by its entry
    for i in range(pattern_memo.MAX_ENTRIES + 1):  # past the bound: starts again, still right
        assert build(re.compile(f"c{i}")) == f"c{i}!"
    assert build(a) == "a+!"
