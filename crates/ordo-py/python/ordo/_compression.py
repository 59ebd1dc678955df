"""Compressed gradient all-reduce (ParallelExecutor's "what's next"): communication hooks for
PyTorch's ``DistributedDataParallel``, exported by ``ordo.data_parallel``.

    ddp = DistributedDataParallel(model)
    state, hook = ordo.data_parallel.compression_hook("int8")   # or "fp16", "bf16"
    ddp.register_comm_hook(state, hook)

``fp16`` and ``bf16`` are PyTorch's own hooks (each bucket cast, all-reduced, cast back).
``int8`` is ours: each rank quantizes its bucket to int8 with one scale per bucket (its
largest magnitude / 127), the ranks all-gather the int8 values and scales (a sum of int8
values would overflow), and each dequantizes and averages them: a quarter of fp32's bytes on
the wire. Rounding error is fed back: what a rank's quantization lost of a bucket is added to
that bucket's gradient at the next step (error feedback), so that the updates add up to the
uncompressed ones over time instead of drifting.
"""

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

import ordo

__all__ = ["Int8State", "compression_hook", "int8_hook"]


@dataclass
class Int8State:
    """The int8 hook's state: the process group, whether to feed rounding errors back, and
    each bucket's error from the last step."""

    group: object = None
    error_feedback: bool = True
    residuals: dict[int, torch.Tensor] = field(default_factory=dict)


def int8_hook(state: Int8State, bucket) -> torch.futures.Future[torch.Tensor]:
    # (The annotation is what DistributedDataParallel checks a hook's return by.)
    """Averages ``bucket``'s gradients over the ranks through int8 (see the module)."""
    grad = bucket.buffer()
    index = bucket.index()
    corrected = grad.float()
    residual = state.residuals.get(index)
    if state.error_feedback and residual is not None and residual.shape == corrected.shape:
        corrected = corrected + residual
    scale = corrected.abs().max().clamp_min(torch.finfo(torch.float32).tiny) / 127.0
    quantized = torch.round(corrected / scale).clamp_(-127, 127).to(torch.int8)
    if state.error_feedback:
        state.residuals[index] = corrected - quantized.float() * scale
    world = dist.get_world_size(state.group)
    values = [torch.empty_like(quantized) for _ in range(world)]
    scales = [torch.empty_like(scale.reshape(1)) for _ in range(world)]
    dist.all_gather(values, quantized, group=state.group)
    dist.all_gather(scales, scale.reshape(1), group=state.group)
    total = sum(v.float() * s for v, s in zip(values, scales))
    future: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    future.set_result((total / world).to(grad.dtype))
    return future


def compression_hook(kind: str, *, group=None, error_feedback: bool = True):
    """``(state, hook)`` to pass to ``DistributedDataParallel.register_comm_hook``: ``kind``
    is ``fp16``, ``bf16`` (PyTorch's hooks) or ``int8`` (ordo's, with ``error_feedback``)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    if kind == "fp16":
        return group, default_hooks.fp16_compress_hook
    if kind == "bf16":
        return group, default_hooks.bf16_compress_hook
    if kind == "int8":
        return Int8State(group=group, error_feedback=error_feedback), int8_hook
    raise ordo.OrdoError(f"compression `{kind}`: expected fp16, bf16 or int8")
