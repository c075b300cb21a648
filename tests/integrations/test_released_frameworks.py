"""OpenRLHF 0.11.2 and 0.9.0 and TRL 1.16.0: their own released code against the real service.

Each runs ``framework_runs/<script>`` in a fresh interpreter with the framework's wheel on
``PYTHONPATH`` (``tests/integrations/frameworks.py``); what each script replaces, and why, is
in its docstring (only vLLM, for OpenRLHF). Skipped, naming the install command, when the
framework is not in ``.venv/frameworks``.
"""

from __future__ import annotations

from tests.helpers import Service
from tests.integrations import frameworks

N = 256


def test_openrlhf_0_11_one_request_per_sample_every_sample_rewarded(svc: Service) -> None:
    """SingleTurnAgentExecutor.execute per sample: a new aiohttp session and one /get_reward
    each. The third prompt is long, and OpenRLHF cuts it from the left to fit max_len: it
    was a 422 and a None reward (the step then fails in torch.cat)."""
    out = frameworks.run("openrlhf-0.11.2", "openrlhf_remote_rm.py", svc.url, str(N))
    assert out["openrlhf"] == "0.11.2"
    assert out["rewards"] == [[1.0], [0.0], [1.0]] * (N // 3) + [[1.0], [0.0], [1.0]][:N % 3]
    assert not out["cut_query"].startswith("Question:")  # OpenRLHF really did cut it
    assert out["extra_logs"]["prompt_not_found"] == [1.0]  # located by the surviving suffix
    assert out["requests"] == N
    print(f"OpenRLHF 0.11.2 per-sample /get_reward: {out['items_per_s']:.0f} items/s")


def test_openrlhf_0_9_whole_batches(svc: Service) -> None:
    out = frameworks.run("openrlhf-0.9.0", "openrlhf_remote_rm.py", svc.url, str(N))
    assert out["openrlhf"] == "0.9.0"
    assert out["rewards"] == ([1.0, 0.0, 1.0] * N)[:N]
    print(f"OpenRLHF 0.9.0 batched /get_reward: {out['items_per_s']:.0f} items/s")


def test_trl_1_16_calculate_rewards_calls_our_functions(svc: Service) -> None:
    """GRPOTrainer._calculate_rewards from the installed TRL: prompts, completions (text and
    message lists), completion_ids and the dataset columns as keyword lists; a sync and an
    async reward function (TRL runs the latter in its own daemon loop)."""
    out = frameworks.run("trl-1.16.0", "trl_rewards.py", svc.url, "64")
    assert out["trl"] == "1.16.0"
    want = [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]] * 16
    assert out["text"]["rewards"] == want
    assert out["conversational"]["rewards"] == want
    assert out["logged"] == ["math_async/unscored", "math_async_status", "math_sync/unscored",
                             "math_sync_status"]
