"""Values the host thread does not have yet.

When the Assigner runs a model's ``forward``, a layer placed on a device runs on that device's
worker (or waits on a thread for layers the host has not reached), and the host goes on with
the model's code at once, holding a ``Pending`` instead of the layer's output: the seed returns
``None`` there, which breaks any code between layers; a ``Pending`` keeps it working. Every
operation on a ``Pending`` is deferred: torch functions (through ``__torch_function__``, which
torch calls for any argument that defines it), tensor methods and attributes, Python operators
and indexing give new ``Pending`` values computed when their inputs are ready, on the thread
that completes the last of them. Only what Python itself must have now blocks: ``bool()`` of a
condition, ``int()``, ``len()``, iteration, printing, and a tensor's metadata (``.shape``,
``.size()``, ``.dtype``, ...: torch's argument parser takes sizes as ints, not as values to
come). It blocks only when the values it waits
for are sure to arrive (every layer they come from has been reached, and everything those
layers wait for too); otherwise it raises ``OrdoError`` naming the layer, instead of
deadlocking the host.

In-place operations on a pending value (``x += y``, ``x.relu_()``, ``x[i] = y``,
``inplace=True``, a layer with ``inplace=True``) are ordered as in eager code: one waits for
the work deferred before it that reads the value it writes, and the ``Pending`` it was applied
to then stands for the written value, so that the code after it reads that. (A view of the
value taken before the write is another value: code that writes through one and reads the
other between layers is not ordered.) An in-place write to a tensor the host holds happens at
once, waiting for the pending values it needs.

``Ref`` is a ``Pending``'s value as it was when a deferred operation was created: an in-place
operation later re-points the ``Pending``, not the operations already waiting for it.
"""

from __future__ import annotations

import operator
import threading
from concurrent.futures import Future
from typing import Any, Callable

import torch
from torch.utils._pytree import tree_map

import ordo

# Python's binary operators that have in-place forms (`x + y`, `x += y`), by their names in
# `operator`'s dunders.
_OPERATORS = "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split()

_IN_PLACE_DUNDERS = {f"__i{op}__" for op in _OPERATORS} | {"__setitem__"}


# Tensor attributes and methods whose values Python code computes with (sizes passed on as
# ints, dtypes compared): torch's argument parser cannot defer an int that is not one yet.
_METADATA = set(
    "shape size dim ndim ndimension numel nelement dtype device layout is_floating_point "
    "is_complex is_contiguous stride element_size requires_grad is_leaf item tolist".split()
)


def written_by(func, args, kwargs):
    """The argument a torch function writes in place (``x.add_(y)``, ``x += y``,
    ``x[i] = y``, ``inplace=True``, ``out=``), or None."""
    name = getattr(func, "__name__", "")
    dunder = name.startswith("__") and name.endswith("__")
    mutates = (
        kwargs.get("inplace") is True
        or "out" in kwargs
        or (name in _IN_PLACE_DUNDERS if dunder else name.endswith("_"))
    )
    return kwargs.get("out", args[0] if args else None) if mutates else None


class Ref:
    """A future value, as a deferred operation captured it."""

    __slots__ = ("future",)

    def __init__(self, future: Future) -> None:
        self.future = future


class Pending:
    """A value being computed for the host: a layer's output, or an operation on one."""

    __slots__ = ("__weakref__", "_future", "_layers", "_step")

    def __init__(self, future: Future, layers: frozenset[int], step: Any) -> None:
        self._future = future
        self._layers = layers  # the layers it is computed from (indices into the step's plan)
        self._step = step  # the Assigner's step that defers operations on it

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        step = _step_of((args, kwargs))
        return step.defer(func, args, kwargs, mutated=written_by(func, args, kwargs))

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in _METADATA:  # Python code uses these as Python values: wait for them
            return getattr(self._step.wait(self, f"`.{name}`"), name)
        if name.endswith("_"):  # an in-place method: x.relu_(), x.add_(y)
            return _InPlaceMethod(self, name)
        return self._step.defer(getattr, (self, name), {})

    def __call__(self, *args, **kwargs):
        return self._step.defer(_call, (self, *args), kwargs)

    def __setitem__(self, key, value) -> None:
        self._step.defer(_setitem, (self, key, value), {}, mutated=self)

    def __repr__(self) -> str:
        names = sorted(self._step.plan.layers[layer] for layer in self._layers)
        return f"<ordo pending value from layers {names}>"

    # What Python must have now: the value itself.
    def __bool__(self) -> bool:
        return bool(self._step.wait(self, "bool()"))

    def __int__(self) -> int:
        return int(self._step.wait(self, "int()"))

    def __float__(self) -> float:
        return float(self._step.wait(self, "float()"))

    def __index__(self) -> int:
        return operator.index(self._step.wait(self, "an index"))

    def __len__(self) -> int:
        return len(self._step.wait(self, "len()"))

    def __iter__(self):
        return iter(self._step.wait(self, "iteration"))

    def __contains__(self, item) -> bool:
        return item in self._step.wait(self, "`in`")

    def __str__(self) -> str:
        return str(self._step.wait(self, "str()"))

    def __format__(self, spec: str) -> str:
        return format(self._step.wait(self, "format()"), spec)

    __hash__ = object.__hash__  # identity, though `==` is deferred


