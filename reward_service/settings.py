"""The one settings object of the service (env prefix ``REWARD_``).

Built once at the entry point (CLI or ``create_app``) and passed down; nothing else in the
package reads the environment.
"""

from __future__ import annotations

import os
from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    """Service settings. Every field can be set as ``REWARD_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="REWARD_", extra="forbid", frozen=True)

    # --- network -------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=0, le=65535, description="Port to listen on (0 = any free).")
    api_token: SecretStr | None = Field(
        None, description="When set, every endpoint but /healthz and /readyz needs 'Bearer TOKEN'."
    )
    log_level: Literal["debug", "info", "warning", "error"] = "info"

    # --- worker pool ---------------------------------------------------------------------
    workers: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, le=256, description="Active workers."
    )
    spares: int = Field(1, ge=0, le=64, description="Warm idle workers that replace a killed one.")
    chunk_size: int = Field(
        32, ge=1, le=1024,
        description="Most items per IPC message to a worker (a request's last chunks are smaller).",
    )
    chunks_in_flight: int = Field(2, ge=1, le=8, description="Chunks queued on one worker.")
    max_queue_items: int = Field(
        65536, ge=1, description="Items waiting for a worker before new requests get 503."
    )
    worker_start_timeout_s: float = Field(60.0, gt=0, description="Spawn + import + warm-up.")
    zygote_ping_interval_s: float = Field(
        1.0, gt=0, description="How often the supervisor pings the zygote once it is ready.")
    zygote_ping_timeout_s: float = Field(
        5.0, gt=0,
        description="A ping unanswered this long: the zygote is hung (stopped, wedged) and is "
        "replaced; the items its workers held are requeued, not failed.",
    )
    worker_stop_timeout_s: float = Field(2.0, gt=0, description="Wait after EOF before SIGKILL.")
    recycle_after_items: int = Field(20000, ge=1, description="Restart a worker after K items.")
    sched_batch: bool = Field(
        True, description="Run the server, its zygote and workers under Linux's SCHED_BATCH "
        "policy: a process woken by a pipe or socket does not preempt a running one, so a "
        "worker's result does not interrupt the other worker mid-item (the server reads "
        "results in bursts). No effect where the policy is unavailable.",
    )
    warm_parser: bool = Field(
        True, description="Before forking workers, the zygote parses ~200 common final-answer "
        "shapes so that ANTLR's prediction cache (DFA) is warm in every worker (first, spare, "
        "replacement): about 4 s more at startup for a scorer ~20% faster on new LaTeX.",
    )
    library_patches: bool = Field(
        True, description="Install our speed patches of math-verify, latex2sympy2, sympy and "
        "ANTLR in the zygote (reward_service/scorers/patches: each exact by a differential test, "
        "installed only on the library versions they were proven against). false runs the "
        "libraries as released: same verdicts, slower; rules our patches out of a surprise.",
    )
    recycle_rss_mb: int = Field(
        1024, ge=64, description="Restart a worker whose resident memory grows past this."
    )
    max_worker_frame_bytes: int = Field(
        4 * 1024 * 1024, ge=64 * 1024,
        description="Largest frame the server reads from a worker (results carry clipped "
        "strings: a few KB); a worker announcing a larger one is killed.",
    )

    # --- per item ------------------------------------------------------------------------
    default_timeout_s: float = Field(
        5.0, gt=0, description="Wall-clock deadline per item from the moment a worker starts it."
    )
    max_timeout_s: float = Field(60.0, gt=0, description="Largest timeout_s a request may ask.")
    bad_gold_memory_s: float = Field(
        600.0, ge=0, description="A ground truth whose parse ran past an item's deadline is "
        "remembered this long: every item sharing it is answered bad_ground_truth at once, "
        "instead of each paying its own deadline. 0 turns the memory off.",
    )

    # --- request limits ------------------------------------------------------------------
    max_items: int = Field(16384, ge=1, description="Items per request (more: 413).")
    max_response_chars: int = Field(8_000_000, ge=1, description="Characters per response.")
    max_ground_truth_chars: int = Field(100_000, ge=1, description="Characters per ground truth.")
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Request body size.")
    max_inflight_body_bytes: int = Field(
        256 * 1024 * 1024, ge=1024,
        description="All request bodies being read or handled at once, plus reply bytes that "
        "slow readers have not taken (a body over it: 503 + Retry-After).",
    )
    body_timeout_s: float = Field(
        30.0, gt=0, description="Longest wait for the next part of a request body (then 408).")
    body_total_timeout_s: float = Field(
        120.0, gt=0,
        description="Longest time a whole request body may take to arrive, from its headers "
        "(then 408): a body trickled a byte at a time holds its bytes no longer than this.",
    )
    max_header_bytes: int = Field(
        64 * 1024, ge=1024,
        description="Request line and headers of one request (more: 431 and the connection "
        "is closed); enforced as bytes are read, before they are parsed.",
    )
    max_headers: int = Field(100, ge=8, description="Headers per request (more: 431, closed).")
    max_pipelined: int = Field(
        8, ge=0,
        description="Requests a connection may queue behind the one in progress (HTTP "
        "pipelining); the next one stops reading: the queued ones are answered, then the "
        "connection is closed.",
    )
    write_timeout_s: float = Field(
        30.0, gt=0,
        description="A reply whose client takes none of its bytes for this long is dropped "
        "and the connection aborted. Unsent reply bytes also count against "
        "max_inflight_body_bytes: a reply that takes it over aborts its connection.",
    )
    header_timeout_s: float = Field(
        15.0, gt=0,
        description="A connection must send a request's headers within this long of opening "
        "or of its previous response, else it is closed (idle connections hold descriptors).",
    )
    max_connections: int | None = Field(
        None, ge=1,
        description="Open client connections; more are answered 503 and closed at once "
        "(default: the open-file limit less a reserve for the worker pool).",
    )
    cache_items: int = Field(
        100_000, ge=0, description="Verdicts kept across requests (LRU; 0 disables)."
    )

    # --- sandbox -------------------------------------------------------------------------
    sandbox: Literal["strict", "best-effort", "off"] = Field(
        "strict",
        description="strict: refuse a worker missing a layer this host supports; "
        "best-effort: run and report; off: no sandbox (tests of the pool only).",
    )
    worker_memory_mb: int = Field(2048, ge=128, description="RLIMIT_AS of a worker.")
    worker_cpu_s: int = Field(3600, ge=1, description="RLIMIT_CPU backstop of a worker's life.")
    worker_uid: int = Field(65534, ge=1, description="Unprivileged uid a root server drops to.")
    worker_gid: int = Field(65534, ge=1, description="Unprivileged gid a root server drops to.")

    # --- lifecycle -----------------------------------------------------------------------
    drain_s: float = Field(
        30.0, ge=0, description="On SIGTERM: time to finish in-flight requests before stopping."
    )
    retry_after_s: int = Field(1, ge=1, description="Retry-After on 503 answers.")

    # --- tests only (never reachable over HTTP) ------------------------------------------
    enable_test_probes: bool = Field(
        False, description="Let the pool run named sandbox probes in a worker (tests only)."
    )
    sandbox_landlock: bool = Field(
        True, description="Apply Landlock where the kernel has it; tests set False so that "
        "they exercise the seccomp rules alone (strict mode does not require Landlock).",
    )

    @model_validator(mode="after")
    def _check(self) -> Settings:
        if self.default_timeout_s > self.max_timeout_s:
            raise ValueError("default_timeout_s must not exceed max_timeout_s")
        if self.max_items > self.max_queue_items:
            raise ValueError("max_items must not exceed max_queue_items")
        if self.max_inflight_body_bytes < self.max_body_bytes:
            raise ValueError("max_inflight_body_bytes must be at least max_body_bytes")
        if self.api_token is not None and not self.api_token.get_secret_value().strip():
            # an empty REWARD_API_TOKEN= would read as "auth on" in one place and "off" in
            # another: refuse it (unset the variable to run without a token)
            raise ValueError("api_token is set but empty; unset REWARD_API_TOKEN to disable auth")
        return self
