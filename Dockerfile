# The math-reward service as a container image.
#
#   docker build -t reward-service .
#   docker run --rm -p 8000:8000 reward-service            # best-effort sandbox, see below
#   curl -s localhost:8000/v1/info | jq .sandbox             # which sandbox layers are active
#
# Listens on $PORT (else $REWARD_PORT, else 8000) on all interfaces. Every REWARD_* setting
# applies (docs/deploy.md). Runs as uid 10001. Under a default `docker run` a non-root
# process cannot create a network namespace (the default seccomp profile blocks
# CLONE_NEWUSER), so the image defaults to REWARD_SANDBOX=best-effort: workers still run
# under rlimits, Landlock and a seccomp deny-list that refuses every socket, and /v1/info
# reports what is missing. For the strict sandbox see "Container privileges" in
# docs/deploy.md.

# ---------------------------------------------------------------- runtime base
FROM debian:bookworm-slim AS base
ARG DEBIAN_FRONTEND=noninteractive
# python3: Debian's 3.11; libseccomp2: the seccomp layer (pyseccomp loads it);
# tini: PID 1 that forwards SIGTERM to the server and reaps orphans.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 libseccomp2 tini \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin

# ---------------------------------------------------------------- build: a venv in /opt/venv
FROM base AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3-venv \
 && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
# Pinned dependencies first: this layer is rebuilt only when the lock changes.
COPY deploy/requirements.txt /tmp/requirements.txt
# sympy's own test suites are a third of the venv and never imported at run time.
RUN pip install --require-virtualenv --no-deps -r /tmp/requirements.txt \
 && pip check \
 && find /opt/venv/lib/python3.11/site-packages/sympy -depth -type d -name tests \
        -exec rm -rf {} +
# Then the service itself (no dependencies: they are all pinned above).
COPY pyproject.toml README.md /src/
COPY reward_service /src/reward_service
RUN pip install --require-virtualenv --no-deps /src \
 && pip uninstall -y --require-virtualenv pip setuptools \
 && python3 -c "import reward_service.server.app, pyseccomp"

# ---------------------------------------------------------------- final image
FROM base
COPY --from=build /opt/venv /opt/venv
COPY deploy/healthcheck.py /usr/local/lib/reward-service/healthcheck.py
RUN groupadd --system --gid 10001 reward \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin reward
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    REWARD_HOST=0.0.0.0 \
    REWARD_SANDBOX=best-effort
USER 10001:10001
WORKDIR /
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python3", "/usr/local/lib/reward-service/healthcheck.py"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# $PORT wins over $REWARD_PORT; `exec` makes the server tini's direct child (it gets SIGTERM).
CMD ["/bin/sh", "-c", "exec reward-service serve --port \"${PORT:-${REWARD_PORT:-8000}}\""]
