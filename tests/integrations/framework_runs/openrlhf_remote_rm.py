"""OpenRLHF's own reward-request code from its released wheel, against the real service.

    python openrlhf_remote_rm.py URL N_SAMPLES

* OpenRLHF ≥ 0.9.1 (run with 0.11.2 on PYTHONPATH): ``openrlhf/utils/agent.py:
  SingleTurnAgentExecutor.execute`` per sample, as its vLLM actors run it: tokenize the prompt,
  cut it from the left to fit ``max_length``, generate, decode prompt + response with special
  tokens, post one ``/get_reward`` on a new aiohttp session (5 tries), read ``rewards``. N
  samples run concurrently, as the engine's actors do.
* OpenRLHF 0.9.0: ``openrlhf/utils/remote_rm_utils.py: request_api_wrapper`` with the whole
  batch (``remote_rm_fn_ray`` is that function as a Ray task).

Only the modules on the reward path are loaded: ``openrlhf`` and ``openrlhf.utils`` are
registered as bare packages so that their ``__init__`` (deepspeed, flash-attn) does not run.
The vLLM engine is replaced by :class:`Engine` (vLLM needs a GPU): it returns a fixed
completion's token ids; everything else (tokenizer, truncation, decoding, HTTP) is OpenRLHF's
code with a real tokenizer. Prints one JSON object on its last line.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
import types
from pathlib import Path
from types import SimpleNamespace

import httpx


def bare_packages() -> Path:
    """Register ``openrlhf`` and ``openrlhf.utils`` without running their ``__init__``."""
    spec = importlib.util.find_spec("openrlhf")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, path in (("openrlhf", root), ("openrlhf.utils", root / "utils")):
        module = types.ModuleType(name)
        module.__path__ = [str(path)]
        sys.modules[name] = module
    return root


class Engine:
    """Stands in for OpenRLHF's vLLM engine (GPU only): ``generate`` answers each prompt with
    the completion the test chose for it."""

    def __init__(self, tokenizer, completions: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
        self.tok = tokenizer
        self.completions = completions

    async def generate(self, prompt_token_ids, params, multi_modal_data=None):  # type: ignore[no-untyped-def]
        text = self.tok.decode(prompt_token_ids)
        completion = next(c for key, c in self.completions.items() if key in text)
        ids = self.tok(text=completion, add_special_tokens=False)["input_ids"]
        out = SimpleNamespace(token_ids=ids, finish_reason="stop", logprobs=None)
        return SimpleNamespace(outputs=[out])


SAMPLES = [  # (prompt, completion, label): the last prompt is cut from the left by OpenRLHF
    ("Question: What is 6*7?\nAnswer: ", "The answer is 42.<eos>", "42"),
    ("Question: What is 2+2?\nAnswer: ", "It is 5.<eos>", "4"),
    ("Question: " + "Some context. " * 20 + "What is 3*3?\nAnswer: ", "So \\boxed{9}<eos>", "9"),
]


def score_requests(url: str, route: str) -> int:
    text = httpx.get(f"{url}/metrics").text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("reward_http_requests_total{")
                   and f'route="{route}"' in line))


def run_0_11(url: str, n: int, tokenizer) -> dict:  # type: ignore[no-untyped-def]
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    executor = SingleTurnAgentExecutor(f"{url}/get_reward")
    engine = Engine(tokenizer, {p[-24:]: c for p, c, _ in SAMPLES})
    # max_new_tokens 64, max_len 160: the long prompt (~330 characters) is cut from the left
    params = SimpleNamespace(max_tokens=64, logprobs=None)

    async def one(i: int) -> dict:
        prompt, _, label = SAMPLES[i % len(SAMPLES)]
        return await executor.execute(prompt, label, params, 160, tokenizer, engine)

    async def all_of() -> list[dict]:
        return await asyncio.gather(*(one(i) for i in range(n)))

    before = score_requests(url, "get_reward")
    t0 = time.perf_counter()
    outputs = asyncio.run(all_of())
    elapsed = time.perf_counter() - t0
    return {"rewards": [o["reward"] for o in outputs],
            "extra_logs": outputs[2]["extra_logs"],
            "cut_query": tokenizer.decode(outputs[2]["observation_tokens"])[:40],
            "requests": score_requests(url, "get_reward") - before,
            "items_per_s": n / elapsed}


def run_0_9(url: str, n: int) -> dict:
    from openrlhf.utils.remote_rm_utils import request_api_wrapper

    prompts = [SAMPLES[i % len(SAMPLES)][0] for i in range(n)]
    queries = [p + SAMPLES[i % len(SAMPLES)][1] for i, p in enumerate(prompts)]
    labels = [SAMPLES[i % len(SAMPLES)][2] for i in range(n)]
    t0 = time.perf_counter()
    reply = request_api_wrapper(f"{url}/get_reward",
                                {"query": queries, "prompts": prompts, "labels": labels})
    elapsed = time.perf_counter() - t0
    return {"rewards": reply["rewards"], "items_per_s": n / elapsed}


def main() -> None:
    url, n = sys.argv[1], int(sys.argv[2])
    root = bare_packages()
    version = next(root.parent.glob("openrlhf-*.dist-info")).name.removesuffix(".dist-info")
    version = version.split("-")[1]
    from trainer_client.model.tiny_model import build_char_tokenizer

    tokenizer = build_char_tokenizer()
    if (root / "utils" / "remote_rm_utils.py").exists():  # 0.9.0 and older: whole batches
        out = run_0_9(url, n)
    else:
        out = run_0_11(url, n, tokenizer)
    print(json.dumps({"openrlhf": version, **out}))


if __name__ == "__main__":
    main()
