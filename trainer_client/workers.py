"""Where the rollout engine and the policy ranks run: Ray actors, or this process.

The trainer talks to both through :class:`Handle` s whose ``call(method, *args)`` returns a
:class:`Call`; ``Call.result(timeout_s)`` waits for it. Calls on one handle run in the
order they were made (a Ray actor's queue; locally, pending calls run in order when a
result is first needed, so the driver can score chunk k while chunk k+1 "runs").

Ray placement: the policy ranks get a placement group of ``world_size`` bundles
(``{"CPU": 1, "GPU": 1}`` each on GPU, packed), the rollout actor its own CPU/GPU share,
so on a GPU node rollout and training hold separate GPUs.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import torch

from trainer_client.model.policy import PolicySettings, PolicyWorker
from trainer_client.model.rollout import Completion, EngineSettings, SamplingSettings, make_engine

__all__ = [
    "Call",
    "Handle",
    "LocalHandle",
    "RayHandle",
    "RolloutWorker",
    "Workers",
    "free_port",
    "start_local_workers",
    "start_ray_workers",
]

logger = logging.getLogger(__name__)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RolloutWorker:
    """Holds the rollout engine (one per Ray actor or process)."""

    def __init__(self, model_path: str, settings: EngineSettings) -> None:
        self.engine = make_engine(model_path, settings)

    def generate(self, prompts: Sequence[str],
                 sampling: SamplingSettings) -> list[list[Completion]]:
        return self.engine.generate(prompts, sampling)

    def load_weights(self, state_dict: Mapping[str, torch.Tensor]) -> None:
        self.engine.load_weights(state_dict)

    def describe(self) -> dict[str, Any]:
        """The engine that actually runs (``auto`` resolved) and how (for ``run.json``)."""
        return self.engine.describe()

    def close(self) -> None:
        self.engine.close()


class Call(Protocol):
    def result(self, timeout_s: float) -> Any: ...


class Handle(Protocol):
    def call(self, method: str, *args: Any, **kwargs: Any) -> Call: ...


class _LocalCall:
    def __init__(self, handle: LocalHandle, method: str, args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:
        self.handle, self.method, self.args, self.kwargs = handle, method, args, kwargs
        self.done = False
        self.value: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        args = [a.result(0) if isinstance(a, _LocalCall) else a for a in self.args]
        try:
            self.value = getattr(self.handle.obj, self.method)(*args, **self.kwargs)
        except BaseException as e:  # re-raised from result(), like a Ray task error
            self.error = e
        self.done = True

    def result(self, timeout_s: float) -> Any:  # timeout: runs inline, cannot time out
        self.handle.run_until(self)
        if self.error is not None:
            raise self.error
        return self.value


class LocalHandle:
    """An object in this process behind the same interface as a Ray actor."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.pending: list[_LocalCall] = []

    def call(self, method: str, *args: Any, **kwargs: Any) -> _LocalCall:
        c = _LocalCall(self, method, args, kwargs)
        self.pending.append(c)
        return c

    def run_until(self, target: _LocalCall) -> None:
        while not target.done:
            self.pending.pop(0).run()


class _RayCall:
    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def result(self, timeout_s: float) -> Any:
        import ray

        return ray.get(self.ref, timeout=timeout_s)


class RayHandle:
    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def call(self, method: str, *args: Any, **kwargs: Any) -> _RayCall:
        args = tuple(a.ref if isinstance(a, _RayCall | _AllCalls) else a for a in args)
        return _RayCall(getattr(self.actor, method).remote(*args, **kwargs))


