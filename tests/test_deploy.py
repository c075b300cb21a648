"""Deployment files: the image's lock, the Kubernetes manifests, Compose and its dashboard.

Static checks, fast, no container engine or cluster needed. The image itself is built and run
by ``test_container.py``; the Ray Serve app runs in ``test_ray_serve.py``.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from reward_service.server.metrics import Metrics
from reward_service.settings import Settings
from tests.helpers import ROOT

yaml = pytest.importorskip("yaml")

DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
# The oldest Kubernetes minor still commonly run, and the newest the validator knows.
K8S_VERSIONS = ("1.29", "latest")


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _manifests() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _docs(path):
            if doc.get("kind") != "Kustomization":
                out[doc["kind"]] = doc
    return out


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


# ------------------------------------------------------------------ image inputs
def test_lock_pins_every_service_requirement() -> None:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    lock: dict[str, str] = {}
    for line in (DEPLOY / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not pinned with ==: {line}"
            lock[canonicalize_name(name)] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for spec in project["optional-dependencies"]["service"]:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in lock, f"{req.name} (service extra) missing from deploy/requirements.txt"
        assert req.specifier.contains(lock[name], prereleases=True), (
            f"{req.name}=={lock[name]} in the lock does not satisfy {req.specifier}"
        )


def test_dockerfile_contract() -> None:
    text = (ROOT / "Dockerfile").read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms[0] == "debian:bookworm-slim"
    assert all(f in ("debian:bookworm-slim", "base") for f in froms), froms
    assert re.search(r"^USER\s+10001", text, re.M), "the image must run as a non-root uid"
    assert re.search(r"^EXPOSE\s+8000\s*$", text, re.M)
    assert re.search(r"^HEALTHCHECK\b.*\\\n.*healthcheck\.py", text, re.M)
    assert "readyz" in (DEPLOY / "healthcheck.py").read_text()
    assert "REWARD_HOST=0.0.0.0" in text and "${PORT:-${REWARD_PORT:-8000}}" in text
    assert "libseccomp2" in text
    # the lock is copied (and installed) before the source: the dependency layer stays cached
    assert text.index("requirements.txt") < text.index("COPY reward_service")


def test_dockerignore_keeps_the_context_small() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert lines[lines.index("*") :][0] == "*"
    copied = set(re.findall(r"^COPY\s+(?!--from)(.+)\s+\S+$", (ROOT / "Dockerfile").read_text(), re.M))
    for group in copied:
        for src in group.split():
            assert f"!{src}" in lines, f"{src} is COPYed but excluded by .dockerignore"


# ------------------------------------------------------------------ Kubernetes
@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", sorted(p.name for p in K8S.glob("*.yaml")))
def test_manifests_validate_against_kubernetes_schemas(path: str, version: str) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    version = kv.latest_version() if version == "latest" else version
    for doc in _docs(K8S / path):
        if doc["kind"] == "Kustomization":
            assert sorted(doc["resources"]) == sorted(
                p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml"
            )
            continue
        kv.validate(doc, version, strict=True)  # raises with the offending field


def test_validator_is_not_vacuous() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    bad = json.loads(json.dumps(_manifests()["Deployment"]))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, kv.latest_version(), strict=True)


def test_deployment_probes_grace_and_security() -> None:
    m = _manifests()
    dep = m["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    port = c["ports"][0]
    assert port["containerPort"] == 8000 and port["name"] == "http"
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    # a slow start must not be killed by liveness: the startup probe covers worker warm-up
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= Settings().worker_start_timeout_s

    # grace > preStop sleep + drain + worker stop + zygote wait (pool.stop: stop timeout + 5 s)
    env = _env(c)
    drain = float(env["REWARD_DRAIN_S"])
    stop = float(env["REWARD_WORKER_STOP_TIMEOUT_S"])
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    budget = float(pre_stop[1]) + drain + stop + (stop + 5)
    assert pod["terminationGracePeriodSeconds"] > budget, budget
    # every REWARD_* variable is a real setting
    fields = set(Settings.model_fields)
    for name in env:
        if name.startswith("REWARD_"):
            assert name.removeprefix("REWARD_").lower() in fields, name
    assert any(e["name"] == "REWARD_WORKERS" and "resourceFieldRef" in e.get("valueFrom", {})
               for e in c["env"])

    # resources and a locked-down pod
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) <= set(c["resources"]["limits"])
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    sc = c["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_service_hpa_and_pdb_select_the_deployment() -> None:
    m = _manifests()
    labels = m["Deployment"]["spec"]["template"]["metadata"]["labels"]
    for kind in ("Service", "PodDisruptionBudget"):
        sel = m[kind]["spec"]["selector"]
        sel = sel.get("matchLabels", sel)
        assert sel.items() <= labels.items(), kind
    assert m["Service"]["spec"]["ports"][0]["targetPort"] == "http"
    target = m["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", m["Deployment"]["metadata"]["name"])
    hpa = m["HorizontalPodAutoscaler"]["spec"]
    assert hpa["minReplicas"] >= 2, "a PDB with minAvailable 1 needs two pods to allow a drain"
    assert m["PodDisruptionBudget"]["spec"]["minAvailable"] < hpa["minReplicas"]


# ------------------------------------------------------------------ Compose and Grafana
def _metric_names() -> set[str]:
    names: set[str] = set()
    for metric in Metrics().registry.collect():
        names.add(metric.name)
        if metric.type == "counter":
            names.add(metric.name + "_total")
        if metric.type == "histogram":
            names |= {metric.name + s for s in ("_bucket", "_sum", "_count")}
    return names


def test_compose_scrapes_the_service() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    svc = compose["services"]["reward"]
    assert svc["build"]["context"] == ".." and "8000:8000" in svc["ports"]
    grace = int(svc["stop_grace_period"].rstrip("s"))
    assert grace > float(svc["environment"]["REWARD_DRAIN_S"])
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    (job,) = prom["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["reward:8000"]
    for mount in compose["services"]["prometheus"]["volumes"] + compose["services"]["grafana"]["volumes"]:
        assert (DEPLOY / mount.split(":")[0]).exists(), mount


def test_dashboard_queries_only_metrics_the_service_exports() -> None:
    dash = json.loads((DEPLOY / "grafana" / "dashboards" / "reward-service.json").read_text())
    known = _metric_names()
    used = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            used |= set(re.findall(r"\breward_[a-z_]+", target["expr"]))
    assert used, "no queries"
    assert used <= known, used - known
    # every metric family appears on some panel
    families = {m.name for m in Metrics().registry.collect()}
    assert {u.removesuffix("_bucket").removesuffix("_total") for u in used} >= families


# ------------------------------------------------------------------ operator-facing startup
def test_startup_log_names_the_active_sandbox_layers() -> None:
    """`docker logs` shows which layers run, without a call to /v1/info."""
    from tests.helpers import service

    with service(REWARD_LOG_LEVEL="info", REWARD_SANDBOX="best-effort", REWARD_WORKERS=1) as svc:
        line = next(x for x in svc.log().splitlines() if "sandbox layers" in x)
    assert "sandbox=best-effort" in line and "active=" in line and "inactive=" in line
    active = re.search(r" active=(\S+)", line)
    assert active is not None and "seccomp" in active.group(1).split(","), line


def test_deploy_docs_list_every_setting() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    missing = [n for n in Settings.model_fields if f"`REWARD_{n.upper()}`" not in text]
    assert not missing, f"docs/deploy.md lacks {missing}"
