"""A module's output as tensors: what profiling and measuring read from it, and the loss they
run backward from when the caller gives none."""

from __future__ import annotations

import torch

__all__ = ["default_loss", "tensors"]


def tensors(value) -> list[torch.Tensor]:
    """Every tensor in a (nested) output: tensors, lists, tuples and dicts (a Hugging Face
    output is one) of them; anything else holds none."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors(v)]
    return []


def default_loss(output):
    """What backward starts from when the caller gives no loss: the sum of the output's
    tensors that need a gradient (0 when none does)."""
    return sum(t.float().sum() for t in tensors(output) if t.requires_grad)
