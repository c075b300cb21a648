"""The Ray Serve app (deploy/ray/) with 2 replicas of 1 worker against the plain service with 2
workers: same rows, same run, the plain service measured right before and right after.

Two client patterns, each over all the rows on its own freshly started service or freshly
deployed replicas (no pass replays rows a service has parsed; a half-corpus pass lasted under a
second, where ramp-up and tail weighed as much as the steady state): the trainer's default (``RewardClient``: 4096 items per call as 512-item requests, 4
in flight) and one 512-item request after another. Serve routes a whole request to one
replica; the app splits a large request over the replicas itself (``deploy/ray/fanout.py``).
Where the difference goes: the CPU seconds each kind of process used during the pass (this
process's descendants, from ``/proc``): workers, the server(s) (the FastAPI process, or the
Serve replicas), Serve's HTTP proxy and Ray's own daemons; how busy the workers were; and the
round trip of one single-item request through each service (the fixed cost per request), with
the CPU it costs each kind of process, next to that of a no-op Serve app through the same proxy
(Serve's own fixed cost on this machine).
"""

from __future__ import annotations

import http.client
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from bench import scenarios as sc
from bench.base import Context, Section
from bench.ray_serve.handle import HandleTarget, busy, cpu_per_item, handle_figures, handle_report
from bench.targets.overhead import HEADERS, TRIVIAL
from tests.helpers import ROOT, cpu_seconds, descendants_of, free_port, wait_until

APP_DIR = ROOT / "deploy" / "ray"


def _descendants() -> dict[int, tuple[str, float]]:
    """pid -> (role, CPU seconds) for every descendant of this process."""
    out = {}
    for pid in descendants_of(os.getpid()):
        cpu = cpu_seconds(pid)
        if cpu is not None:
            out[pid] = (_role(pid), cpu)
    return out


def _role(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ")
    except OSError:
        return "gone"
    if b"reward_service.sandboxed.zygote" in cmd or b"reward-worker" in cmd:
        return "workers (zygote and its children)"
    if b"ServeReplica" in cmd:
        return "server (Serve replicas)"
    if b"reward_service serve" in cmd or b"reward_service.cli" in cmd:
        return "server (FastAPI process)"
    if b"ProxyActor" in cmd:
        return "Serve HTTP proxy"
    if b"ServeController" in cmd:
        return "Serve controller"
    if b"raylet" in cmd or b"gcs_server" in cmd or b"ray" in cmd:
        return "Ray daemons and other actors"
    return "other"


def _cpu_by_role(before: dict[int, tuple[str, float]],
                 after: dict[int, tuple[str, float]], digits: int = 2) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, (role, cpu) in after.items():
        prev = before.get(pid, (role, 0.0))[1]
        out[role] = out.get(role, 0.0) + cpu - prev
    floor = 0.5 * 10 ** -digits
    return {k: round(v, digits) for k, v in sorted(out.items()) if v > floor}


class _Url:
    """What ``scenarios.service_throughput`` needs of a service."""

    def __init__(self, url: str) -> None:
        self.url = url


PATTERNS = (("client_defaults", {"batch": 4096, "chunk": 512, "in_flight": 4}),
            ("sequential_512", {"batch": 512}))


def _floor(url: str, n: int = 100, path: str = "/v1/score") -> dict[str, Any]:
    """A trivial single-item request (``bench.targets.overhead.TRIVIAL``, scored in about 0.1 ms) ``n``
    times on one keep-alive connection: the fixed cost of one request. ``ms``: the p50 round
    trip; ``cpu_ms``: CPU ms per request by process kind (this process's descendants), which
    says whether that time is work or waiting."""
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    body = orjson.dumps({"items": [TRIVIAL]})

    def one() -> float:
        t0 = time.perf_counter()
        conn.request("POST", path, body=body, headers=HEADERS)
        resp = conn.getresponse()
        payload = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"{path} answered {resp.status}: {payload[:300]!r}")
        return (time.perf_counter() - t0) * 1000

    try:
        one()
        before = _descendants()
        ms = statistics.median(one() for _ in range(n))
        cpu = _cpu_by_role(before, _descendants(), digits=4)
    finally:
        conn.close()
    return {"ms": ms, "cpu_ms": {k: round(v * 1000 / n, 2) for k, v in cpu.items()}}


