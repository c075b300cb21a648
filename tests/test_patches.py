"""The library patches' one entry (``reward_service/scorers/patches/__init__.py``): a setting
that runs the libraries as released, and a start-up check that installs nothing on a library
version the patches were not proven against, and says so.

Real pools and forked workers (the ``library_patches`` probe reports what a worker runs);
fresh interpreters for the version check (a process that installed the patches keeps them).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

from reward_service.sandboxed.worker import PROBE_PREFIX
from reward_service.scorers.patches import PROVEN, version_mismatches
from reward_service.server.pool import Task, WorkerPool
from reward_service.settings import Settings
from tests.helpers import ROOT

_PROBE = Task(PROBE_PREFIX + "library_patches", "{}", "", 30.0)


def _worker_reports(**settings: object) -> list[dict[str, bool]]:
    async def main() -> list[dict[str, bool]]:
        pool = WorkerPool(Settings(workers=2, spares=0, enable_test_probes=True, **settings))
        await pool.start()
        try:
            outs = await pool.submit([_PROBE] * 4)
        finally:
            await pool.stop()
        assert all(o.verdict.status == "incorrect" for o in outs), outs  # the probe ran
        return [json.loads(o.verdict.reason or "{}") for o in outs]

    return asyncio.run(main())


@pytest.mark.parametrize("on", [True, False], ids=["default", "REWARD_LIBRARY_PATCHES=false"])
def test_the_setting_runs_the_libraries_as_released(on: bool) -> None:
    reports = _worker_reports(library_patches=on)
    assert reports == [{"installed": on, "tail_scan": on}] * 4


_PROGRAM = """
import json, sys
import math_verify.parser as mv_parser
from reward_service.scorers.patches import install_patches
names = install_patches(proven=json.loads(sys.argv[1]))
print(json.dumps({"names": names,
                  "tail_scan": bool(getattr(mv_parser.extract_target_from_pred, "tail_scan", 0))}))
"""


def _fresh(proven: dict[str, str]) -> tuple[dict[str, object], str]:
    run = subprocess.run([sys.executable, "-c", _PROGRAM, json.dumps(proven)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(run.stdout), run.stderr


def test_a_version_they_were_not_proven_on_gets_no_patch_and_an_error_line() -> None:
    got, err = _fresh({**PROVEN, "math-verify": "0.10.0"})
    assert got == {"names": [], "tail_scan": False}
    assert "library patches not installed: math-verify==0.9.0 (proven on 0.10.0)" in err
    got, err = _fresh(PROVEN)  # the control: the versions they were proven on
    assert got["tail_scan"] is True and "tail_scan" in got["names"] and err == "", err


def test_the_installed_libraries_are_the_proven_ones() -> None:
    """The pins in pyproject.toml and :data:`PROVEN` agree: CI runs the patches."""
    assert version_mismatches() == {}
    assert version_mismatches({"sympy": "0.0"}) == {"sympy": ("0.0", PROVEN["sympy"])}
