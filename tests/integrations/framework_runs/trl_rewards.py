"""TRL 1.16.0's own reward step (``GRPOTrainer._calculate_rewards``, from the installed
package) calling our reward functions against the real service.

    python trl_rewards.py URL N_COMPLETIONS

``_calculate_rewards`` is called as the trainer calls it, on an object carrying the
attributes it reads (the reward functions, their names, the trainer state, TRL's own daemon
event loop for async functions, a CPU accelerator). Building a whole ``GRPOTrainer`` needs a
model and a generation backend, which is not what is under test: everything from "the
batch's columns" to "one reward per completion" is TRL's code. Both forms are run: plain-text
completions (a sync function) and conversational ones (an async function, which TRL runs in
its own loop). Prints one JSON object on its last line.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

import trl
from accelerate import Accelerator
from transformers import TrainerState
from trl import GRPOTrainer
from trl.trainer.utils import start_event_loop_in_daemon

from trainer_client.integrations.trl import make_reward_func

ANSWERS = [("The answer is \\boxed{4}.", "4"), ("I get \\boxed{5}", "4"), ("No idea.", "3"),
           ("\\boxed{\\frac{1}{2}}", "0.5")]


def main() -> None:
    url, n = sys.argv[1], int(sys.argv[2])
    sync_fn = make_reward_func(url, answer_key="solution", name="math_sync")
    async_fn = make_reward_func(url, answer_key="solution", name="math_async", asynchronous=True)
    thread, loop, ready = start_event_loop_in_daemon()  # TRL's own async loop
    ready.wait()
    logged: dict[str, list] = {}
    trainer = SimpleNamespace(  # the attributes _calculate_rewards and profiling_context read
        accelerator=Accelerator(cpu=True), reward_funcs=[sync_fn, async_fn],
        reward_processing_classes=[None, None], reward_func_names=["math_sync", "math_async"],
        state=TrainerState(), args=SimpleNamespace(report_to=[]), environments=None,
        async_loop=loop, _log_completion_extra=lambda k, v: logged.setdefault(k, v),
        _log_metric=lambda k, v: logged.setdefault(k, [v]),
    )
    out: dict = {"trl": trl.__version__}
    for form in ("text", "conversational"):
        rows = [ANSWERS[i % len(ANSWERS)] for i in range(n)]
        if form == "text":
            prompts = ["What is 2+2?"] * n
            completions = [c for c, _ in rows]
        else:
            prompts = [[{"role": "user", "content": "What is 2+2?"}]] * n
            completions = [[{"role": "assistant", "content": c}] for c, _ in rows]
        inputs = [{"prompt": p, "completion": c, "solution": s, "data_source": "lighteval/MATH"}
                  for p, c, (_, s) in zip(prompts, completions, rows, strict=True)]
        t0 = time.perf_counter()
        rewards = GRPOTrainer._calculate_rewards(trainer, inputs, prompts, completions,
                                                 [[1, 2, 3]] * n)
        out[form] = {"rewards": rewards.tolist(), "seconds": time.perf_counter() - t0}
    out["logged"] = sorted(logged)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout=10)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