def _noop_app() -> Any:
    """A Serve deployment that does nothing (an HTTP ``__call__`` that reads the body and
    answers a constant; one replica, no CPU reserved): Serve's own fixed cost for one request
    with a body on this machine, through the same proxy, next to the reward app's."""
    from ray import serve

    @serve.deployment(name="noop", num_replicas=1, ray_actor_options={"num_cpus": 0})
    class Noop:
        async def __call__(self, request: Any) -> dict[str, int]:  # a starlette Request
            return {"bytes": len(await request.body())}

    return Noop.bind()  # type: ignore[attr-defined]


def _pattern(target: Any, rows: list[dict[str, Any]], kwargs: dict[str, Any]) -> dict[str, Any]:
    """One client pattern over ``rows`` on a service that has seen none of them. ``cpu_s``:
    the service's processes (this process's descendants); ``client_cpu_s``: this process,
    the caller (httpx, or the handle's serialisation and Ray's core worker threads)."""
    t0, c0 = _descendants(), time.process_time()
    r = sc.service_throughput(target, rows, timeout_s=None, **kwargs)
    return {"items_s": r["items_s"], "seconds": r["seconds"],
            "cpu_s": _cpu_by_role(t0, _descendants()),
            "client_cpu_s": time.process_time() - c0, "verdicts": r["verdicts"]}


def _plain(ctx: Context, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each pattern over all of ``rows`` on its own freshly started, warmed service (a second
    pass on one service would replay what the workers' memos hold), then the floor."""
    out: dict[str, Any] = {}
    for name, kwargs in PATTERNS:
        with ctx.service(2) as svc:
            sc.service_throughput(svc, ctx.warm_rows, 512, timeout_s=30.0)
            out[name] = _pattern(svc, rows, kwargs)
            if name == PATTERNS[-1][0]:
                out["floor"] = _floor(svc.url)
    return out


def import_reward_app() -> Any:
    """deploy/ray/reward_app.py as a module (its directory is not a package)."""
    sys.path.insert(0, str(APP_DIR))
    try:
        import reward_app
    finally:
        sys.path.remove(str(APP_DIR))
    return reward_app


def _start_proxy(port: int) -> bool:
    """``serve.start`` on ``port``: True when Serve's proxy bound it, False when it could not
    (another process bound the port first; ``serve.start`` waits for the proxy's ready)."""
    from ray import serve
    from ray.exceptions import RayTaskError

    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
    except RayTaskError as exc:
        if "Failed to bind" not in str(exc):
            raise
        return False
    return True


@contextmanager
def local_serve(app: Any, name: str, *, pick_port: Callable[[], int] = free_port,
                attempts: int = 4, ready_timeout_s: float = 300.0) -> Iterator[str]:
    """A local Ray (2 CPUs, no dashboard), Serve's HTTP proxy on a loopback port and ``app``
    deployed as ``name``; yields its base URL once ``/readyz`` answers 200, and shuts Serve
    and Ray down on exit. A port found free can be taken by another process before the proxy
    binds it: then the proxy never becomes healthy, and Serve restarts on a fresh port."""
    import ray
    from ray import serve

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"working_dir": str(APP_DIR)})  # replicas import reward_app from here
    try:
        for _ in range(attempts):
            port = pick_port()
            if _start_proxy(port):
                break
            serve.shutdown()
        else:
            raise RuntimeError(f"Serve's proxy did not bind any of {attempts} ports")
        serve.run(app, name=name, route_prefix="/", blocking=False)
        url = f"http://127.0.0.1:{port}"
        if not wait_until(lambda: _ready(url), timeout_s=ready_timeout_s, interval_s=0.2):
            raise RuntimeError(f"Serve app not ready: {serve.status()}")
        yield url
    finally:
        serve.shutdown()
        ray.shutdown()


