from pathlib import Path

import pytest

from tests.helpers import DATA
from trainer_client.data import (
    DataSettings,
    Problem,
    boxed_answer,
    gsm8k_gold,
    load_jsonl_problems,
    load_problems,
    render_prompt,
    sample_batch,
    toy_addition,
)
from trainer_client.model.tiny_model import build_char_tokenizer


def test_gold_extraction():
    assert gsm8k_gold("so 3 + 4 = 7\n#### 1,234") == "1234"
    with pytest.raises(ValueError):
        gsm8k_gold("no marker")
    assert boxed_answer(r"thus \boxed{\frac{1}{2}} and \boxed{x^{2}}") == "x^{2}"
    assert boxed_answer("none") is None
    assert boxed_answer(r"\boxed{unclosed") is None


def test_toy_split_is_seeded_and_disjoint():
    train, held = toy_addition(seed=1, eval_size=20)
    assert len(train) == 80 and len(held) == 20
    assert not {p.id for p in train} & {p.id for p in held}
    assert toy_addition(seed=1, eval_size=20) == (train, held)
    small, same = toy_addition(max_sum=9, eval_size=0)
    assert len(small) == 55 and same == small
    assert all(int(p.ground_truth) <= 9 for p in small)
    p = next(p for p in small if p.id == "toy-3+4")
    assert (p.question, p.ground_truth, p.scorer) == ("3+4=", "7", "numeric")


@pytest.mark.needs_data
def test_gsm8k_and_math_loaders():
    g = load_jsonl_problems(DATA / "gsm8k_test.jsonl", "gsm8k", limit=5)
    assert len(g) == 5 and g[0].ground_truth == "18" and g[0].scorer == "gsm8k"
    m = load_jsonl_problems(DATA / "math500_test.jsonl", "math", limit=3)
    assert m[0].scorer == "math"  # the hedge-proof profile, not stock math_verify
    assert "\\boxed" not in m[0].ground_truth and m[0].ground_truth
    train, evals = load_problems(DataSettings(format="gsm8k",
                                              train_path=str(DATA / "gsm8k_test.jsonl"),
                                              eval_size=10, max_train=50))
    assert len(train) == 50 and len(evals) == 10
    assert not {p.id for p in train} & {p.id for p in evals}


@pytest.mark.needs_data
def test_gsm8k_train_split_in_seeded_test_split_out():
    """The GSM8K demo's split: train on the train file, evaluate on a seeded draw of the test
    file (the same problems every run, in file order), never a question of one in the other."""
    settings = DataSettings(format="gsm8k", train_path=str(DATA / "gsm8k_train.jsonl"),
                            max_gold_steps=2, eval_path=str(DATA / "gsm8k_test.jsonl"),
                            eval_max_gold_steps=3, eval_size=500)
    train, evals = load_problems(settings)
    assert len(train) == 2674 and len(evals) == 500  # <= 2 calculations of 7,473; 500 of 804
    assert all(p.id.startswith("gsm8k_train-") for p in train)
    assert all(p.id.startswith("gsm8k_test-") for p in evals)
    order = [int(p.id.rsplit("-", 1)[1]) for p in evals]
    assert order == sorted(order) and order != list(range(500))  # drawn, not the first 500
    assert load_problems(settings)[1] == evals
    other = load_problems(DataSettings(**{**vars(settings), "seed": 1}))[1]
    assert other != evals
    assert not {p.question for p in train} & {p.question for p in evals}
    test_rows = load_jsonl_problems(DATA / "gsm8k_test.jsonl", "gsm8k")
    by_id = {p.id: p for p in test_rows}
    assert all(by_id[p.id] == p for p in evals)
    with pytest.raises(ValueError, match="eval_size is 900"):
        load_problems(DataSettings(**{**vars(settings), "eval_size": 900}))


def test_jsonl_formats(tmp_path: Path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"problem": "1+1?", "solution": "It is \\\\boxed{2}."}\n\n'
                 '{"question": "q", "answer": "5"}\n')
    ps = load_jsonl_problems(f, "math")
    assert [p.ground_truth for p in ps] == ["2", "5"]
    with pytest.raises(ValueError):
        load_problems(DataSettings(format="gsm8k"))


def test_sample_batch_pure_and_covers_epoch():
    probs = [Problem(id=str(i), question=str(i), ground_truth="0", scorer="numeric",
                     data_source="t") for i in range(10)]
    a = [sample_batch(probs, 4, seed=0, step=s) for s in range(1, 6)]
    b = [sample_batch(probs, 4, seed=0, step=s) for s in range(1, 6)]
    assert a == b  # resuming at any step draws the same batch
    first_epoch = [p.id for batch in a for p in batch][:10]
    assert sorted(first_epoch) == sorted(p.id for p in probs)
    assert a != [sample_batch(probs, 4, seed=1, step=s) for s in range(1, 6)]


class _ChatTok:
    chat_template = "x"

    def apply_chat_template(self, messages, tokenize, add_generation_prompt):
        assert not tokenize and add_generation_prompt
        return "|".join(f"{m['role']}:{m['content']}" for m in messages) + "|assistant:"


def test_render_prompt():
    p = Problem(id="1", question="2+2?", ground_truth="4", scorer="gsm8k", data_source="t")
    tok = build_char_tokenizer()  # no chat template: plain text even when asked
    assert render_prompt(p, tok, use_chat_template=True) == "2+2?"
    assert render_prompt(p, tok, template="gsm8k").startswith("2+2?\nSolve")
    assert render_prompt(p, _ChatTok(), template="boxed", use_chat_template=True,
                         system_prompt="be brief") == \
        "system:be brief|user:2+2?\nPlease reason step by step, and put your final answer " \
        "within \\boxed{}.|assistant:"


def test_generated_additions_are_seeded_distinct_and_held_out_disjoint():
    from trainer_client.data import DataSettings, generated_additions, load_problems

    a = generated_additions(seed=0, count=3000)
    assert a == generated_additions(seed=0, count=3000)  # a pure function of the seed
    assert a != generated_additions(seed=1, count=3000)
    sums = set()
    for p in a:
        x, y = (int(t) for t in p.question.removeprefix("What is ").rstrip("?").split(" + "))
        assert 10 <= x <= 99 and 10 <= y <= 99 and p.ground_truth == str(x + y)
        assert p.scorer == "gsm8k"
        sums.add((min(x, y), max(x, y)))
    assert len(sums) == 3000  # never "a + b" and "b + a" both
    train, held = load_problems(DataSettings(format="addition", num_problems=3000,
                                             eval_size=200))
    assert len(held) == 200 and len(train) == 2800
    assert not {p.id for p in train} & {p.id for p in held}
    assert held == load_problems(DataSettings(format="addition", num_problems=3000,
                                              eval_size=200))[1]  # the same 200 every time
    with pytest.raises(ValueError, match="num_problems"):
        generated_additions(seed=0, count=5000)  # only 4095 unordered two-digit pairs
