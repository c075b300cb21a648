"""The trained policy: an HF causal LM sharded with FSDP2, its optimizer and reference.

One :class:`PolicyWorker` per rank (a Ray actor, a spawned process, or the only process).
Ranks form a torch.distributed group (gloo on CPU, nccl on GPU) over a 1-D device mesh;
every decoder layer, then the root, is wrapped with ``fully_shard`` (:mod:`.sharding`: at
world size 1 the parameters are cast once per update, not per micro-batch). Data parallel: each
rank trains on its slice ``rank::world_size`` of the batch; FSDP2's reduce-scatter
averages the gradients.

Collective methods (every rank calls them, in order): ``train_step``, ``full_state_dict``,
``save_checkpoint`` (full state dicts on rank 0, CPU; the others get ``None``); the rollout
correction's sums and means over ranks are :mod:`trainer_client.model.correction`'s.

Aggregation is exact across micro-batches and ranks: before a mini-batch's backward passes
the ranks all-reduce its denominator (completion tokens for ``"token"``, sequences with at
least one token for ``"sequence"``); each micro-batch then backpropagates its *sum* divided
by that global count (times the world size, since FSDP2's reduce-scatter averages over
ranks). The gradient is that of the whole mini-batch's loss, however it is split.

pi_old (the ratio's denominator): with one optimizer step per rollout (``ppo_epochs`` 1, one
mini-batch) it is the training forward's own log-probabilities, detached, so the ratio is 1
and no separate scoring forward runs (``grpo.old_logprobs: auto``, a third of the step's
compute); otherwise a no-grad forward before the update. Micro-batches take rows in order
of length and are cut to their longest row: padding costs no compute.

The model stays in ``eval()`` mode, also while training (gradients flow): dropout would
make the recomputed log-probabilities, and the ratio to them, noise.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from dataclasses import asdict
from datetime import timedelta
from typing import Any, cast

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_optimizer_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel
from transformers.modeling_layers import GradientCheckpointingLayer

from trainer_client.model import correction as corr
from trainer_client.model.batch import TrainBatch
from trainer_client.model.checkpoint import (
    finalize_checkpoint,
    prune_checkpoints,
    tmp_checkpoint_path,
)
from trainer_client.model.grpo import aggregate, aggregation_weight, grpo_loss
from trainer_client.model.logprobs import batch_logprobs, token_logprobs
from trainer_client.model.pretrained import torch_dtype
from trainer_client.model.sharding import accumulate, shard
from trainer_client.settings import GRPOSettings, OptimSettings, PolicySettings

__all__ = ["GRPOSettings", "OptimSettings", "PolicySettings", "PolicyWorker", "token_logprobs"]

logger = logging.getLogger(__name__)

_LOSS_KEYS = ("losses/total", "losses/policy", "losses/kl")


class PolicyWorker:
    """One rank of the FSDP2 policy."""

    def __init__(self, settings: PolicySettings, *, rank: int, world_size: int,
                 master_addr: str = "127.0.0.1", master_port: int = 29500,
                 optimizer_state: str | None = None, start_step: int = 0) -> None:
        """Join the process group, load and shard the model (and the reference), build the
        optimizer, and load ``optimizer_state`` (a checkpoint's ``optimizer.pt``) if given.
        ``settings.model_path`` is the checkpoint's ``model/`` dir when resuming."""
        self.settings = settings
        if settings.num_threads > 0:
            torch.set_num_threads(settings.num_threads)
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(settings.device if settings.device == "cpu"
                                   else f"cuda:{torch.cuda.current_device()}")
        self._ranks = (world_size, self.device)  # for the collectives of model/correction.py
        if not dist.is_initialized():
            os.environ["MASTER_ADDR"] = master_addr
            os.environ["MASTER_PORT"] = str(master_port)
            dist.init_process_group("gloo" if settings.device == "cpu" else "nccl",
                                    rank=rank, world_size=world_size,
                                    timeout=timedelta(seconds=settings.dist_timeout_s))
        self.mesh = init_device_mesh(settings.device, (world_size,))
        self.fsdp = settings.fsdp or world_size > 1
        self._hold = self.fsdp and world_size == 1 and settings.hold_params  # sharding.py
        self.compute_dtype = torch_dtype(settings.compute_dtype)
        self.model = self._load(settings.model_path, trainable=True)
        self.ref: torch.nn.Module | None = None
        if settings.grpo.kl_coef > 0:
            self.ref = self._load(settings.ref_model_path or settings.model_path,
                                  trainable=False)
        o = settings.optim
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=o.lr,
                                           betas=(o.beta1, o.beta2), eps=o.eps,
                                           weight_decay=o.weight_decay)
        self.opt_steps = 0
        if optimizer_state is not None:
            sd = torch.load(optimizer_state, map_location="cpu", weights_only=False)
            self.opt_steps = int(sd.pop("_opt_steps", 0))
            set_optimizer_state_dict(self.model, self.optimizer, optim_state_dict=sd,
                                     options=StateDictOptions(full_state_dict=True))
        # kept in memory: on resume model_path is a checkpoint that may later be pruned
        self._config = AutoConfig.from_pretrained(settings.model_path)
        self._tokenizer = AutoTokenizer.from_pretrained(settings.model_path)
        self.blocked: torch.Tensor | None = None
        if settings.allowed_token_ids is not None:
            vocab = int(self._config.vocab_size)
            self.blocked = torch.ones(vocab, dtype=torch.bool)
            self.blocked[list(settings.allowed_token_ids)] = False
        logger.info("policy rank ready", extra={"rank": rank, "world_size": world_size})

    def _load(self, path: str, *, trainable: bool) -> torch.nn.Module:
        torch.manual_seed(0)  # identical init of anything not in the checkpoint, every rank
        extra = ({"attn_implementation": self.settings.attn_implementation}
                 if self.settings.attn_implementation else {})
        model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch_dtype(self.settings.dtype), **extra)
        model.to(self.device)  # type: ignore[arg-type]
        if trainable and self.settings.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        if self.fsdp:  # bf16 compute, fp32 master weights and reduction: sharding.py
            shard(model, self.mesh, compute=self.compute_dtype,
                  master=torch_dtype(self.settings.dtype), hold=trainable and self._hold)
        model.eval()  # no dropout: log-probs of the same tokens are the same in every pass
        if trainable and self.settings.gradient_checkpointing:
            # transformers checkpoints only in training mode: these layers alone go in it
            for m in model.modules():
                if isinstance(m, GradientCheckpointingLayer):
                    m.training = True
        if not trainable:
            model.requires_grad_(False)
        return model

    # -- training -------------------------------------------------------------------------

    def _lr(self) -> float:
        o = self.settings.optim
        if o.warmup_steps > 0 and self.opt_steps < o.warmup_steps:
            return o.lr * (self.opt_steps + 1) / o.warmup_steps
        return o.lr

    def _micro(self, b: TrainBatch) -> list[TrainBatch]:
        m = max(1, self.settings.micro_batch_size)
        return [b.select(slice(i, i + m)) for i in range(0, len(b), m)]

    def _autocast(self) -> Any:
        """bf16 compute without FSDP (world size 1, ``fsdp: false``): autocast; with FSDP
        the MixedPrecisionPolicy does the casting."""
        if self.fsdp or self.compute_dtype == torch_dtype(self.settings.dtype):
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    def _logprobs(self, model: torch.nn.Module, mb: TrainBatch, *,
                  with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        with self._autocast():
            return batch_logprobs(model, mb, self.device, temperature=self.settings.temperature,
                                  blocked=self.blocked, share_prompt=self.settings.share_prompt,
                                  with_entropy=with_entropy)

    @torch.no_grad()
    def _score(self, model: torch.nn.Module, b: TrainBatch) -> torch.Tensor:
        width = b.input_ids.shape[1] - 1
        parts = []
        for mb in self._micro(b):
            lp = self._logprobs(model, mb.trimmed())[0]  # [b, used-1]
            parts.append(torch.nn.functional.pad(lp, (0, width - lp.shape[1])))
        return torch.cat(parts).cpu()  # [B_local, L-1]

    def _reuses_forward(self, batch_size: int) -> bool:
        """pi_old from the training forward (``grpo.old_logprobs``, settings.py): exactly one
        optimizer step per rollout, so the weights of that forward are pi_old's."""
        g = self.settings.grpo
        if g.old_logprobs not in ("auto", "forward"):
            raise ValueError(f"grpo.old_logprobs must be 'auto' or 'forward', not "
                             f"{g.old_logprobs!r}")
        return (g.old_logprobs == "auto" and g.ppo_epochs == 1
                and (g.mini_batch_size or batch_size) >= batch_size)

    def _global_weight(self, local_mask: torch.Tensor) -> float:
        """The mini-batch's loss denominator summed over ranks (see the module docstring)."""
        w = aggregation_weight(local_mask, self.settings.grpo.aggregation).detach().double()
        if self.world_size > 1:
            w = w.to(self.device)
            dist.all_reduce(w)
        return float(w)

    def _backward(self, mini: TrainBatch, old_lp: torch.Tensor | None,
                  ref_lp: torch.Tensor | None, *, with_entropy: bool, add: Any,
                  is_weights: torch.Tensor | None = None,
                  correction: list[tuple[list[float], float]] | None = None
                  ) -> dict[str, float]:
        """Forward/backward of one mini-batch (this rank's rows) in micro-batches; returns
        this rank's shares of the mini-batch losses (``losses/total``, ``losses/policy``,
        ``losses/kl``: summed over ranks they are the mini-batch's losses).

        ``old_lp`` None: pi_old is each micro-batch's own forward, detached (one update per
        rollout, :meth:`_reuses_forward`); its rollout-correction weights are formed here
        and its mismatch sums appended to ``correction``. Rows go through in order of
        length and each micro-batch is cut to its longest row: the loss is a sum over rows,
        so neither changes it, and padding costs no compute. With ``share_prompt`` they keep
        the batch's order instead, so a micro-batch holds whole groups (one prompt's rows)."""
        g = self.settings.grpo
        denom = self._global_weight(mini.completion_mask[:, 1:])
        order = (torch.arange(len(mini))
                 if self.settings.share_prompt and mini.prompt_lengths is not None
                 else torch.argsort(mini.lengths(), descending=True, stable=True))
        mini = mini.select(order)
        old_lp = None if old_lp is None else old_lp[order]
        ref_lp = None if ref_lp is None else ref_lp[order]
        is_weights = None if is_weights is None else is_weights[order]
        m_size = max(1, self.settings.micro_batch_size)
        share = dict.fromkeys(_LOSS_KEYS, 0.0)
        for i in range(0, len(mini), m_size):
            r = slice(i, i + m_size)
            if self._hold:
                accumulate(self.model, last=i + m_size >= len(mini))
            mb = mini.select(r).trimmed()
            w = mb.input_ids.shape[1] - 1  # [b, w]: this micro-batch's next-token positions
            lp, ent = self._logprobs(self.model, mb, with_entropy=with_entropy)
            m = mb.completion_mask[:, 1:].to(self.device)  # [b, w]
            if old_lp is None:
                old = lp.detach()
                isw, sums, max_diff = corr.correction_local(mb, old.cpu(),
                                                            self.settings.grpo.tis_cap)
                if correction is not None:
                    correction.append((sums, max_diff))
                isw = None if isw is None else isw.to(self.device)
            else:
                old = old_lp[r, :w].to(self.device)
                isw = None if is_weights is None else is_weights[r, :w].to(self.device)
            loss, metrics = grpo_loss(
                lp, old, None if ref_lp is None else ref_lp[r, :w].to(self.device),
                mb.advantages.to(self.device), m, kl_coef=g.kl_coef,
                clip_eps_low=g.clip_eps_low, clip_eps_high=g.clip_eps_high,
                aggregation=g.aggregation, denominator=denom, is_weights=isw)
            # FSDP2 averages gradients over ranks: scale so the average is the global sum
            (loss * self.world_size).backward()
            for k in _LOSS_KEYS:
                share[k] += metrics.pop(k)
            if ent is not None:
                metrics["policy/entropy"] = float(aggregate(ent, m, "token"))
            add(metrics)  # clip fraction, ratio, entropy: means of micro-batch means
        return share

    def _local(self, batch: TrainBatch) -> TrainBatch:
        if len(batch) % self.world_size:
            raise ValueError(f"batch of {len(batch)} not divisible by world size")
        return batch.select(torch.arange(self.rank, len(batch), self.world_size))

    def gradients(self, batch: TrainBatch) -> tuple[float, dict[str, torch.Tensor] | None]:
        """Collective: the loss of ``batch`` (one mini-batch, no optimizer step) and its full
        gradient (HF names, CPU) on rank 0 (``None`` elsewhere). For checks and debugging:
        the result must not depend on ``micro_batch_size`` or the world size."""
        local = self._local(batch)
        reuse = self._reuses_forward(len(batch))
        old_lp = None if reuse else self._score(self.model, local)
        ref_lp = self._score(self.ref, local) if self.ref is not None else None
        is_w = None if old_lp is None else self._rollout_correction(local, old_lp)[0]
        self.optimizer.zero_grad(set_to_none=True)
        share = self._backward(local, old_lp, ref_lp, with_entropy=False, add=lambda m: None,
                               is_weights=is_w)
        loss = corr.sum_over_ranks([share["losses/total"]], *self._ranks)[0]
        grads = {}
        for name, p in self.model.named_parameters():
            gr = p.grad
            if gr is None:
                continue
            full = gr.full_tensor() if hasattr(gr, "full_tensor") else gr
            grads[name] = full.detach().cpu().clone()
        self.optimizer.zero_grad(set_to_none=True)
        return loss, (grads if self.rank == 0 else None)

    def train_step(self, batch: TrainBatch) -> dict[str, float]:
        """One GRPO update on ``batch`` (the full batch; this rank takes its slice).

        Returns metrics averaged over ranks (and, for losses, over optimizer steps).
        """
        g = self.settings.grpo
        local = self._local(batch)
        mask = local.completion_mask[:, 1:]  # [B_local, L-1], aligned with next-token lp
        reuse = self._reuses_forward(len(batch))
        # [B_local, L-1]; None: from the training forward itself (see _backward)
        old_lp = None if reuse else self._score(self.model, local)
        ref_lp = self._score(self.ref, local) if self.ref is not None else None
        is_w, mismatch = (None, {}) if old_lp is None else self._rollout_correction(local,
                                                                                   old_lp)
        correction: list[tuple[list[float], float]] = []  # per micro-batch, with `reuse`

        mb_global = g.mini_batch_size or len(batch)
        mb_local = max(1, mb_global // self.world_size)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}

        def add(m: dict[str, float]) -> None:
            for k, v in m.items():
                sums[k] = sums.get(k, 0.0) + v
                counts[k] = counts.get(k, 0) + 1

        losses: list[dict[str, float]] = []
        for epoch in range(g.ppo_epochs):
            for start in range(0, len(local), mb_local):
                rows = slice(start, start + mb_local)
                for group in self.optimizer.param_groups:
                    group["lr"] = self._lr()
                self.optimizer.zero_grad(set_to_none=True)
                losses.append(self._backward(local.select(rows),
                                             None if old_lp is None else old_lp[rows],
                                             None if ref_lp is None else ref_lp[rows],
                                             with_entropy=epoch == 0, add=add,
                                             is_weights=None if is_w is None else is_w[rows],
                                             correction=correction))
                if self.settings.optim.grad_clip > 0:
                    norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(),
                                                          self.settings.optim.grad_clip)
                    full = norm.full_tensor() if hasattr(norm, "full_tensor") else norm
                    add({"policy/grad_norm": float(full)})
                self.optimizer.step()
                self.opt_steps += 1
        out = {k: sums[k] / counts[k] for k in sums}
        out["policy/lr"] = self._lr()
        out = corr.mean_over_ranks(out, self.world_size,
                              None if self.settings.device == "cpu" else self.device)
        # each rank holds its share of each mini-batch loss: the loss is their sum
        totals = corr.sum_over_ranks([sum(x[k] for x in losses) for k in _LOSS_KEYS]
                                + [float(mask.sum())], *self._ranks)
        for k, v in zip(_LOSS_KEYS, totals, strict=False):
            out[k] = v / max(1, len(losses))  # mean over optimizer steps
        out["policy/tokens"] = totals[-1]
        if reuse and local.rollout_logprobs is not None:
            local_sums = [sum(v) for v in zip(*(c[0] for c in correction), strict=True)]
            mismatch = corr.correction_metrics(local_sums, max(c[1] for c in correction),
                                          self.settings.grpo.tis_cap, *self._ranks)
        out.update(mismatch)
        return out

    def _rollout_correction(self, local: TrainBatch, old_lp: torch.Tensor
                            ) -> tuple[torch.Tensor | None, dict[str, float]]:
        cap = self.settings.grpo.tis_cap
        return corr.rollout_correction(local, old_lp, cap, *self._ranks)  # collective

    # -- weights out ----------------------------------------------------------------------

    def full_state_dict(self) -> dict[str, torch.Tensor] | None:
        """Collective: unsharded weights (HF names, CPU) on rank 0; None elsewhere."""
        sd = get_model_state_dict(self.model, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True))
        return cast(dict[str, torch.Tensor], sd) if self.rank == 0 else None

    def save_checkpoint(self, root: str, step: int, trainer_state: dict[str, Any],
                        keep_last: int) -> str | None:
        """Collective: write ``root/step_NNNNNN`` (see :mod:`trainer_client.model.checkpoint`),
        then keep the newest ``keep_last``. Returns the path on rank 0."""
        sd = self.full_state_dict()
        osd = get_optimizer_state_dict(self.model, self.optimizer, options=StateDictOptions(
            full_state_dict=True, cpu_offload=True))
        if self.rank != 0:
            return None
        assert sd is not None
        tmp = tmp_checkpoint_path(root, step)
        if tmp.exists():
            shutil.rmtree(tmp)
        model_dir = tmp / "model"
        model_dir.mkdir(parents=True)
        config = self._config
        tensors = {k: v.detach().contiguous().clone() for k, v in sd.items()}
        if getattr(config, "tie_word_embeddings", False):
            tensors.pop("lm_head.weight", None)  # safetensors refuses shared storage
        save_file(tensors, str(model_dir / "model.safetensors"), metadata={"format": "pt"})
        config.save_pretrained(model_dir)
        self._tokenizer.save_pretrained(model_dir)
        to_save: dict[str, Any] = dict(osd)
        to_save["_opt_steps"] = self.opt_steps
        torch.save(to_save, tmp / "optimizer.pt")
        (tmp / "policy_settings.json").write_text(json.dumps(asdict(self.settings), default=str,
                                                             indent=1))
        final = finalize_checkpoint(root, step, trainer_state)
        prune_checkpoints(root, keep_last)
        logger.info("checkpoint saved", extra={"path": str(final), "step": step})
        return str(final)

    def barrier(self) -> None:
        dist.barrier()

    def close(self) -> None:
        """Leave the process group. Idempotent."""
        if dist.is_initialized():
            dist.destroy_process_group()
