"""The reward servers a user would run instead of ours, each on its own contract, side by side
with ours on the same contract, the same rows and the same hostile mix (issue 40).

* ``nemo_gym``: NeMo-Gym's ``math_with_judge`` resources server, started from the released
  package, driven over ``POST /verify`` as its rollout collection sends (``verify_driver``);
* ``verifiers_peer``: the ``verifiers`` math scorer raced in one process per core;
* ``ours``: our service on each of those contracts;
* ``items``: the rows, the hostile mix, outcomes and agreement; ``run``: the passes and their
  brackets; ``report``: the table; ``venvs``: the peers' own venvs (``make peers``).

``python -m bench.peers`` (``make bench-peers``) runs it alone; ``make bench`` runs it as its
``peers`` section. Both peers run from their own venvs, never the project's.
"""

from bench.base import Section
from bench.peers import report as _report
from bench.peers import run as _run

SECTION = Section("peers", _run.run, _report.report)
