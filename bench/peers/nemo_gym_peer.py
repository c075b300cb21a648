"""NeMo-Gym's math resources server, started from the released package (``nemo-gym`` 0.7.0).

Installed by ``make peers`` in its own venv (Python 3.13 from pyenv with
``--ignore-requires-python``: the release asks for >= 3.13.14, which pyenv here lacks; plus
``math-verify==0.8.0``, which the server's own ``requirements.txt`` pins and ``ng_run`` would
install into the server's venv). Started as ``ng_run`` starts each child: ``python app.py`` in
``resources_servers/math_with_judge`` with the resolved config in ``NEMO_GYM_CONFIG_DICT`` and
its name in ``NEMO_GYM_CONFIG_PATH`` (``nemo_gym/cli/env.py``), ``should_use_judge: false`` as
shipped, on loopback. No head server, Ray or model server is started: the resources server
needs none of them to answer ``/verify`` (its judge is never called).

What its ``/verify`` does (``app.py``): no ``\\boxed{}`` in the response is 0.0 at once;
otherwise it forks one child per request (at most ``library_verifier_max_concurrency`` = 32 at
once), polls it every 50 ms and kills it after ``library_verifier_timeout_seconds`` = 10 s.
A killed child, a child that died and a wrong answer all reply ``reward: 0.0`` with
``extracted_answer: null`` and HTTP 200: the caller cannot tell a timeout from a verdict, so
they are counted as verdicts here (``silent_zero`` counts the hostile items answered that
way).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.peers.items import Answer
from bench.peers.venvs import PeerVenv
from tests.helpers import free_port

HERE = Path(__file__).resolve().parent


class NemoGymServer:
    """The released ``math_with_judge`` server on a free loopback port; stops its whole
    process group (the server and any verify child it forked) on exit."""

    def __init__(self, venv: PeerVenv, log_path: Path | None = None) -> None:
        self.venv = venv
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"nemo-gym-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def resolved(self) -> dict[str, Any]:
        """The server's folder and resolved config, from NeMo-Gym's own parser."""
        out = subprocess.run(
            [str(self.venv.python), "-I", str(HERE / "nemo_gym_config.py"), str(self.port),
             str(free_port())], capture_output=True, text=True, timeout=120, check=False,
            cwd=tempfile.gettempdir())  # its parser names folders under the working directory
        if out.returncode != 0:
            raise RuntimeError(f"NeMo-Gym config did not resolve: {out.stderr[-2000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]

    def start(self, timeout_s: float = 120.0) -> NemoGymServer:
        cfg = self.resolved()
        env = {**os.environ, "NEMO_GYM_CONFIG_DICT": cfg["config"],
               "NEMO_GYM_CONFIG_PATH": "math_with_judge"}
        env.pop("PYTHONPATH", None)  # its own packages only
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen([str(self.venv.python), "app.py"], cwd=cfg["dir"], env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"NeMo-Gym exited {self.proc.returncode}: {self.log()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"NeMo-Gym not up after {timeout_s}s: {self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # forked verify children left behind
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()
        self.proc = None

    def __enter__(self) -> NemoGymServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def classify(status: int, payload: dict[str, Any] | None, text: str) -> Answer:
    """NeMo-Gym's reply: HTTP 200 is a verdict (``reward``; see the module doc for the silent
    0.0 of a killed child); anything else an error."""
    if payload is None:
        return Answer("error", detail=f"HTTP {status}: {text}")
    extracted = payload.get("extracted_answer")
    return Answer("verdict", correct=payload.get("reward") == 1.0,
                  extracted=None if extracted is None else str(extracted),
                  detail="silent_zero" if payload.get("reward") == 0.0 and extracted is None
                  else None)
