"""verl 0.9.1's own config and reward loop against the real service (verl from its wheel).

Runs ``framework_runs/verl_reward_loop.py`` in a fresh interpreter (verl needs omegaconf's
antlr 4.9 runtime, which must not meet math-verify's 4.13 in this process). Skipped, with the
command that installs it, when verl 0.9.1 is not in ``.venv/frameworks``.
"""

from __future__ import annotations

import pytest

from tests.helpers import Service
from tests.integrations import frameworks
from trainer_client.integrations import verl as ours

N = 256


@pytest.fixture(scope="module")
def verl_run(svc: Service) -> dict:
    return frameworks.run("verl-0.9.1", "verl_reward_loop.py", svc.url, str(N), timeout_s=420)


def test_the_documented_lines_resolve_to_our_async_reward_function(verl_run: dict) -> None:
    assert verl_run["verl"] == "0.9.1"
    doc = verl_run["documented"]
    assert (doc["fn_file"], doc["fn_name"]) == (ours.__file__, "compute_score_async")
    assert doc["manager"] == "NaiveRewardManager"  # the reward loop's per-sample manager
    assert doc["reward_kwargs"]["url"].startswith("http://127.0.0.1:")
    both = verl_run["both"]  # the one command line that also carries the legacy keys
    assert (both["fn_file"], both["fn_name"]) == (ours.__file__, "compute_score_async")


def test_the_legacy_spelling_is_ignored_by_verl_0_9(verl_run: dict) -> None:
    """The control: what README/docs said before. main_ppo keeps verl's own scorer (no
    custom function at all), and only fully_async's migration reads the keys, then fails."""
    assert verl_run["legacy_as_is"]["path"] is None
    assert verl_run["legacy_as_is"]["fn_name"] is None
    assert verl_run["legacy_migrated"]["manager"] == "error: Unknown reward manager: batch"


def test_a_step_of_rewards_comes_from_the_service_in_a_few_requests(verl_run: dict) -> None:
    expected = ["correct", "incorrect", "correct", "no_answer"] * (N // 4)
    assert verl_run["status"] == expected  # statuses only the service produces
    assert verl_run["rewards"] == [1.0 if s == "correct" else 0.0 for s in expected]
    # the legacy keys of the same command line, through verl's legacy BatchRewardManager
    assert verl_run["legacy_batch_rewards"] == verl_run["rewards"]
    assert {"score", "acc", "pred", "status", "scored"} <= set(verl_run["extra_keys"])
    # verl awaits one compute_score_async per sample (2 actors x 128); the client coalesces
    assert verl_run["requests"] <= 16, verl_run["requests"]
    print(f"verl 0.9.1 reward loop: {verl_run['items_per_s']:.0f} items/s, "
          f"{verl_run['requests']} requests for {N} samples")
