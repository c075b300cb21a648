"""Every examples/<framework>/replay.py runs against the real service and passes its checks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT, Service

EXAMPLES = sorted((ROOT / "examples").glob("*/replay.py"))


def test_one_example_per_framework() -> None:
    assert {p.parent.name for p in EXAMPLES} == {"nemo_gym", "openrlhf", "slime", "trl", "verl"}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_runs(svc: Service, script) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "REWARD_SERVICE_URL": svc.url}
    out = subprocess.run([sys.executable, str(script)], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reward" in out.stdout or "score" in out.stdout


@pytest.mark.parametrize("script", sorted((ROOT / "examples").glob("*/*.sh")),
                         ids=lambda p: p.parent.name)
def test_launch_scripts_parse(script) -> None:  # type: ignore[no-untyped-def]
    subprocess.run(["bash", "-n", str(script)], check=True, timeout=30)