class Workers:
    """The rollout handle and the policy rank handles (rank 0 first)."""

    def __init__(self, rollout: Handle, policy: list[Handle], kill: list[Any]) -> None:
        self.rollout = rollout
        self.policy = policy
        self._kill = kill  # Ray actors / placement groups to remove on close

    def policy_call(self, method: str, *args: Any) -> Call:
        """Call ``method`` on every rank (a collective); return rank 0's call."""
        calls = [h.call(method, *args) for h in self.policy]
        return calls[0] if len(calls) == 1 else _AllCalls(calls)

    def close(self, timeout_s: float = 30.0) -> None:
        """Close engines and process groups, then kill actors. Never raises."""
        for h in [self.rollout, *self.policy]:
            try:
                h.call("close").result(timeout_s)
            except Exception as e:  # a dead actor cannot close; it is killed below
                logger.warning("close failed", extra={"error": repr(e)[:200]})
        if self._kill:
            import ray
            from ray.util.placement_group import PlacementGroup, remove_placement_group

            for obj in self._kill:
                try:
                    if isinstance(obj, PlacementGroup):
                        remove_placement_group(obj)
                    else:
                        ray.kill(obj)
                except Exception as e:
                    logger.warning("kill failed", extra={"error": repr(e)[:200]})


class _AllCalls:
    """Rank 0's result, after every rank finished (so errors on any rank surface)."""

    def __init__(self, calls: list[Any]) -> None:
        self.calls = calls
        self.ref = calls[0].ref if hasattr(calls[0], "ref") else None

    def result(self, timeout_s: float) -> Any:
        values = [c.result(timeout_s) for c in self.calls]
        return values[0]


def start_local_workers(model_path: str, engine: EngineSettings,
                        policy: PolicySettings, *, optimizer_state: str | None) -> Workers:
    """Rollout engine and a world-size-1 policy in this process."""
    rollout = RolloutWorker(model_path, engine)
    try:
        pw = PolicyWorker(policy, rank=0, world_size=1, master_port=free_port(),
                          optimizer_state=optimizer_state)
    except BaseException:
        rollout.close()
        raise
    return Workers(LocalHandle(rollout), [LocalHandle(pw)], kill=[])


def start_ray_workers(model_path: str, engine: EngineSettings, policy: PolicySettings, *,
                      world_size: int, rollout_gpus: float, optimizer_state: str | None,
                      ready_timeout_s: float) -> Workers:
    """Rollout actor + ``world_size`` policy actors in a placement group; waits until all
    are constructed. On failure, whatever was started is killed before re-raising."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    gpu = policy.device == "cuda"
    started: list[Any] = []
    try:
        bundles = [{"CPU": 1.0, **({"GPU": 1.0} if gpu else {})} for _ in range(world_size)]
        pg = placement_group(bundles, strategy="PACK")
        started.append(pg)
        ray.get(pg.ready(), timeout=ready_timeout_s)

        @ray.remote(num_cpus=0)
        def _addr() -> tuple[str, int]:
            return ray.util.get_node_ip_address(), free_port()

        in_bundle0 = PlacementGroupSchedulingStrategy(placement_group=pg,
                                                      placement_group_bundle_index=0)
        addr, port = ray.get(_addr.options(scheduling_strategy=in_bundle0).remote(),
                             timeout=ready_timeout_s)

        rollout_cls = ray.remote(RolloutWorker).options(num_cpus=1, num_gpus=rollout_gpus)
        rollout: Any = rollout_cls.remote(model_path, engine)
        started.append(rollout)
        ranks: list[Any] = []
        for rank in range(world_size):
            strategy = PlacementGroupSchedulingStrategy(placement_group=pg,
                                                        placement_group_bundle_index=rank)
            actor: Any = ray.remote(PolicyWorker).options(
                num_cpus=1, num_gpus=1 if gpu else 0, scheduling_strategy=strategy,
            ).remote(policy, rank=rank, world_size=world_size, master_addr=addr,
                     master_port=port, optimizer_state=optimizer_state)
            started.append(actor)
            ranks.append(actor)
        # constructors run asynchronously; a cheap call on each surfaces their errors
        ray.get([rollout.__ray_ready__.remote()] + [a.__ray_ready__.remote() for a in ranks],
                timeout=ready_timeout_s)
    except BaseException:
        for obj in reversed(started):
            try:
                if obj is started[0]:
                    remove_placement_group(obj)
                else:
                    ray.kill(obj)
            except Exception as e:
                logger.warning("cleanup failed", extra={"error": repr(e)[:200]})
        raise
    return Workers(RayHandle(rollout), [RayHandle(a) for a in ranks],
                   kill=[rollout, *ranks, pg])
