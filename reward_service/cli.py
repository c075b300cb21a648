"""Command line: ``reward-service serve [--host --port --workers ...]``.

Every option falls back to its ``REWARD_*`` environment variable, then to the default
(see ``reward_service.settings.Settings``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import math
import os
import signal
import sys
from types import FrameType

import uvicorn
from pydantic import ValidationError

from reward_service import __version__
from reward_service.logs import configure_logging
from reward_service.server.api.connections import (
    connection_cap,
    guarded_protocol,
    raise_nofile_limit,
)
from reward_service.server.api.http_limits import ConnectionLimits
from reward_service.server.app import create_app
from reward_service.server.exposure import exposure_warning
from reward_service.settings import Settings

__all__ = ["main"]

log = logging.getLogger("reward_service")


class _Server(uvicorn.Server):
    """uvicorn's server, telling the pool to refuse new work as soon as SIGTERM arrives."""

    def __init__(self, config: uvicorn.Config, on_exit_signal: object) -> None:
        super().__init__(config)
        self._on_exit_signal = on_exit_signal

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit_signal()  # type: ignore[operator]  # only sets a flag
        super().handle_exit(sig, frame)


def batch_scheduling() -> str:
    """Put this process (and what it starts later: the zygote, the workers) under
    ``SCHED_BATCH``; returns the policy in force ("batch", or why not)."""
    policy = getattr(os, "SCHED_BATCH", None)
    if policy is None:
        return "normal (no SCHED_BATCH here)"
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError as exc:
        return f"normal ({exc.strerror})"
    return "batch"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="reward-service", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run the HTTP service")
    s.add_argument("--host", help="listen address (REWARD_HOST, default 127.0.0.1)")
    s.add_argument("--port", type=int, help="listen port (REWARD_PORT, default 8000)")
    s.add_argument("--workers", type=int, help="active workers (REWARD_WORKERS, default: CPUs)")
    s.add_argument("--spares", type=int, help="warm spare workers (REWARD_SPARES, default 1)")
    s.add_argument("--sandbox", choices=["strict", "best-effort", "off"],
                   help="sandbox mode (REWARD_SANDBOX, default strict)")
    s.add_argument("--drain-s", type=float, dest="drain_s",
                   help="grace period on SIGTERM (REWARD_DRAIN_S, default 30)")
    s.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                   dest="log_level", help="REWARD_LOG_LEVEL, default info")
    s.add_argument("--access-log", action="store_true", help="log every HTTP request")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    overrides = {
        k: v for k, v in vars(args).items()
        if k not in ("command", "access_log") and v is not None
    }
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        errors = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'settings'}: {e['msg']}" for e in exc.errors()
        )
        print(f"reward-service: invalid settings: {errors}", file=sys.stderr)  # noqa: T201
        return 2
    configure_logging(settings.log_level)
    sched = batch_scheduling() if settings.sched_batch else "normal"
    nofile = raise_nofile_limit()
    max_connections = settings.max_connections or connection_cap(
        nofile, settings.workers, settings.spares)
    app = create_app(settings)
    requests_total = app.state.metrics.http_requests
    limits = ConnectionLimits(
        max_header_bytes=settings.max_header_bytes, max_headers=settings.max_headers,
        max_pipelined=settings.max_pipelined, write_timeout_s=settings.write_timeout_s,
        budget=app.state.budget,
        count=lambda code: requests_total.labels(route="unmatched", code=str(code)).inc())
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=args.access_log,
        timeout_graceful_shutdown=math.ceil(settings.drain_s),  # 0: cancel at once
        limit_concurrency=None,
        http=guarded_protocol(max_connections, settings.header_timeout_s, limits),
    )
    server = _Server(config, on_exit_signal=app.state.pool.drain)
    # A 512-item request allocates ~10k short-lived objects; at the default threshold (700)
    # collections took 11% of the busy server's samples (py-spy); at 10k, ~10% less CPU/item.
    gc.set_threshold(10_000, 10, 10)
    log.info("starting", extra={"version": __version__, "host": settings.host,
                                "port": settings.port, "workers": settings.workers,
                                "sandbox": settings.sandbox, "open_files": nofile,
                                "sched": sched,
                                "max_connections": max_connections})
    if (warning := exposure_warning(settings)) is not None:
        log.warning("exposed without a token", extra={"reason": warning})
    server.run()
    if not server.started:
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main())
