"""A layer whose backward computes only its input gradient (dX) during ``loss.backward()``,
its weight gradients (dW) later, when asked: what reverse first-k needs from PyTorch, whose
backward computes a layer's dX and dW together.

The layer's forward runs inside an autograd ``Function`` on detached copies of its inputs, so
that it records a graph of its own (its outputs from those inputs and its parameters). The
``Function``'s backward differentiates that inner graph with respect to the inputs only
(autograd then computes no weight gradient: each node computes only the gradients that lead
somewhere asked for), keeps the graph and the output gradients, and ``weight_grads``
differentiates it with respect to the parameters afterwards. Both run the same backward
formulas that one combined backward runs, so the gradients are bitwise those of unsplit
autograd (the tests check it for linear, convolution and normalization layers).
"""

from __future__ import annotations

import torch
from torch.utils import _pytree as pytree


class SplitCall:
    """One call of a split layer in a training step: the inner graph's inputs and outputs and,
    after ``loss.backward()``, the gradients of its outputs."""

    def __init__(self, name: str, params: list[torch.Tensor], on_backward) -> None:
        # on_backward(): called when the backward has computed the call's input gradients.
        self.name, self.params, self.on_backward = name, params, on_backward
        self.leaves: list[torch.Tensor] = []
        self.outputs: list[torch.Tensor] = []
        self.output_grads: list[torch.Tensor] | None = None

    def weight_grads(self) -> list[torch.Tensor]:
        """The parameters' gradients (zeros for a parameter the call did not use); frees the
        inner graph."""
        if self.output_grads is None:
            raise RuntimeError(f"layer `{self.name}`: no backward reached it")
        grads = torch.autograd.grad(self.outputs, self.params, self.output_grads, allow_unused=True)
        self.outputs, self.leaves, self.output_grads = [], [], None
        return [torch.zeros_like(p) if g is None else g for p, g in zip(self.params, grads)]


class _Split(torch.autograd.Function):
    """Inputs: the ``SplitCall``, the layer's forward and its arguments' structure, then the
    tensor arguments that need a gradient, then the parameters (so that the outputs need a
    gradient even where no input does, and the backward runs)."""

    @staticmethod
    def forward(ctx, call, forward, spec, constants, slots, *tensors):
        inputs = tensors[: len(slots)]
        with torch.enable_grad():
            call.leaves = [t.detach().requires_grad_() for t in inputs]
            flat = list(constants)
            for slot, leaf in zip(slots, call.leaves):
                flat[slot] = leaf
            args, kwargs = pytree.tree_unflatten(flat, spec)
            output = forward(*args, **kwargs)
        outputs, out_spec = pytree.tree_flatten(output)
        call.outputs = [o for o in outputs if isinstance(o, torch.Tensor) and o.requires_grad]
        call.out_spec, call.out_flat = out_spec, outputs
        ctx.call = call
        return tuple(o.detach() for o in call.outputs)

    @staticmethod
    def backward(ctx, *grads):
        call = ctx.call
        call.output_grads = list(grads)
        input_grads = (
            torch.autograd.grad(
                call.outputs, call.leaves, grads, retain_graph=True, allow_unused=True
            )
            if call.leaves
            else ()
        )
        call.on_backward()
        return (None, None, None, None, None, *input_grads, *[None] * len(call.params))


def split_call(call: SplitCall, forward, args: tuple, kwargs: dict):
    """Runs ``forward(*args, **kwargs)`` (a layer's own forward) so that its backward computes
    only the input gradients, ``call`` keeping what ``weight_grads`` needs; returns the
    layer's output, its tensors detached from the inner graph and attached to the split."""
    flat, spec = pytree.tree_flatten((args, kwargs))
    slots = [i for i, v in enumerate(flat) if isinstance(v, torch.Tensor) and v.requires_grad]
    constants = [None if i in slots else v for i, v in enumerate(flat)]
    inputs = [flat[i] for i in slots]
    results = _Split.apply(call, forward, spec, constants, slots, *inputs, *call.params)
    results = iter(results)
    out_flat = [
        next(results) if isinstance(o, torch.Tensor) and o.requires_grad else o
        for o in call.out_flat
    ]
    return pytree.tree_unflatten(out_flat, call.out_spec)