class _InPlaceMethod:
    """``pending.name_`` before it is called: an in-place method of the value."""

    __slots__ = ("_name", "_target")

    def __init__(self, target: Pending, name: str) -> None:
        self._target, self._name = target, name

    def __call__(self, *args, **kwargs):
        method = operator.methodcaller(self._name, *args, **kwargs)
        return self._target._step.defer(method, (self._target,), {}, mutated=self._target)


def _setitem(target, key, value):
    """``target[key] = value``, returning ``target``: what a deferred in-place operation's
    result stands for is the value it wrote."""
    target[key] = value
    return target


def _call(function, *args, **kwargs):
    return function(*args, **kwargs)


def _binary(op: Callable) -> Callable:
    def forward(self, other):
        return self._step.defer(op, (self, other), {})

    def reflected(self, other):
        return self._step.defer(op, (other, self), {})

    return forward, reflected


def _in_place(op: Callable) -> Callable:
    def method(self, other):
        return self._step.defer(op, (self, other), {}, mutated=self)

    return method


for _name in _OPERATORS:
    _op = getattr(operator, _name + "_" if _name in ("and", "or") else _name)
    _forward, _reflected = _binary(_op)
    setattr(Pending, f"__{_name}__", _forward)
    setattr(Pending, f"__r{_name}__", _reflected)
    setattr(Pending, f"__i{_name}__", _in_place(getattr(operator, f"i{_name}")))
for _name in "eq ne lt le gt ge getitem".split():
    setattr(Pending, f"__{_name}__", _binary(getattr(operator, _name))[0])


def _unary(op: Callable) -> Callable:
    def method(self):
        return self._step.defer(op, (self,), {})

    return method


for _name in "neg pos abs invert".split():
    setattr(Pending, f"__{_name}__", _unary(getattr(operator, _name)))


def tree_apply(function: Callable, tree):
    """``tree`` with ``function`` applied to each leaf: torch's pytree, with a fast path for
    the tensors, tuples, lists and dicts that layers take (called on every layer call)."""
    kind = type(tree)
    if kind is torch.Tensor or tree is None or kind in (int, float, bool, str):
        return function(tree)
    if kind is tuple or kind is list:
        return kind([tree_apply(function, v) for v in tree])
    if kind is dict:
        return {k: tree_apply(function, v) for k, v in tree.items()}
    return tree_map(function, tree)  # a named tuple, a registered container, or a leaf


def _step_of(tree) -> Any:
    """The step of the first ``Pending`` in ``tree``."""
    leaves = pending_leaves(tree)
    if not leaves:
        raise ordo.OrdoError("internal error: a deferred operation without a pending input")
    return leaves[0]._step


def pending_leaves(tree) -> list[Pending]:
    """Every ``Pending`` in a nested structure of arguments."""
    found: list[Pending] = []
    tree_apply(lambda x: found.append(x) if isinstance(x, Pending) else None, tree)
    return found


def capture(tree):
    """``tree`` with each ``Pending`` replaced by a ``Ref`` to its value as it is now."""
    return tree_apply(lambda x: Ref(x._future) if isinstance(x, Pending) else x, tree)


def resolve(tree, timeout: float):
    """``tree`` with each ``Ref`` replaced by its value, waiting for it (at most ``timeout``
    seconds; a value that takes longer is an error, never a hang)."""
    return tree_apply(lambda x: x.future.result(timeout) if isinstance(x, Ref) else x, tree)


def when_all(futures: list[Future], callback: Callable[[], None]) -> None:
    """Calls ``callback`` once every future in ``futures`` is done, on the thread that
    completes the last one (at once, on this thread, when they all are)."""
    if not futures:
        callback()
        return
    left = [len(futures)]
    lock = threading.Lock()

    def done(_: Future) -> None:
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            callback()

    for future in futures:
        future.add_done_callback(done)


def run_into(
    future: Future,
    function: Callable,
    args,
    kwargs,
    grad: bool,
    timeout: float,
    captured_any: bool = True,
):
    """Resolves ``args`` and ``kwargs`` (when they hold ``Ref``s: ``captured_any``), calls
    ``function`` with gradients recorded or not as the host had them, and sets ``future`` to
    the result or the exception."""
    if not future.set_running_or_notify_cancel():
        return
    try:
        if captured_any:
            args, kwargs = resolve((args, kwargs), timeout)
        with torch.set_grad_enabled(grad):
            future.set_result(function(*args, **kwargs))
    except BaseException as error:  # noqa: BLE001 - handed to whoever waits for the value
        future.set_exception(error)