def _ray(ctx: Context, rows: list[dict[str, Any]]) -> dict[str, Any]:
    import httpx
    from ray import serve

    reward_app = import_reward_app()
    settings = {"workers": 1, "spares": 1, "cache_items": 0, "max_items": 16384,
                "log_level": "warning"}

    def app(replicas: int = 2, workers: int = 1) -> Any:
        return reward_app.build_app({"settings": {**settings, "workers": workers},
                                     "num_replicas": replicas})

    out: dict[str, Any] = {}
    t0 = time.monotonic()
    with local_serve(app(), "reward-bench") as url:
        out["start_s"] = time.monotonic() - t0
        # each pass on fresh replicas (fresh pools), as for the plain service: over HTTP
        # through Serve's proxy, then through the deployment handle (RayRewardClient)
        passes = [(name, _Url(url), kwargs) for name, kwargs in PATTERNS]
        passes += [(f"handle_{name}", HandleTarget("reward-bench"), kwargs) for name, kwargs in PATTERNS]

        def fresh(application: Any) -> None:  # redeployed: fresh replicas, fresh pools
            serve.delete("reward-bench")
            serve.run(application, name="reward-bench", route_prefix="/", blocking=False)
            if not wait_until(lambda: _ready(url), timeout_s=300.0, interval_s=0.2):
                raise RuntimeError(f"Serve app not ready again: {serve.status()}")

        def measure(key: str, target: Any, kwargs: dict[str, Any]) -> None:
            sc.service_throughput(target, ctx.warm_rows, 512, timeout_s=30.0)
            out[key] = _pattern(target, rows, kwargs)

        for i, (key, target, kwargs) in enumerate(passes):
            if i:
                fresh(app())
            measure(key, target, kwargs)
        out["floor"] = _floor(url)
        serve.run(_noop_app(), name="noop-floor", route_prefix="/noop", blocking=False)

        def noop_routed() -> bool:  # the proxy learns the new route by long poll
            try:
                return httpx.post(url + "/noop/v1/score", content=b"{}", timeout=2.0).is_success
            except httpx.HTTPError:
                return False

        if not wait_until(noop_routed, timeout_s=60.0, interval_s=0.2):
            raise RuntimeError(f"no-op Serve app not routed: {serve.status()}")
        out["noop_floor"] = _floor(url, path="/noop/v1/score")
        # the handle passes again on one replica holding both workers, as the deployment
        # places replicas on a 2-core node (num_cpus = workers): one server process, one
        # zygote and spare, one set of Ray replica threads, like the plain service
        for name, kwargs in PATTERNS:
            fresh(app(replicas=1, workers=2))
            measure(f"handle1_{name}", HandleTarget("reward-bench"), kwargs)
        # issue 40: the handle target is decided on the median of several fresh passes (the
        # 1 x 2 shape met 0.85 in one session and missed it in the next with the same code)
        defaults = dict(PATTERNS)["client_defaults"]
        for k in range(1, ctx_passes(ctx)):
            for key, shape in (("handle", app()), ("handle1", app(replicas=1, workers=2))):
                fresh(shape)
                measure(f"{key}_client_defaults_{k}", HandleTarget("reward-bench"), defaults)
        return out


HANDLE_PASSES, QUICK_HANDLE_PASSES = 5, 2


def ctx_passes(ctx: Context) -> int:
    """Fresh handle-client passes (client defaults) of each shape."""
    return QUICK_HANDLE_PASSES if ctx.quick else HANDLE_PASSES


