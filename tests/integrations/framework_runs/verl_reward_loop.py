"""verl 0.9.1's own config and reward loop, run against the real service (a fresh interpreter
with verl from its released wheel on PYTHONPATH; see ``tests/integrations/frameworks.py``).

    python verl_reward_loop.py URL N_ITEMS

1. Composes ``verl/trainer/config/ppo_trainer.yaml`` from the wheel with Hydra, once with the
   lines docs/integrations.md gives for verl 0.9 and once with the legacy spelling, and reports
   what each resolves to through verl's own ``get_custom_reward_fn`` /
   ``resolve_reward_manager_cls``.
2. Builds verl's ``RewardLoopManager`` from the documented config: real Ray actors running
   ``RewardLoopWorker`` → ``NaiveRewardManager.run_single`` per sample (verl's code, nothing
   replaced). Nothing here needs a GPU: without a reward *model* verl starts no GPU worker.
   The actor tokenizer is a local character tokenizer (no hub here). Ray is real (a local
   cluster of 2 CPUs); each reward-loop actor imports verl from the wheel.
3. Scores a batch as ``DataProto`` through ``compute_rm_score`` and reports the rewards, the
   ``reward_extra_info`` keys and the items/s.

Prints one JSON object on its last line.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import ray
import torch
import verl
from hydra import compose, initialize_config_dir
from verl import DataProto
from verl.experimental.reward_loop import RewardLoopManager, migrate_legacy_reward_impl
from verl.trainer.ppo.reward import extract_reward, get_custom_reward_fn, resolve_reward_manager_cls

from trainer_client.integrations import verl as ours

CONFIG_DIR = Path(verl.__file__).parent / "trainer" / "config"
OURS = ours.__file__

URL = "http://127.0.0.1:8000"  # replaced by the service's URL in main()

#: docs/integrations.md and examples/verl/run_grpo.sh, verl 0.9 (reward loop): these lines.
DOCUMENTED = [
    f"reward.custom_reward_function.path={OURS}",
    "reward.custom_reward_function.name=compute_score_async",
    f"++reward.custom_reward_function.reward_kwargs.url={URL}",
]
#: The legacy spelling alone (verl's legacy reward managers; this project's docs before).
LEGACY = [
    "reward_model.reward_manager=batch",
    f"custom_reward_function.path={OURS}",
    "custom_reward_function.name=compute_score_batch",
    f"++custom_reward_function.reward_kwargs.url={URL}",
]
#: docs/integrations.md, "one command line for every verl": ``++`` adds a key or overrides it.
BOTH = [
    f"++reward.custom_reward_function.path={OURS}",
    "++reward.custom_reward_function.name=compute_score_async",
    f"++reward.custom_reward_function.reward_kwargs.url={URL}",
    *LEGACY,
]


def with_url(lines: list[str], url: str) -> list[str]:
    return [line.replace(URL, url) for line in lines]


def composed(overrides: list[str]):  # type: ignore[no-untyped-def]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def resolved(cfg) -> dict:  # type: ignore[no-untyped-def]
    try:
        manager = resolve_reward_manager_cls(cfg).__name__
    except ValueError as exc:  # what start-up would raise
        manager = f"error: {exc}"
    fn = get_custom_reward_fn(cfg)
    raw = fn.args[0] if fn is not None else None  # functools.partial(_call_with_kwargs, raw, kw)
    return {
        "path": cfg.reward.custom_reward_function.path,
        "manager": manager,
        "fn_file": raw.__code__.co_filename if raw is not None else None,
        "fn_name": raw.__name__ if raw is not None else None,
        "reward_kwargs": dict(fn.args[1]) if fn is not None else None,
    }


def batch(tokenizer, items: list[tuple[str, str, str]]) -> DataProto:  # type: ignore[no-untyped-def]
    """(data_source, response, ground truth) → the DataProto verl's rollout hands the reward
    loop: left-padded prompts, right-padded responses, one attention mask over both."""
    prompt_len, resp_len = 8, max(len(tokenizer.encode(r)) for _, r, _ in items) + 2
    pad = tokenizer.pad_token_id
    prompts = torch.full((len(items), prompt_len), pad)
    responses = torch.full((len(items), resp_len), pad)
    mask = torch.zeros((len(items), prompt_len + resp_len), dtype=torch.long)
    for i, (_, response, _) in enumerate(items):
        p = tokenizer.encode("Q: 1+1?")[-prompt_len:]
        r = [*tokenizer.encode(response), tokenizer.eos_token_id]
        prompts[i, prompt_len - len(p):] = torch.tensor(p)
        responses[i, :len(r)] = torch.tensor(r)
        mask[i, prompt_len - len(p):prompt_len + len(r)] = 1
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask,
                 "input_ids": torch.cat([prompts, responses], dim=1)},
        non_tensors={
            "data_source": np.array([d for d, _, _ in items], dtype=object),
            "reward_model": np.array([{"ground_truth": g, "style": "rule"} for *_, g in items],
                                     dtype=object),
            "extra_info": np.array([{"index": i} for i in range(len(items))], dtype=object),
        },
    )


def score_requests(url: str) -> int:
    """``POST /v1/score`` requests the service has answered, from its /metrics."""
    text = httpx.get(f"{url}/metrics").text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("reward_http_requests_total{") and 'route="score"' in line))


def main() -> None:
    url, n = sys.argv[1], int(sys.argv[2])
    from trainer_client.model.tiny_model import build_char_tokenizer

    tokenizer_dir = tempfile.mkdtemp(prefix="verl-tok-")
    tokenizer = build_char_tokenizer()
    tokenizer.save_pretrained(tokenizer_dir)
    out: dict = {"verl": verl.__version__}

    legacy = composed(with_url(LEGACY, url))
    out["legacy_as_is"] = resolved(legacy)  # what main_ppo sees: the legacy keys are ignored
    out["legacy_migrated"] = resolved(migrate_legacy_reward_impl(legacy))  # fully_async only

    cfg = composed([*with_url(DOCUMENTED, url), f"actor_rollout_ref.model.path={tokenizer_dir}",
                    "reward.num_workers=2"])
    out["documented"] = resolved(cfg)
    out["both"] = resolved(composed(with_url(BOTH, url)))

    base = [("openai/gsm8k", "so the answer is #### 42", "42"),
            ("openai/gsm8k", "I think #### 41", "42"),
            ("lighteval/MATH", "The answer is $\\boxed{\\frac{1}{2}}$", "\\frac{1}{2}"),
            ("lighteval/MATH", "no idea", "3")]
    items = [base[i % len(base)] for i in range(n)]
    data = batch(tokenizer, items)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})
    try:
        manager = RewardLoopManager(cfg)
        manager.compute_rm_score(data[:2])  # actors up and connected: not part of the timing
        before = score_requests(url)
        t0 = time.perf_counter()
        scored = manager.compute_rm_score(data)
        elapsed = time.perf_counter() - t0
        out["requests"] = score_requests(url) - before
    finally:
        ray.shutdown()
    # verl's legacy batch manager (still shipped in 0.9.1) with the function the legacy keys of
    # the same command line name, loaded as the legacy loader did (path + name + reward_kwargs)
    from verl.utils.import_utils import load_extern_object
    from verl.workers.reward_manager.batch import BatchRewardManager

    both = composed(with_url(BOTH, url)).custom_reward_function
    legacy_fn = functools.partial(load_extern_object(both.path, both.name),
                                  **both.reward_kwargs)
    legacy_out = BatchRewardManager(tokenizer=tokenizer, num_examine=0,
                                    compute_score=legacy_fn)(data, return_dict=True)
    out["legacy_batch_rewards"] = legacy_out["reward_tensor"].sum(-1).tolist()
    rewards, extra = extract_reward(scored)
    out["rewards"] = rewards.sum(-1).tolist()
    out["extra_keys"] = sorted(extra)
    out["status"] = [str(s) for s in extra["status"]]
    out["items_per_s"] = n / elapsed
    print(json.dumps(out))


if __name__ == "__main__":
    main()
