"""Fuzz every operation of the OpenAPI schema against the real server (schemathesis).

Every operation of the schema the service serves at ``/openapi.json`` is fuzzed over HTTP on
loopback, one pytest item per operation, with schemathesis' coverage phase (boundary values,
missing and wrong-typed fields, undocumented methods) and fuzzing phase (positive and negative
inputs). One server (2 workers, 1 spare, strict sandbox) answers all of it. What must hold for
every request:

* never a 5xx (``not_a_server_error``: no 500, and no 503 either, since one sequential client
  can neither overload a fresh server nor find it draining);
* an answer within a bound derived from the request's own per-item deadline (a hang fails as a
  read timeout), every item's status a known one and its ``elapsed_s`` within its deadline plus
  a margin;
* the status code, content type, headers and body documented by the schema
  (``status_code_conformance``, ``content_type_conformance``, ``response_headers_conformance``,
  ``response_schema_conformance``), schema-invalid input refused with a 4xx
  (``negative_data_rejection``), an undocumented method refused with 405 (``unsupported_method``).

Not checked: ``positive_data_acceptance``. A schema-valid body may still be refused with a
documented 422 by design: an unknown scorer name, ``timeout_s`` over the configured maximum,
an OpenRLHF request without ``labels`` or with lengths that differ, a slime request whose
``label`` is null. Since random schema-valid bodies mostly fall into these, part of each
generated body is repaired (known scorer, labels of the right length, a bounded ``timeout_s``)
so that the fuzzed input also reaches the workers on every scoring route; a repaired case must
be answered 200.

After the run: every operation was fuzzed, every scoring route answered some 200s, no worker
crashed, and the service is still ready with all its workers; on SIGTERM it stops cleanly.

``SOAK_SECONDS`` > 60 (``make soak``) raises the examples per operation.
"""

from __future__ import annotations

import math
import os
import random
import signal
from collections import Counter
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from reward_service.server.app import create_app
from reward_service.settings import Settings
from tests.helpers import Service, alive

SECONDS = float(os.environ.get("SOAK_SECONDS", "8"))
EXAMPLES = 500 if SECONDS > 60 else 100  # per operation, fuzzing phase (positive + negative)
WORKERS = 2
DEFAULT_TIMEOUT_S = 5.0  # the service's defaults (reward_service/settings.py)
MAX_TIMEOUT_S = 60.0
MARGIN_S = 30.0  # generous: a loaded 2-core machine, not a performance bound
SCORERS = ["math", "math_verify", "gsm8k", "numeric", "choice", "math-verify", "mcq"]
STATUSES = {"correct", "incorrect", "no_answer", "bad_ground_truth", "timeout", "error"}
# every operation the service documents; a new one must be added here (and is then fuzzed)
OPERATIONS = {
    "POST /v1/score", "POST /score", "POST /get_reward", "POST /slime/reward",
    "POST /verify", "POST /seed_session",
    "GET /healthz", "GET /readyz", "GET /metrics", "GET /v1/info",
}

CONFIG = schemathesis.Config.from_dict({
    "generation": {"mode": "all", "max-examples": EXAMPLES, "database": "none"},
    "phases": {"stateful": {"enabled": False}},  # no links between operations: nothing to chain
    "checks": {"positive_data_acceptance": {"enabled": False}},  # see the module docstring
})

# figures across the run (one pytest item per operation, in this module's order)
_TALLY: dict[str, Any] = {"requests": 0, "codes": Counter(), "by_operation": Counter(),
                          "ok_by_operation": Counter(), "repaired": 0, "phases": Counter(),
                          "items_scored": 0, "item_statuses": Counter(), "slowest_s": 0.0}


@pytest.fixture(scope="module")
def fuzzed_service() -> Any:
    svc = Service(REWARD_LOG_LEVEL="info", REWARD_WORKERS=WORKERS).start()
    try:
        workers = svc.worker_pids()
        yield svc
    finally:
        code = svc.stop()
    assert code in (0, -signal.SIGTERM), svc.log()
    assert "pool stopped" in svc.log()
    assert not [pid for pid in workers if alive(pid)]


def _served_schema() -> dict[str, Any]:
    """The OpenAPI document the service serves at /openapi.json, built as ``serve`` builds it.

    It is loaded at collection time so that each operation is its own pytest item (the lazy
    ``schemathesis.pytest.from_fixture`` loader, which could read it from the running server,
    does not work with pytest 9: it sets ``Function._nodeid``, which pytest 9 removed).
    ``test_the_fuzzed_schema_is_the_served_one`` checks it equals what the server answers.
    """
    return create_app(Settings(workers=WORKERS, api_token=None)).openapi()