def _ready(url: str) -> bool:
    import httpx

    try:
        return httpx.get(url + "/readyz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _cores(p: dict[str, Any]) -> float:
    """Cores the service kept busy during the pass (all its CPU seconds / wall)."""
    return sum(p["cpu_s"].values()) / p["seconds"]


def run(ctx: Context) -> dict[str, Any]:
    rows = list(ctx.rows[:1500] if ctx.quick else ctx.rows)
    ctx.log("ray serve: plain service (2 workers) ...")
    first = _plain(ctx, rows)
    ctx.log("ray serve: Serve app, 2 replicas x 1 worker ...")
    serve_out = _ray(ctx, rows)
    ctx.log("ray serve: plain service again ...")
    last = _plain(ctx, rows)
    out: dict[str, Any] = {"rows": len(rows), "start_s": serve_out.pop("start_s"),
                           "plain_floor_ms": [first["floor"]["ms"], last["floor"]["ms"]],
                           "ray_floor_ms": serve_out["floor"]["ms"],
                           "noop_floor_ms": serve_out["noop_floor"]["ms"],
                           "plain_floor_cpu_ms": first["floor"]["cpu_ms"],
                           "ray_floor_cpu_ms": serve_out["floor"]["cpu_ms"],
                           "noop_floor_cpu_ms": serve_out["noop_floor"]["cpu_ms"]}
    for name, _ in PATTERNS:
        plain = (first[name]["items_s"] + last[name]["items_s"]) / 2
        ray_pass = serve_out[name]
        out[name] = {
            "plain_items_s": [first[name]["items_s"], last[name]["items_s"]],
            "ray_items_s": ray_pass["items_s"], "ratio": ray_pass["items_s"] / plain,
            "plain_cpu_s": first[name]["cpu_s"], "ray_cpu_s": ray_pass["cpu_s"],
            "plain_seconds": first[name]["seconds"], "ray_seconds": ray_pass["seconds"],
            "workers_busy": [busy(first[name]), busy(ray_pass)],
            "cpu_ms_per_item": [cpu_per_item(first[name], len(rows)),
                                cpu_per_item(ray_pass, len(rows))],
            "cores_used": [_cores(first[name]), _cores(ray_pass)],
            "mismatches": sum(a != b for a, b in zip(ray_pass["verdicts"],
                                                     first[name]["verdicts"], strict=True))}
        for key in (f"handle_{name}", f"handle1_{name}"):
            out[key] = handle_figures(serve_out[key], (first[name], last[name]), len(rows))
    for key in ("handle", "handle1"):  # every fresh pass's CPU ratio, each against both plain
        plain = (first["client_defaults"], last["client_defaults"])
        runs = [serve_out[f"{key}_client_defaults"]] + [
            serve_out[f"{key}_client_defaults_{k}"] for k in range(1, ctx_passes(ctx))]
        out[f"{key}_client_defaults"]["passes_cpu_ratio"] = [
            handle_figures(p, plain, len(rows))["cpu_ratio"] for p in runs]
    return out


def report(r: dict[str, Any]) -> str:
    def cpu(d: dict[str, float]) -> str:
        return ", ".join(f"{k} {v:.2f}" for k, v in d.items())

    lines = [f"""## Ray Serve: 2 replicas x 1 worker vs the plain service with 2 workers

{r['rows']} corpus rows, one run: the plain service, then the Serve app (local Ray, 2 CPUs;
ready {r['start_s']:.0f} s after `ray.init`; a large request that reaches an idle replica is
split over both replicas, `deploy/ray/fanout.py`), then the plain service again; each client
pattern over all the rows on its own fresh service (fresh replicas for Serve); ratio = Serve /
mean of the two plain passes. CPU seconds by process kind during each pass (the plain pass is
the first one); workers busy = their CPU / (2 x wall). CPU ratio = plain CPU per item / Serve
CPU per item (every process of each service): what Serve / plain would be if both kept the two
cores equally busy; on this machine, where Ray's processes share the workers' two cores, it is
the ceiling that Serve's own CPU leaves.
One trivial single-item request (p50, keep-alive `http.client`): plain
{r['plain_floor_ms'][0]:.1f} / {r['plain_floor_ms'][1]:.1f} ms, through Serve
{r['ray_floor_ms']:.1f} ms; Serve's own floor, a no-op app (an HTTP `__call__`, one replica, the same
proxy, reads the body): {r['noop_floor_ms']:.1f} ms. CPU ms per such request, by process kind:
plain: {cpu(r['plain_floor_cpu_ms'])}. Serve: {cpu(r['ray_floor_cpu_ms'])}.
No-op: {cpu(r['noop_floor_cpu_ms'])}.

| client pattern | plain items/s (before, after) | Serve items/s | Serve / plain | CPU ms/item plain, Serve | cores busy plain, Serve | CPU ratio | verdict mismatches |
|---|---:|---:|---:|---:|---:|---:|---:|"""]
    for name, label in (("client_defaults", "RewardClient defaults (512-item requests, 4 in flight)"),
                        ("sequential_512", "one 512-item request after another")):
        v = r[name]
        per, cores = v["cpu_ms_per_item"], v["cores_used"]
        lines.append(f"| {label} | {v['plain_items_s'][0]:.0f}, {v['plain_items_s'][1]:.0f} | "
                     f"{v['ray_items_s']:.0f} | **{v['ratio']:.2f}** | {per[0]:.3f}, {per[1]:.3f} | "
                     f"{cores[0]:.2f}, {cores[1]:.2f} | {per[0] / per[1]:.2f} | "
                     f"{v['mismatches']} |")
    lines += handle_report(r, [name for name, _ in PATTERNS])
    lines.append("")
    for name, _ in PATTERNS:
        v = r[name]
        fmt = lambda d: ", ".join(f"{k} {s:.1f}" for k, s in d.items())  # noqa: E731
        busy = v["workers_busy"]
        lines.append(f"* {name}: plain {v['plain_seconds']:.1f} s wall, workers busy "
                     f"{busy[0]:.0%}, CPU s: {fmt(v['plain_cpu_s'])}; Serve "
                     f"{v['ray_seconds']:.1f} s wall, workers busy {busy[1]:.0%}, CPU s: "
                     f"{fmt(v['ray_cpu_s'])}.")
    return "\n".join(lines) + "\n"


SECTION = Section("ray", run, report)
