"""trainer_client.integrations.verl called exactly as verl's reward managers call it.

Shapes: ``verl/workers/reward_manager/naive.py`` (keyword arguments, one item),
``verl/workers/reward_manager/batch.py`` (plural keyword arguments, ``extra_infos`` of
``[None] * n`` or dicts, ``**reward_kwargs`` merged in by ``get_custom_reward_fn``), and the
reward loop (``inspect.iscoroutinefunction`` → awaited; extra ``reward_router_address`` kwargs).
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from reward_service.scorers import RULE_KEYS
from tests.helpers import ROOT
from trainer_client.errors import RewardServiceUnavailable
from trainer_client.integrations import verl
from trainer_client.integrations.verl import (
    compute_score,
    compute_score_async,
    compute_score_batch,
    compute_score_batch_async,
)

KEYS = {"score", "acc", "pred", "status", "scored", *RULE_KEYS}
NO_RULE = dict.fromkeys(RULE_KEYS, 0.0)


class ObjectArray:
    """What ``data.non_tensor_batch[...]`` is: a numpy object array (len, iter, index)."""

    def __init__(self, values: list) -> None:
        self._v = list(values)

    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self) -> Iterator:
        return iter(self._v)

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        return self._v[i]


def load_like_verl(name: str, **reward_kwargs):  # type: ignore[no-untyped-def]
    """verl/trainer/ppo/reward.py: get_custom_reward_fn — load the file by path as
    "custom_module", then merge reward_kwargs into every call."""
    spec = importlib.util.spec_from_file_location("custom_module", verl.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw_fn = getattr(module, name)

    def wrapped_fn(*args, **kwargs):  # type: ignore[no-untyped-def]
        return raw_fn(*args, **kwargs, **reward_kwargs)

    return raw_fn, wrapped_fn


def test_module_imports_without_verl_or_torch() -> None:
    code = ("import sys; import trainer_client.integrations.verl; "
            "bad = [m for m in ('verl', 'torch', 'numpy') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_naive_manager_keyword_call(service_env: str) -> None:
    # NaiveRewardManager.__call__: compute_score(data_source=, solution_str=, ground_truth=,
    # extra_info=) with extra_info carrying num_turns
    out = compute_score(data_source="lighteval/MATH",
                        solution_str="Hence (verl) the answer is $\\boxed{\\frac{1}{2}}$.",
                        ground_truth="0.5", extra_info={"index": 3, "num_turns": None})
    assert out == {"score": 1.0, "acc": 1.0, "pred": "\\frac{1}{2}", "status": "correct",
                   "scored": 1.0, **NO_RULE}
    out = compute_score(data_source="openai/gsm8k", solution_str="#### 17", ground_truth="18")
    assert out["score"] == 0.0 and out["status"] == "incorrect" and out["pred"] == "17"
    # a hedge (SmolLM2-135M's consecutive #### lines) is refused, and counted under its rule
    out = compute_score(data_source="openai/gsm8k", solution_str="#### 20\n#### 24\n#### 28",
                        ground_truth="28")
    assert out["score"] == 0.0 and out["rule/hedged"] == 1.0
    assert sum(out[k] for k in RULE_KEYS) == 1.0


def test_batch_manager_keyword_call_one_request(service_env: str, svc) -> None:  # type: ignore[no-untyped-def]
    raw_fn, fn = load_like_verl("compute_score_batch", url=service_env, timeout_s=5.0)
    n = 64
    before = _requests_total(svc.url)
    scores = fn(  # BatchRewardManager.verify
        data_sources=ObjectArray(["openai/gsm8k", "lighteval/MATH"] * (n // 2)),
        solution_strs=[f"#### {i}" if i % 2 == 0 else f"\\boxed{{{i}}}" for i in range(n)],
        ground_truths=[str(i) if i % 4 else "-1" for i in range(n)],
        extra_infos=[None] * n,
    )
    assert _requests_total(svc.url) - before == 1  # one HTTP call for the whole batch
    assert len(scores) == n and all(set(s) == KEYS for s in scores)
    assert [s["score"] for s in scores] == [0.0 if i % 4 == 0 else 1.0 for i in range(n)]
    assert not inspect.iscoroutinefunction(raw_fn)


def test_batch_with_numpy_like_values_and_scorer_options(service_env: str) -> None:
    class Scalar:  # numpy.int64 and friends: .tolist() gives the Python value
        def __init__(self, v: object) -> None:
            self.v = v

        def tolist(self) -> object:
            return self.v

    scores = compute_score_batch(
        data_sources=ObjectArray(["x", "x", "x"]),
        solution_strs=["\\boxed{42}", "about \\boxed{3.14159}", "The answer is (B)."],
        ground_truths=[Scalar(42), "3.1416", ["B"]],
        extra_infos=ObjectArray([{"rel_tol": 0.1}, {"rel_tol": 1e-4}, {"choices": "ABCD"}]),
        scorer=None,
    )
    assert [s["status"] for s in scores] == ["correct", "incorrect", "no_answer"]
    scores = compute_score_batch(["x"], ["about \\boxed{3.14159}"], ["3.1416"],
                                 [{"rel_tol": 1e-4}], scorer="numeric")
    assert scores[0]["status"] == "correct"


def test_reward_loop_awaits_the_async_variants(service_env: str) -> None:
    # reward_loop: is_async_reward_score = inspect.iscoroutinefunction(compute_score)
    assert inspect.iscoroutinefunction(compute_score_async)
    assert inspect.iscoroutinefunction(compute_score_batch_async)

    async def run():  # type: ignore[no-untyped-def]
        one = await compute_score_async(data_source="aime", solution_str="\\boxed{7}",
                                        ground_truth="7", extra_info={},
                                        reward_router_address=None, reward_model_tokenizer=None)
        many = await compute_score_batch_async(
            data_sources=["aime"] * 3, solution_strs=["\\boxed{1}", "\\boxed{2}", "none"],
            ground_truths=["1", "3", "1"], extra_infos=[{}, {}, {}])
        return one, many

    one, many = asyncio.run(run())
    assert one["score"] == 1.0
    assert [m["status"] for m in many] == ["correct", "incorrect", "no_answer"]
    asyncio.run(run())  # a second event loop gets its own client


def test_unscorable_items_score_zero_with_status_and_warning(
        service_env: str, caplog: pytest.LogCaptureFixture) -> None:
    scores = compute_score_batch(["math"] * 2, ["\\boxed{1}", "\\boxed{1}"], ["1", ""], None)
    assert [(s["score"], s["status"], s["scored"]) for s in scores] == [
        (1.0, "correct", 1.0), (0.0, "bad_ground_truth", 0.0)]
    assert "could not score 1 of 2" in caplog.text


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((["a"], ["x", "y"], ["1", "2"], None), "data_sources has 1 entries but solution_strs has 2"),
        ((["a", "a"], ["x", "y"], ["1"], None), "ground_truths has 1 entries"),
        ((["a"], ["x"], ["1"], [None, None]), "extra_infos has 2 entries"),
        ((["a", "a"], ["x", "y"], ["1", None], None), "ground_truth\\[1\\] is None"),
        ((["a"], [None], ["1"], None), "solution_str\\[0\\] is a NoneType"),
        ((["a"], ["x"], [["1", "2"]], None), "ground_truth\\[0\\] is a list of 2"),
    ],
)
def test_wrong_shapes_are_clear_errors(service_env: str, args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        compute_score_batch(*args)


def test_no_url_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REWARD_SERVICE_URL", raising=False)
    with pytest.raises(ValueError, match="REWARD_SERVICE_URL"):
        compute_score("x", "\\boxed{1}", "1")


def test_unreachable_service_raises_never_zeros(dead_url: str) -> None:
    with pytest.raises(RewardServiceUnavailable, match="unavailable"):
        compute_score_batch(["x"], ["\\boxed{1}"], ["1"], None, url=dead_url,
                            retry_deadline_s=1.0)


def _requests_total(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("reward_http_requests_total{") and 'route="score"' in line)
