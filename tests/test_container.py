"""The container image, built and run for real with podman (``../shared/tools/image-check``).

1. ``image-check`` builds the Dockerfile, runs the image as a default container (non-root,
   default seccomp profile, host network, ``-e PORT``), waits for ``/readyz`` and runs
   ``deploy/smoke.py`` on the host: a real ``POST /v1/score`` with known verdicts.
2. The same image with the privileges the full sandbox needs (``--user 0 --cap-add
   SYS_ADMIN``, strict mode): every layer is active, it still scores, and ``podman stop``
   is a graceful stop (exit 143 after "pool stopped").
3. ``podman stop`` while a batch is being scored: the batch is answered in full.

Skipped, with the reason, where there is no podman, no image-check or no root. The first
build on a fresh machine takes minutes (debootstrap of the base, pip install); later runs
reuse podman's layer cache: about 30-60 s for the three tests here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.helpers import ROOT, free_port, wait_until

pytestmark = pytest.mark.container

IMAGE_CHECK = ROOT.parent / "shared" / "tools" / "image-check"
IMAGE = "localhost/reward-service:test"
LAYERS = {"clean_env", "rlimits", "netns", "landlock", "uid", "seccomp"}


def _unavailable() -> str | None:
    if not IMAGE_CHECK.exists():
        return f"no image-check at {IMAGE_CHECK}"
    if shutil.which("podman") is None or shutil.which("runc") is None:
        return "podman/runc not installed (image-check needs them)"
    if os.geteuid() != 0:
        return "image-check needs root (rootful podman, debootstrap)"
    return None


def _podman(*args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    """podman as image-check runs it here (runc + cgroupfs)."""
    cmd = ["podman", "--runtime", shutil.which("runc") or "runc", "--cgroup-manager=cgroupfs",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]


def _wait_ready(base: str, name: str, timeout_s: float = 120) -> None:
    """Poll the container's /readyz until 200; fail with its logs after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail("not ready: " + _podman("logs", name).stderr[-3000:])


@pytest.fixture(scope="module")
def built_image() -> Iterator[dict]:
    """Build + default run + smoke through image-check; yield what the smoke printed."""
    reason = _unavailable()
    if reason:
        pytest.skip(reason)
    port = free_port()
    env = {**os.environ, "IMAGE": IMAGE, "BUILD_OPTS": "--format docker",
           "SMOKE": "python3 deploy/smoke.py", "WAIT": "180"}
    t0 = time.monotonic()
    proc = subprocess.run([str(IMAGE_CHECK), ".", str(port), "/readyz"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    smoke = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert smoke, proc.stdout[-2000:]
    print(f"image-check: {time.monotonic() - t0:.0f}s")
    yield json.loads(smoke[-1])


@pytest.mark.timeout(1800)
def test_image_builds_serves_and_scores_by_default(built_image: dict) -> None:
    assert built_image["statuses"] == ["correct", "correct", "incorrect", "no_answer", "correct"]
    assert built_image["sandbox_mode"] == "best-effort"  # the image's default
    layers = built_image["layers"]
    assert set(layers) == LAYERS
    # what a default, non-root container can always give; netns depends on the runtime's
    # seccomp profile (podman's allows a user namespace, Docker's does not): reported either way
    assert {layers[k] for k in ("clean_env", "rlimits", "seccomp")} == {"active"}
    assert layers["uid"] == "unavailable"  # already unprivileged: no uid to drop to
    assert layers["netns"] in ("active", "unavailable")
    size = _podman("image", "inspect", IMAGE, "--format", "{{.Size}}").stdout.strip()
    print(f"image size: {int(size) / 1e6:.0f} MB")


@pytest.mark.timeout(1800)
def test_privileged_container_runs_the_strict_sandbox(built_image: dict) -> None:
    port = free_port()
    name = f"reward-test-{os.getpid()}"
    run = _podman(
        "run", "-d", "--name", name, "--network", "host",
        "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
        "--user", "0", "--cap-add", "SYS_ADMIN",
        "-e", f"PORT={port}", "-e", "REWARD_SANDBOX=strict", "-e", "REWARD_WORKERS=1",
        IMAGE, timeout=120,
    )
    assert run.returncode == 0, run.stderr
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(base, name)
        smoke = subprocess.run(["python3", "deploy/smoke.py", base], cwd=ROOT,
                               capture_output=True, text=True, timeout=120)
        assert smoke.returncode == 0, smoke.stderr
        report = json.loads(smoke.stdout)
        assert report["sandbox_mode"] == "strict"
        assert report["layers"] == {k: "active" for k in LAYERS}
        # SIGTERM reaches the server through tini: it drains, stops the pool, and re-raises
        stop = _podman("stop", "-t", "40", name, timeout=120)
        assert stop.returncode == 0, stop.stderr
        out = _podman("logs", name)
        logs = out.stdout + out.stderr
        assert "sandbox layers" in logs and "inactive=none" in logs, logs[-2000:]
        assert "pool stopped" in logs, logs[-2000:]
        code = _podman("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "143", code  # 128 + SIGTERM: a graceful stop
    finally:
        _podman("rm", "-f", name, timeout=120)


@pytest.mark.timeout(1800)
def test_docker_stop_drains_the_request_in_flight(built_image: dict) -> None:
    """SIGTERM through tini while a large batch runs: the batch is answered in full."""
    import threading

    port = free_port()
    name = f"reward-drain-{os.getpid()}"
    run = _podman("run", "-d", "--name", name, "--network", "host",
                  "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
                  "-e", f"PORT={port}", "-e", "REWARD_WORKERS=2", "-e", "REWARD_DRAIN_S=90",
                  IMAGE, timeout=120)
    assert run.returncode == 0, run.stderr
    base = f"http://127.0.0.1:{port}"
    items = [{"response": f"so \\boxed{{{k}}}", "ground_truth": str(k + k % 2)}
             for k in range(3000)]  # distinct items: no cache or dedup shortcut
    reply: dict = {}

    def score() -> None:
        try:
            r = httpx.post(base + "/v1/score", json={"items": items}, timeout=150)
            reply.update(code=r.status_code, text=r.text, at=time.monotonic())
        except httpx.HTTPError as exc:  # reported by the assertions below
            reply.update(error=repr(exc))

    try:
        _wait_ready(base, name)
        client = threading.Thread(target=score)
        client.start()
        # stop once the batch is admitted and being scored (before that it would get 503)
        assert wait_until(
            lambda: httpx.get(base + "/v1/info", timeout=5).json()["workers"]["outstanding_items"]
            > 0, timeout_s=60, interval_s=0.05,
        ), reply
        stop_at = time.monotonic()
        stop = _podman("stop", "-t", "120", name, timeout=180)
        client.join(timeout=180)
        assert stop.returncode == 0, stop.stderr
        assert reply.get("code") == 200, reply
        assert reply["at"] > stop_at, "the batch finished before the stop: nothing was drained"
        body = json.loads(reply["text"])
        print(f"drain: batch answered {reply['at'] - stop_at:.1f}s after podman stop")
        assert body["count"] == len(items)
        assert body["statuses"]["correct"] + body["statuses"]["incorrect"] == len(items)
        code = _podman("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
        assert code == "143", code
    finally:
        _podman("rm", "-f", name, timeout=120)
