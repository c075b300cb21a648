"""Drop-in reward functions for RL frameworks, backed by the reward service.

* :mod:`trainer_client.integrations.verl` — ``custom_reward_function`` for verl's naive and
  batch reward managers (``compute_score``, ``compute_score_batch`` and async variants).
* :mod:`trainer_client.integrations.trl` — ``make_reward_func`` for TRL's ``GRPOTrainer``.
* :mod:`trainer_client.integrations.slime` — an optional ``--custom-rm-path`` for slime that
  scores a whole group in one request (``--group-rm``).
* OpenRLHF and slime need no client code: they call the service's ``/get_reward`` and
  ``/slime/reward`` routes directly (see ``docs/integrations.md``).

Submodules are not imported here, so ``import trainer_client.integrations.verl`` costs only
httpx and never imports a framework.
"""

__all__: list[str] = []
