"""The paired before/after comparison of a run's eval files, and the exact McNemar test."""

from __future__ import annotations

import json
import math

import pytest

from trainer_client.report import format_paired, main, mcnemar_exact, paired_eval


def test_mcnemar_exact_against_the_binomial_by_hand():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 2**10)
    assert mcnemar_exact(0, 10) == mcnemar_exact(10, 0)  # two-sided
    # 8 vs 2: P(X <= 2 | n=10, 1/2) = (1 + 10 + 45) / 1024, doubled
    assert mcnemar_exact(8, 2) == pytest.approx(2 * 56 / 1024)
    assert mcnemar_exact(5, 5) == 1.0
    assert mcnemar_exact(60, 3) < 1e-12
    assert mcnemar_exact(60, 3) == pytest.approx(
        2 * sum(math.comb(63, k) for k in range(4)) / 2**63)


def _write(path, recs):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _rec(i, correct, status, finished=True, tokens=10):
    return {"id": f"p{i}", "correct": correct, "status": status, "finished": finished,
            "complete": finished and status in ("correct", "incorrect"), "tokens": tokens,
            "response": "", "extracted": None, "reason": None, "ground_truth": "1"}


def test_paired_eval_of_the_first_and_last_eval_files(tmp_path, capsys):
    before = [_rec(0, False, "no_answer", finished=False, tokens=40),
              _rec(1, False, "incorrect"), _rec(2, True, "correct"), _rec(3, True, "correct")]
    middle = [_rec(i, True, "correct") for i in range(4)]  # ignored: only first vs last
    after = [_rec(0, True, "correct"), _rec(1, True, "correct"), _rec(2, False, "incorrect"),
             _rec(3, True, "correct")]
    _write(tmp_path / "eval" / "step_0.jsonl", before)
    _write(tmp_path / "eval" / "step_5.jsonl", middle)
    _write(tmp_path / "eval" / "step_10.jsonl", after)  # 10 sorts after 5 numerically
    p = paired_eval(tmp_path)
    assert p is not None
    assert (p.first_step, p.last_step, p.n) == (0, 10, 4)
    assert (p.before, p.after) == (0.5, 0.75)
    assert (p.gained, p.lost) == (2, 1)
    assert p.p_value == mcnemar_exact(2, 1)
    assert p.complete_before == (2, 3) and p.complete_after == (3, 4)
    assert p.transitions[("no_answer", "correct")] == 1
    assert p.truncated == (0.25, 0.0)
    text = format_paired(p)
    assert "+25.0 points" in text and "wrong->right 2" in text
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "eval/accuracy": 0.5}) + "\n")
    assert main([str(tmp_path)]) == 0
    assert "exact McNemar" in capsys.readouterr().out


def test_answer_forms_separate_stopping_and_marking_from_the_value(tmp_path):
    """A problem cut at the token limit that ends right after is a lesson in stopping; an
    unmarked answer that becomes '#### right' one in the marker; '#### wrong' to
    '#### right' one in the value."""
    before = [{**_rec(0, False, "no_answer", finished=False), "response": "Let's see, 3 +"},
              {**_rec(1, False, "incorrect"), "response": "So she has 12 apples."},
              {**_rec(2, False, "incorrect"), "response": "3 * 4 = 11\n#### 11"},
              {**_rec(3, True, "correct"), "response": "#### 7"}]
    after = [{**_rec(0, True, "correct"), "response": "3 + 4 = 7\n#### 7"},
             {**_rec(1, True, "correct"), "response": "#### 12"},
             {**_rec(2, True, "correct"), "response": "3 * 4 = 12\n#### 12"},
             {**_rec(3, False, "no_answer", finished=False), "response": "Let us"}]
    _write(tmp_path / "eval" / "step_0.jsonl", before)
    _write(tmp_path / "eval" / "step_9.jsonl", after)
    p = paired_eval(tmp_path)
    assert p is not None
    assert p.forms == {("cut", "#### right"): 1, ("unmarked", "#### right"): 1,
                       ("#### wrong", "#### right"): 1, ("#### right", "cut"): 1}
    assert "| unmarked -> #### right | 1 |" in format_paired(p)


def test_paired_eval_refuses_different_problems(tmp_path):
    _write(tmp_path / "eval" / "step_0.jsonl", [_rec(0, True, "correct")])
    _write(tmp_path / "eval" / "step_3.jsonl", [_rec(1, True, "correct")])
    with pytest.raises(ValueError, match="same problems"):
        paired_eval(tmp_path)
    assert paired_eval(tmp_path / "nowhere") is None
