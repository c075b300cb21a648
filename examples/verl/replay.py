"""Score a batch exactly as verl's batch reward manager would, against a running service.

    $ REWARD_SERVICE_URL=http://127.0.0.1:8000 python examples/verl/replay.py

verl/workers/reward_manager/batch.py calls ``compute_score(data_sources=, solution_strs=,
ground_truths=, extra_infos=, **reward_kwargs)`` once per batch; run_grpo.sh shows the config
lines that make verl load this function.
"""

from __future__ import annotations

from trainer_client.integrations.verl import compute_score, compute_score_batch

G = 4  # responses per prompt
data_sources = ["openai/gsm8k"] * G + ["lighteval/MATH"] * G
solution_strs = [
    "16 - 3 - 4 = 9, 9 * 2 = 18\n#### 18", "#### 17", "The answer is 18.", "no idea",
    "$\\boxed{\\frac{1}{2}}$", "It is \\boxed{0.5}", "\\boxed{2}", "\\boxed{\\frac{2}{4}}",
]
ground_truths = ["18"] * G + ["\\frac{1}{2}"] * G
extra_infos = [{"index": i, "split": "train"} for i in range(2 * G)]

results = compute_score_batch(data_sources=data_sources, solution_strs=solution_strs,
                              ground_truths=ground_truths, extra_infos=extra_infos)
for source, text, result in zip(data_sources, solution_strs, results, strict=True):
    print(f"{source:15} {text[:32]!r:36} -> {result}")
assert [r["score"] for r in results] == [1, 0, 1, 0, 1, 1, 0, 1]

# the naive reward manager calls the per-item form with keyword arguments
one = compute_score(data_source="openai/gsm8k", solution_str="#### 18", ground_truth="18",
                    extra_info=None)
print("naive:", one)
