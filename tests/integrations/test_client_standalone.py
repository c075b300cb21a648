"""The HTTP client, its errors and every framework adapter stand alone: they import with
httpx and orjson only (no service, no torch), and the client's copy of the end tokens agrees
with the service's."""

from __future__ import annotations

import random
import subprocess
import sys

from reward_service.scorers import rule_labels as rules
from reward_service.server import compat
from tests.helpers import ROOT
from trainer_client.integrations import _rules, _tokens

BLOCKED = ("reward_service", "fastapi", "starlette", "pydantic", "uvicorn", "math_verify",
           "sympy", "torch", "transformers", "ray")

PROGRAM = f"""
import importlib.abc, sys

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError(f"blocked: {{name}}")
        return None

sys.meta_path.insert(0, Blocked())
import trainer_client
from trainer_client import RewardClient, AsyncRewardClient, RewardClientError
import trainer_client.errors, trainer_client.reward_client
import trainer_client.integrations.verl, trainer_client.integrations.trl
import trainer_client.integrations.slime, trainer_client.integrations._common
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({BLOCKED!r}))
print("loaded:", loaded)
"""


def test_client_and_adapters_import_without_the_service_or_torch() -> None:
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "loaded: []"


def test_the_blocker_blocks() -> None:
    """The control: a module that imports the service fails under the same finder."""
    program = PROGRAM.split("import trainer_client\n")[0] + "import reward_service.server.compat\n"
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode != 0 and "blocked: reward_service" in proc.stderr


def test_the_clients_end_tokens_agree_with_the_services() -> None:
    assert _tokens.END_TOKENS == compat.END_TOKENS
    rng = random.Random(0)
    parts = [*compat.END_TOKENS, " ", "\n", "x", "\\boxed{5}", "<", "|>"]
    for _ in range(2000):
        text = "".join(rng.choice(parts) for _ in range(rng.randint(0, 8)))
        assert _tokens.strip_trailing_tokens(text) == compat.strip_trailing_tokens(text)


def test_the_clients_rule_labels_agree_with_the_services() -> None:
    assert (_rules.RULES, _rules.RULE_KEYS) == (rules.RULES, rules.RULE_KEYS)
    reasons = [None, "", "no answer found", "hedged", "hedged: 2 distinct (5; 6)",
               "units: m vs cm", "nothing: x", *(f"{r}: detail" for r in rules.RULES)]
    for reason in reasons:
        assert _rules.rule_flags(reason) == rules.rule_flags(reason), reason
