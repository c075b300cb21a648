"""Command lines: ``grpo-train`` and ``grpo-eval``.

    grpo-train --config configs/tiny-cpu.yaml [--output-dir DIR] [--reward-url URL]
               [--max-steps N] [--resume] [--backend ray|local]
    grpo-eval --model PATH [--model PATH ...] --data FILE|toy [--config CONFIG]
              [--reward-url URL] [--limit N]

The reward service's bearer token, if it has one, is read from ``REWARD_API_TOKEN`` here
(the entry point) and passed down. Exit codes: 0 done, 1 bad usage or failure (a bad config,
including an unknown logger, a missing logger package or an unwritable output directory,
found before the model loads; a full disk mid-run), 2 reward service not reachable at start,
130 stopped by a signal (after a final checkpoint).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["eval_main", "train_main"]

logger = logging.getLogger("trainer_client")


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper()),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import transformers

        transformers.utils.logging.disable_progress_bar()
        transformers.utils.logging.set_verbosity_error()
    except ImportError:  # pragma: no cover
        pass


def _train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpo-train", description="GRPO with rewards from the "
                                "reward service.")
    p.add_argument("--config", required=True, help="YAML config (see configs/)")
    p.add_argument("--output-dir", help="overrides run.output_dir")
    p.add_argument("--reward-url", action="append",
                   help="reward service base URL (repeat for failover); overrides reward.urls")
    p.add_argument("--max-steps", type=int, help="total steps (overrides run.steps)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint")
    p.add_argument("--backend", choices=["ray", "local"], help="overrides run.backend")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"])
    return p


def train_main(argv: list[str] | None = None) -> int:
    args = _train_parser().parse_args(argv)
    _setup_logging(args.log_level)
    from tqdm import tqdm

    from trainer_client.config import load_config
    from trainer_client.errors import RewardServiceUnavailable
    from trainer_client.model.checkpoint import latest_checkpoint, read_trainer_state
    from trainer_client.tracking import DiskFullError, TrackingConfigError
    from trainer_client.trainer import train

    overrides: dict[str, Any] = {}
    if args.reward_url:
        overrides["reward"] = {"urls": args.reward_url}
    if args.backend:
        overrides["run"] = {"backend": args.backend}
    try:
        cfg = load_config(args.config, overrides=overrides)
    except (OSError, ValueError, TypeError) as e:
        sys.stderr.write(f"grpo-train: bad config: {e}\n")
        return 1
    total = args.max_steps if args.max_steps is not None else cfg.run.steps
    out = Path(args.output_dir or cfg.run.output_dir)

    stop = threading.Event()
    signalled: list[int] = []

    def on_signal(sig: int, frame: FrameType | None) -> None:
        signalled.append(sig)  # only flags; the loop stops at the next step boundary
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    bars: list[Any] = []  # created at the first step: start-up time is not in the rate

    def progress(step: int, row: dict[str, Any]) -> None:
        if args.no_progress:
            return
        if not bars:
            bars.append(tqdm(total=total, initial=step - 1, desc="grpo", unit="step",
                             dynamic_ncols=True))
        bar = bars[0]
        bar.n = step
        post = {"reward": row.get("rewards/mean")}
        if row.get("eval/accuracy") is not None:
            post["eval"] = row["eval/accuracy"]
        if row.get("rewards/status/unavailable"):
            post["unavail"] = row["rewards/status/unavailable"]
        bar.set_postfix({k: f"{v:.3f}" for k, v in post.items() if v is not None},
                        refresh=False)
        bar.refresh()

    try:
        result = train(cfg, output_dir=out, resume=args.resume, max_steps=args.max_steps,
                       api_token=os.environ.get("REWARD_API_TOKEN"), stop=stop,
                       progress=progress)
    except RewardServiceUnavailable as e:
        sys.stderr.write(f"grpo-train: reward service not reachable: {e}\n")
        return 2
    except TrackingConfigError as e:  # raised before the model loads
        sys.stderr.write(f"grpo-train: bad config: {e}\n")
        return 1
    except DiskFullError as e:
        ck = latest_checkpoint(out / "checkpoints")
        where = (f"newest checkpoint: step {read_trainer_state(ck)['step']} ({ck}); free "
                 "space, then run again with --resume" if ck is not None
                 else "no checkpoint was saved; free space, then run again")
        sys.stderr.write(f"grpo-train: stopped: {e}. Every line written so far is "
                         f"complete; {where}\n")
        return 1
    finally:
        for b in bars:
            b.close()
        for s, h in old.items():
            signal.signal(s, h)
    sys.stdout.write(f"metrics:     {result.metrics_path}\n"
                     f"plot:        {result.plot_path}\n"
                     f"checkpoints: {result.output_dir / 'checkpoints'}\n")
    return 130 if signalled else 0


def _eval_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpo-eval", description="Greedy accuracy of models on "
                                "the same problems, scored by the reward service.")
    p.add_argument("--model", action="append", required=True,
                   help="HF model dir (repeat to compare, e.g. base and trained)")
    p.add_argument("--data", help="JSONL (GSM8K or MATH format) or 'toy'; default: the "
                   "config's eval split")
    p.add_argument("--format", choices=["auto", "gsm8k", "math", "toy"], default="auto")
    p.add_argument("--config", help="training config: template, allowed chars, "
                   "max_new_tokens, reward URLs and the eval split come from it")
    p.add_argument("--reward-url", action="append", help="reward service URL(s)")
    p.add_argument("--limit", type=int, default=200, help="at most N problems")
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--log-level", default="warning",
                   choices=["debug", "info", "warning", "error"])
    return p


def eval_main(argv: list[str] | None = None) -> int:
    args = _eval_parser().parse_args(argv)
    _setup_logging(args.log_level)
    from trainer_client.config import load_config
    from trainer_client.data import DataSettings, load_jsonl_problems, load_problems
    from trainer_client.errors import RewardClientError
    from trainer_client.evaluate import EvalSettings, evaluate_model, format_table
    from trainer_client.reward_client import RewardClient
    from trainer_client.trainer import client_settings

    # the config (if any) gives template, allowed chars, lengths, URLs and the eval split
    overrides: dict[str, Any] = {"model": {"path": "unused"}}
    if args.reward_url:
        overrides["reward"] = {"urls": args.reward_url}
    cfg = load_config(args.config, overrides=overrides)
    data = cfg.data if args.config else DataSettings()
    if args.data is None:
        if not args.config:
            sys.stderr.write("grpo-eval: give --data or --config\n")
            return 1
        _, problems = load_problems(data)
    elif args.data == "toy" or args.format == "toy":
        _, problems = load_problems(data if data.format == "toy" else DataSettings(format="toy"))
    else:
        fmt = args.format
        if fmt == "auto":
            first = Path(args.data).read_text(encoding="utf-8").split("\n", 1)[0]
            fmt = "gsm8k" if "####" in first else "math"
        problems = load_jsonl_problems(args.data, fmt, limit=args.limit)
    problems = problems[: args.limit]
    settings = EvalSettings(
        max_new_tokens=args.max_new_tokens or (cfg.rollout.max_new_tokens if args.config
                                               else 512),
        allowed_chars=cfg.rollout.allowed_chars if args.config else None,
        template=data.template, use_chat_template=data.use_chat_template,
        system_prompt=data.system_prompt, max_wait_s=cfg.reward.step_max_wait_s)
    scores = []
    try:
        with RewardClient(client_settings(cfg, os.environ.get("REWARD_API_TOKEN"))) as client:
            client.wait_ready(timeout_s=cfg.reward.ready_timeout_s)
            for m in args.model:
                scores.append(evaluate_model(m, problems, client, settings, cfg.rollout.engine))
    except RewardClientError as e:
        sys.stderr.write(f"grpo-eval: reward service: {e}\n")
        return 2
    sys.stdout.write(format_table(scores) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(train_main())
