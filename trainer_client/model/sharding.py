"""FSDP2 wrapping of the policy, and how its parameters are held across micro-batches.

Every decoder layer, then the root, is wrapped with ``fully_shard``; with bf16 compute over
fp32 master weights the ``MixedPrecisionPolicy`` casts the gathered parameters to bf16 for
forward and backward and reduces gradients in fp32.

At world size 1 (the CPU demos) there is nothing to shard, and FSDP2's default schedule
only costs: it re-gathers (re-casts) every parameter for each micro-batch's forward and
again for its backward, and reduces each micro-batch's gradient on its own. With ``hold``
the trained model keeps its gathered bf16 parameters from the first forward of an update to
its last micro-batch's backward (``reshard_after_forward=False``; ``reshard_after_backward``
and gradient sync off for all but the last micro-batch, :func:`accumulate`): one cast per
optimizer step, gradients accumulated unsharded in the reduction dtype (fp32) and reduced
once. The sums are the same; only the casts and copies go. At world size > 1 the default
schedule stays (holding would keep every layer's full parameters and gradients on every
rank, which is what sharding is for).
"""

from __future__ import annotations

import torch
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

__all__ = ["accumulate", "shard"]


def shard(model: torch.nn.Module, mesh: DeviceMesh, *, compute: torch.dtype,
          master: torch.dtype, hold: bool) -> None:
    """``fully_shard`` every decoder layer, then the root; bf16 compute when ``compute`` is
    not the master dtype; ``hold``: keep the gathered parameters after forward."""
    mp = MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32) \
        if compute != master else MixedPrecisionPolicy()
    layers = getattr(getattr(model, "model", None), "layers", None)
    for layer in layers or []:
        fully_shard(layer, mesh=mesh, mp_policy=mp, reshard_after_forward=not hold)
    fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=not hold)


def accumulate(model: torch.nn.Module, *, last: bool) -> None:
    """Before a held model's micro-batch backward: all but the ``last`` of an update keep
    the gathered parameters and accumulate the gradient unsharded; the last reduces it and
    frees them (so the optimizer step updates the master weights and the next forward casts
    anew)."""
    if isinstance(model, FSDPModule):
        model.set_requires_gradient_sync(last)
        model.set_reshard_after_backward(last)
