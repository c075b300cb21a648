"""The HTTP layer: thin routers over :class:`reward_service.server.service.ScoringService`.

* ``score``     — ``POST /v1/score`` (and ``/score``), the native batch API
* ``openrlhf``  — ``POST /get_reward``, OpenRLHF's remote reward protocol
* ``slime``     — ``POST /slime/reward``, slime's remote reward protocol
* ``ops``       — ``/healthz``, ``/readyz``, ``/metrics``, ``/v1/info``
* ``errors``    — the one place errors become HTTP answers
* ``guards``    — bearer-token check and request-body limits (middleware)
"""