schema = schemathesis.openapi.from_dict(_served_schema(), config=CONFIG)


def test_the_fuzzed_schema_is_the_served_one(fuzzed_service: Service) -> None:
    served = httpx.get(fuzzed_service.url + "/openapi.json", timeout=30)
    assert served.status_code == 200
    assert served.json() == schema.raw_schema
    loaded = schemathesis.openapi.from_url(fuzzed_service.url + "/openapi.json", config=CONFIG,
                                           timeout=30)
    assert {op.ok().label for op in loaded.get_all_operations()} == OPERATIONS


def _deadline(value: object) -> float:
    """The per-item deadline the service applies for a ``timeout_s`` as sent."""
    try:
        t = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return DEFAULT_TIMEOUT_S
    return t if 0 < t <= MAX_TIMEOUT_S else DEFAULT_TIMEOUT_S


GOLDS: list[object] = ["1", "2", "\\frac12", "x^2", "", " ", "é", "\\boxed{", 3, -4, 2.5]


def _repair(case: schemathesis.Case) -> bool:
    """Make part of the schema-valid cases pass the service's semantic rules (see docstring).

    Negative cases are left alone: schemathesis judges them by how they were generated, and a
    repaired one could turn valid. Every value set here is schema-valid, so a repaired case
    stays positive and must then be answered 200. The choices are a function of the case (no
    ``@schema.given``: it would switch schemathesis' coverage phase off), so a failing case
    replays and shrinks the same way.
    """
    if case.meta is None or case.meta.generation.mode is not schemathesis.GenerationMode.POSITIVE:
        return False
    rnd = random.Random(repr((case.operation.label, case.body, case.query)))
    if rnd.random() < 0.3:
        return False
    body, path = case.body, case.operation.path
    if path in ("/v1/score", "/score") and isinstance(body, dict):
        if isinstance(body.get("items"), list):
            for item in body["items"]:
                if not isinstance(item, dict):
                    continue
                if "scorer" in item:
                    item["scorer"] = rnd.choice([*SCORERS, None])
                # an answer to find: random text reaches the parsers and the comparison too
                if isinstance(item.get("response"), str) and rnd.random() < 0.5:
                    item["response"] += f" so \\boxed{{{item.get('ground_truth')}}}"
        if isinstance(body.get("timeout_s"), int | float):
            body["timeout_s"] = rnd.uniform(0.01, 3.0)
    elif path in ("/get_reward", "/slime/reward", "/verify") and isinstance(case.query, dict):
        if "scorer" in case.query:
            case.query["scorer"] = rnd.choice(SCORERS)
        if "timeout_s" in case.query:
            case.query["timeout_s"] = rnd.uniform(0.01, 3.0)
    if path == "/get_reward" and isinstance(body, dict) and isinstance(body.get("query"), list):
        n = len(body["query"])
        body["labels"] = [rnd.choice(GOLDS) for _ in range(n)]
        if n:
            body["labels"][0] = "42"  # not every label empty
        if isinstance(body.get("prompts"), list) and len(body["prompts"]) != n:
            body["prompts"] = None
        # without a chat-template marker or the prompt in it, no response can be located
        body["query"] = [
            f"{q}<|im_start|>assistant\n{q} \\boxed{{{label}}}" if isinstance(q, str) else q
            for q, label in zip(body["query"], body["labels"], strict=True)
        ]
    if path == "/slime/reward" and isinstance(body, dict) and (
            isinstance(body.get("label"), bool) or not isinstance(body.get("label"), str | int)):
        body["label"] = rnd.choice(GOLDS)
    return True


def _bound(case: schemathesis.Case) -> tuple[float, int, float]:
    """(seconds the whole answer may take, items, per-item deadline) for this request."""
    body, path = case.body, case.operation.path
    if path in ("/v1/score", "/score") and isinstance(body, dict):
        items = body.get("items")
        n = len(items) if isinstance(items, list) else 1
        deadline = _deadline(body.get("timeout_s"))
    elif path == "/get_reward" and isinstance(body, dict):
        n = len(body["query"]) if isinstance(body.get("query"), list) else 1
        deadline = _deadline((case.query or {}).get("timeout_s"))
    else:
        n, deadline = 1, _deadline((case.query or {}).get("timeout_s"))
    return MARGIN_S + deadline * math.ceil(max(n, 1) / WORKERS), n, deadline


