"""The worker pool: sandboxed scoring processes behind one ``submit`` call.

Module map (imports go down, events go up through callbacks; no cycle)::

    scheduler.py    WorkerPool: submit, chunks, dispatch, deadlines, requeue, watchdog
      ├─ fairqueue.py   queued chunks per request; the next goes to the least-served request
      └─ crew.py        the worker processes: spawn, promote, retire, reap, zygote restarts
           ├─ channel.py      one worker's pipes: frames out/in, EOF, kill, exit status
           └─ zygote_link.py  the zygote process and its control socket (control.py)
    records.py      Task, Outcome, PoolStatus, the per-request records, chunk_sizes, deal

Who starts what and what happens on each failure: docs/architecture.md.
"""

from reward_service.server.pool.records import Outcome, PoolStatus, Task, chunk_sizes
from reward_service.server.pool.scheduler import WorkerPool

__all__ = ["Outcome", "PoolStatus", "Task", "WorkerPool", "chunk_sizes"]
