"""The frameworks' own released code, pinned, for the tests that run it against the service.

Each framework is installed with ``pip install --no-deps --target`` into its own folder under
``.venv/frameworks/<name>-<version>/`` (never into the venv: verl needs omegaconf, whose
``antlr4-python3-runtime==4.9`` would replace the 4.13 runtime math-verify parses LaTeX
with; OpenRLHF and verl pull GPU stacks). Only the modules the reward path imports are
needed, and the packages listed are those modules' imports that the venv lacks. A test runs
the framework in a fresh interpreter with that folder first on ``PYTHONPATH``
(:func:`run`), so the pytest process never imports it.

    python -m tests.integrations.frameworks install     # what `make frameworks` runs

A test whose framework is not installed is skipped, naming the command that installs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = Path(os.environ.get("REWARD_FRAMEWORKS_DIR", ROOT / ".venv" / "frameworks"))
RUNS = Path(__file__).resolve().parent / "framework_runs"

#: name → the exact packages installed (no dependency resolution: ``--no-deps``).
PINS: dict[str, tuple[str, ...]] = {
    "verl-0.9.1": ("verl==0.9.1", "hydra-core==1.3.2", "omegaconf==2.3.0",
                   "antlr4-python3-runtime==4.9.3", "tensordict==0.10.0", "codetiming==1.4.0",
                   "pyvers==0.1.0", "cloudpickle==3.1.3", "lazy-importer==0.1.0"),
    "openrlhf-0.11.2": ("openrlhf==0.11.2",),
    "openrlhf-0.9.0": ("openrlhf==0.9.0",),
    # what `pip install --dry-run trl==1.16.0` adds to this venv (torch 2.13.0 is kept)
    "trl-1.16.0": ("trl==1.16.0", "accelerate==1.15.0", "datasets==5.2.0", "dill==0.4.1",
                   "multiprocess==0.70.19", "xxhash==4.1.0", "pandas==3.1.1", "pyarrow==26.0.1",
                   "psutil==7.2.2"),
}


def site(name: str) -> Path:
    """The framework's folder, or a skip naming how to install it."""
    path = BASE / name
    if not (path / ".complete").exists():
        pytest.skip(f"{name} is not installed in {BASE}: run `make frameworks` "
                    f"(python -m tests.integrations.frameworks install {name})")
    return path


def install(name: str) -> Path:
    """``pip install --no-deps --target`` the pinned packages (idempotent)."""
    path = BASE / name
    if (path / ".complete").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                    str(path), *PINS[name]], check=True)
    (path / ".complete").write_text("\n".join(PINS[name]) + "\n")
    return path


def run(name: str, script: str, *args: str, timeout_s: float = 240.0,
        env: dict[str, str] | None = None) -> dict:
    """Run ``framework_runs/<script>`` in a fresh interpreter with the framework's folder on
    ``PYTHONPATH``; it prints one JSON object on its last line, returned here."""
    path = site(name)
    proc = subprocess.run(
        [sys.executable, str(RUNS / script), *args],
        env={**os.environ, **(env or {}), "PYTHONPATH": f"{path}{os.pathsep}{ROOT}",
             "PYTHONDONTWRITEBYTECODE": "1", "TOKENIZERS_PARALLELISM": "false"},
        capture_output=True, text=True, timeout=timeout_s, cwd=ROOT,
    )
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, (
        f"{script} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


if __name__ == "__main__":
    if sys.argv[1:2] != ["install"]:
        raise SystemExit("usage: python -m tests.integrations.frameworks install [NAME ...]")
    for framework in sys.argv[2:] or PINS:
        print(f"{framework}: {install(framework)}")