def _items(path: str, payload: Any) -> list[dict[str, Any]]:
    if path in ("/v1/score", "/score", "/get_reward") and isinstance(payload, dict):
        return list(payload.get("results", []))
    if path == "/slime/reward" and isinstance(payload, dict):
        return [payload]
    return []


@schema.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_survives_schema_fuzzing(case: schemathesis.Case,
                                                 fuzzed_service: Service) -> None:
    repaired = _repair(case)
    bound, _n, deadline = _bound(case)
    # a read timeout here is a hang past the request's own deadline: it fails the test
    response = case.call(base_url=fuzzed_service.url, timeout=bound)
    case.validate_response(response)
    if repaired:  # schema-valid and within the service's rules: it must be scored
        assert response.status_code == 200, (case.as_curl_command(), response.text[:500])
    assert response.elapsed <= bound, (case.operation.label, response.elapsed)
    ctype = next((v[0] for k, v in response.headers.items() if k.lower() == "content-type"), "")
    if response.status_code == 200 and case.operation.path == "/slime/reward":
        status = next((v[0] for k, v in response.headers.items()
                       if k.lower() == "x-reward-status"), None)
        assert status in STATUSES, response.headers
    if response.status_code == 200 and ctype.startswith("application/json"):
        for item in _items(case.operation.path, response.json()):
            assert item["status"] in STATUSES, item
            assert item.get("elapsed_s", 0.0) <= deadline + 2.0, (deadline, item)
            _TALLY["item_statuses"][item["status"]] += 1
            _TALLY["items_scored"] += 1
    _TALLY["requests"] += 1
    if case.meta is not None:
        _TALLY["phases"][f"{case.meta.phase.name.value}/{case.meta.generation.mode.value}"] += 1
    _TALLY["codes"][response.status_code] += 1
    _TALLY["by_operation"][case.operation.label] += 1
    _TALLY["ok_by_operation"][case.operation.label] += response.status_code == 200
    _TALLY["repaired"] += repaired
    _TALLY["slowest_s"] = max(_TALLY["slowest_s"], response.elapsed)


def _summary() -> dict[str, Any]:
    return {
        "schemathesis": schemathesis.__version__,
        "examples_per_operation": EXAMPLES,
        "operations": sorted(_TALLY["by_operation"]),
        "requests": _TALLY["requests"],
        "requests_by_operation": dict(sorted(_TALLY["by_operation"].items())),
        "ok_by_operation": dict(sorted(_TALLY["ok_by_operation"].items())),
        "codes": {str(k): v for k, v in sorted(_TALLY["codes"].items())},
        "repaired": _TALLY["repaired"],
        "cases_by_phase": dict(sorted(_TALLY["phases"].items())),
        "items_scored": _TALLY["items_scored"],
        "item_statuses": dict(_TALLY["item_statuses"]),
        "slowest_s": round(_TALLY["slowest_s"], 3),
    }


def test_schema_fuzzing_reached_every_operation_and_the_service_is_whole(
        request: pytest.FixtureRequest, fuzzed_service: Service, record: dict[str, Any]) -> None:
    fuzzed = [i for i in request.session.items
              if i.name.startswith("test_every_operation_survives_schema_fuzzing[")]
    if len(fuzzed) < len(OPERATIONS):
        pytest.skip("the fuzzing test was not selected for every operation")
    info = httpx.get(fuzzed_service.url + "/v1/info", timeout=30).json()
    s = _summary()
    record.update(s, worker_restarts=info["workers"]["restarts"])
    assert set(s["operations"]) == OPERATIONS, s
    # every operation answered 200 at least once: the scoring routes reached the workers
    assert set(s["ok_by_operation"]) == OPERATIONS, s
    assert all(n > 0 for n in s["ok_by_operation"].values()), s
    assert s["items_scored"] > 0, s
    assert not [c for c in s["codes"] if c.startswith("5")], s
    # a worker may be killed at an item's deadline ("timeout"), never crash on an input
    assert "crash" not in info["workers"]["restarts"], info["workers"]
    assert info["workers"]["active"] == WORKERS, info["workers"]
    assert httpx.get(fuzzed_service.url + "/readyz", timeout=30).status_code == 200
