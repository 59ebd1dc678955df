"""One step of the Assigner: the host reaching layers, the threads that wait, the work
deferred between layers, and the end of the step (see ``ordo._assigner`` for the protocol).

The bookkeeping of every layer call (which layer it is, whether the host submits it or a
thread waits, the submissions and the waits for them) is ordo's Rust ``HostStep``, whose
locking is written down in ``crates/ordo-py/src/host_step.rs``: threads waiting for
submissions block there, with the interpreter's lock released. The rest of ``Step`` is touched
by the host thread only (the futures and their readers, the watches). Layers are indices into
``Plan.layers`` here.
"""

from __future__ import annotations

import functools
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode

import ordo
from ordo._cuda import GpuDevice, StreamOps, StreamStep
from ordo._ordo import AssignerPlan
from ordo._pending import (
    Pending,
    capture,
    pending_leaves,
    resolve,
    run_into,
    tree_apply,
    when_all,
    written_by,
)

__all__ = ["HostWrites", "Plan", "Step"]

# How a layer the host reaches runs (``HostStep.arrive``): on the host now, on the host once
# what it waits for has submitted, or on a thread of its own that waits.
_ON_HOST_AFTER_WAIT, _ON_THREAD = 1, 2


class Plan:
    """A placement as the Assigner looks it up: the layers (a layer's index is its place
    here), each one's device and each device's order, and the Rust side's ``AssignerPlan``
    (its ``modules`` are the wrapped modules' qualified names, in the order the wrappers pass
    them)."""

    def __init__(self, placement) -> None:
        self.layers: list[str] = list(placement.layers)
        self.device_of: list[int] = [placement.device_of[layer] for layer in self.layers]
        self.device_order: list[list[str]] = [list(o) for o in placement.device_order]
        self.lookup = AssignerPlan.of_plan(placement.problem, placement.planned)
        if self.lookup.layers != self.layers:
            raise ordo.OrdoError("the placement's plan is not of its profile's layers")
        self.modules: list[str] = self.lookup.modules


class _Aborted(Exception):
    """The step failed elsewhere; a waiting layer gives up."""


class _OnHost:
    """``Step._layer_on_host``'s context (a class: a generator-based context manager costs
    more than a small layer's launch on a GPU). The modes are popped and pushed back with
    torch's own stack functions (what `torch.overrides._pop_mode_temporarily` calls)."""

    __slots__ = ("step", "popped")

    def __init__(self, step: Step) -> None:
        self.step = step

    def __enter__(self) -> None:
        step = self.step
        self.popped = popped = []
        watch, gpu_ops = step.watch, step.gpu_ops
        if watch is not None or gpu_ops is not None:
            while torch._C._len_torch_function_stack():
                top = torch.overrides._get_current_function_mode()
                if top is None or (top is not watch and top is not gpu_ops):
                    break
                popped.append(torch._C._pop_torch_function_stack())
        step.in_layer = True

    def __exit__(self, *exc) -> None:
        self.step.in_layer = False
        for mode in reversed(self.popped):
            torch._C._push_on_torch_function_stack(mode)


class Step:
    """One call of the distributed module's ``forward``."""

    def __init__(self, assigner) -> None:
        self.plan: Plan = assigner.plan
        self.devices = assigner.devices
        self.runs_inline: list[bool] = assigner.runs_inline
        self.core = self.plan.lookup.step(
            assigner.reorder, assigner.criterion, assigner.runs_inline
        )
        self.timeout = assigner.timeout
        self.threads: list[str] = []
        self.futures: list[tuple[str, Future]] = []  # every value of the step, in order
        # Per value (its future): the deferred work that reads it, which an in-place write of
        # the value must wait for.
        self.readers: dict[Future, list[Future]] = {}
        # Per storage of a tensor the host holds: the deferred work that reads it, with the
        # layers it waits for; the host waits for it before writing that storage in place.
        self.tensor_readers: dict[int, list[tuple[Future, frozenset[int]]]] = {}
        self.in_layer = False  # the host is running a layer: its own operations are not watched
        # The watch on the host's in-place writes, from the step's first deferred work on
        # (before, nothing can read what the host writes): a torch function mode sends every
        # operation through torch's slow dispatch, so it is not on while nothing needs it.
        self.watch: HostWrites | None = None
        # On GPUs: the stream protocol, and its watch on the host's operations between layers
        # (from the start: any of them may read what a layer's stream produced).
        self.gpu: StreamStep | None = None
        self.gpu_ops: StreamOps | None = None
        if assigner.gpu:
            copy_all = assigner.copy_between_logical_devices
            self.gpu = StreamStep(self.devices, assigner.transfers, copy_all)
            self.gpu_ops = StreamOps(self, self.gpu)
            self.gpu_ops.__enter__()
            self.core.watching()  # every layer call goes through `call`

    # -- the host reaches a layer ------------------------------------------------------------

    def call(self, module: int, forward: Callable, args: tuple, kwargs: dict, inplace: bool):
        """The host calls wrapped module ``module`` (its index in ``Plan.modules``);
        ``inplace``: the module writes its first argument (``inplace=True``)."""
        # The common case first: tensors the host holds, nothing pending.
        plain = not kwargs
        if plain:
            for a in args:
                if type(a) is not torch.Tensor:
                    plain = False
                    break
        if plain:
            leaves: list[Pending] = []
            after: list[Future] = []
            came_from = None
        else:
            leaves = pending_leaves((args, kwargs))
            after = [p._future for p in leaves]
            came_from = list(frozenset().union(*(p._layers for p in leaves))) if leaves else None
        # A layer that writes its input comes after what read it before.
        written = None
        if inplace and args:
            written = args[0]
            if isinstance(written, Pending):
                after += self.readers.get(written._future, [])
            elif isinstance(written, torch.Tensor):
                self.before_host_write(written)
        layer, how = self.core.arrive(module, came_from)
        return self._reached(layer, how, forward, args, kwargs, leaves, after, written)

    def arrived(self, layer: int, how: int, forward: Callable, args: tuple, kwargs: dict, _):
        """``call`` for a layer that ``LayerCall`` has reached already (plain tensor
        arguments, not in place) and does not run itself."""
        return self._reached(layer, how, forward, args, kwargs, [], [], None)

    def _reached(self, layer, how, forward, args, kwargs, leaves, after, written):
        """The rest of ``call`` once ``layer`` is reached: ``how`` it runs (``arrive``)."""
        device = self.devices[self.plan.device_of[layer]]
        if isinstance(device, GpuDevice):  # launched on its stream, by either path below
            forward = functools.partial(
                self.gpu.launch, self.plan.layers[layer], device, forward, written is not None
            )
        # `runs_inline`: an Inline device (a GPU's included: launches are asynchronous).
        if how != _ON_THREAD and not after and self.runs_inline[layer]:
            # The common case, kept cheap: it runs here, now, on values the host has.
            if how == _ON_HOST_AFTER_WAIT:
                self._wait_submitted(layer)
            if self.watch is None and self.gpu_ops is None:  # no mode to step aside
                self.in_layer = True
                try:
                    value = forward(*args, **kwargs)
                finally:
                    self.in_layer = False
            else:
                with self._layer_on_host():
                    value = forward(*args, **kwargs)
            self.core.mark_submitted(layer)
            return value
        name = self.plan.layers[layer]
        self._watch_host_writes()
        future: Future = Future()
        self.futures.append((f"layer `{name}`", future))
        self._read_by(leaves, future)
        self._tensors_read_by((args, kwargs), future, frozenset((layer,)))
        captured = capture((args, kwargs)) if leaves else (args, kwargs)
        if isinstance(written, Pending):  # it stands for the written value from now on
            written._future = future
        grad = torch.is_grad_enabled()
        timeout = self.timeout

        def job() -> None:
            try:
                for f in after:
                    f.exception(timeout)  # ready (its error, if any, reaches us as an input)
            except FutureTimeout:
                future.set_exception(ordo.OrdoError(f"layer `{name}`: inputs not ready"))
                return
            run_into(future, forward, *captured, grad, timeout, bool(leaves))

        if how != _ON_THREAD:
            if how == _ON_HOST_AFTER_WAIT:
                self._wait_submitted(layer)
            with self._layer_on_host():
                self._submit(layer, job)
            return Pending(future, frozenset((layer,)), self)
        self.threads.append(name)
        threading.Thread(target=self._deferred, args=(layer, job, future), daemon=True).start()
        return Pending(future, frozenset((layer,)), self)

    @property
    def code_order(self) -> list[str]:
        """The layers the host reached, in the order it reached them."""
        return self.core.code_order()

    def _layer_on_host(self) -> _OnHost:
        """A layer runs on the host: its own operations are not watched (for in-place writes,
        or for streams: the layer's launch orders its streams). The watching modes leave the
        stack meanwhile (when they are on top: every operation under a torch function mode
        takes torch's slow dispatch path, 10% of a small model's step), else they stand
        aside."""
        return _OnHost(self)

    def _watch_host_writes(self) -> None:
        """Deferred work exists from now on: the host's in-place writes are watched."""
        if self.watch is None:
            self.watch = HostWrites(self)
            self.watch.__enter__()
            self.core.watching()  # every layer call goes through `call`

    def unwatch(self) -> None:
        """The host's forward is over (on the host thread): the watches end (the last one
        entered first)."""
        if self.watch is not None:
            watch, self.watch = self.watch, None
            watch.__exit__(None, None, None)
        if self.gpu_ops is not None:
            gpu_ops, self.gpu_ops = self.gpu_ops, None
            gpu_ops.__exit__(None, None, None)

    def _deferred(self, layer: int, job: Callable, future: Future) -> None:
        """A layer's thread: waits until it may submit, then submits."""
        try:
            self._wait_submitted(layer)
            self._submit(layer, job)
        except BaseException as error:  # noqa: BLE001 - the host raises it from `finish`
            if not future.done():
                future.set_exception(error)

    def _wait_submitted(self, layer: int) -> None:
        """Until what ``layer`` waits for has submitted (an ``OrdoError`` after the timeout;
        ``_Aborted`` when the step failed meanwhile)."""
        if not self.core.wait_submitted(layer, self.timeout):
            raise _Aborted(f"layer `{self.plan.layers[layer]}`: the step failed")

    def _submit(self, layer: int, job: Callable) -> None:
        self.devices[self.plan.device_of[layer]].submit(job)
        self.core.mark_submitted(layer)

    # -- operations between layers -----------------------------------------------------------

    def defer(self, func: Callable, args: tuple, kwargs: dict, mutated=None):
        """``func(*args, **kwargs)`` once the pending values in them are ready (at once, here,
        when they already are); ``mutated``: the argument an in-place operation writes."""
        if self.gpu is not None:  # on the stream of the thread that runs it, after its inputs
            func = functools.wraps(func)(self.gpu.synced(func))
        if mutated is not None and not isinstance(mutated, Pending):
            # A tensor the host holds is written now, as in eager code, with the values the
            # write needs (waited for).
            args, kwargs = tree_apply(
                lambda x: self.wait(x, "an in-place write") if isinstance(x, Pending) else x,
                (args, kwargs),
            )
            if isinstance(mutated, torch.Tensor):
                self.before_host_write(mutated)
            return func(*args, **kwargs)
        leaves = pending_leaves((args, kwargs))
        after = [p._future for p in leaves]
        layers = frozenset().union(*(p._layers for p in leaves)) if leaves else frozenset()
        if mutated is not None:  # after the work that read the value it writes
            after += self.readers.get(mutated._future, [])
        if all(f.done() for f in after):
            args, kwargs = resolve(capture((args, kwargs)), self.timeout)
            value = func(*args, **kwargs)
            if isinstance(mutated, Pending):  # it stands for the written value from now on
                done: Future = Future()
                done.set_result(value)
                mutated._future, mutated._layers = done, layers
            return value
        self._watch_host_writes()
        future: Future = Future()
        name = getattr(func, "__name__", type(func).__name__)
        self.futures.append((f"operation `{name}` between layers", future))
        self._read_by(leaves, future)
        self._tensors_read_by((args, kwargs), future, layers)
        captured = capture((args, kwargs))
        grad, timeout = torch.is_grad_enabled(), self.timeout
        when_all(after, lambda: run_into(future, func, *captured, grad, timeout))
        result = Pending(future, layers, self)
        if mutated is not None:  # it stands for the written value from now on
            mutated._future, mutated._layers = future, layers
        return result

    def _read_by(self, leaves: list[Pending], reader: Future) -> None:
        for p in leaves:
            self.readers.setdefault(p._future, []).append(reader)

    def _tensors_read_by(self, tree, reader: Future, layers: frozenset[int]) -> None:
        """Records that deferred work ``reader`` (waiting for ``layers``) reads the tensors the
        host holds in ``tree``."""

        def record(x) -> None:
            if isinstance(x, torch.Tensor) and x.layout == torch.strided:
                key = x.untyped_storage().data_ptr()
                self.tensor_readers.setdefault(key, []).append((reader, layers))

        tree_apply(record, tree)

    def before_host_write(self, tensor: torch.Tensor) -> None:
        """The host is about to write ``tensor`` in place: the deferred work that reads its
        storage must read it first, as it would in code order."""
        # Nothing read by deferred work yet (the usual case: every layer so far ran on the
        # host): nothing to wait for. Only the host's thread reads and writes the registry.
        if not self.tensor_readers:
            return
        # The tensor's metadata without the watching torch function modes (on the host, a
        # layer writing its input in place comes here while they are on the stack).
        with torch._C.DisableTorchFunction():
            if tensor.layout != torch.strided:
                return
            key = tensor.untyped_storage().data_ptr()
        readers = self.tensor_readers.get(key, [])
        for reader, layers in readers:
            if reader.done():
                continue
            stuck = self._unreached_dependency(layers)
            if stuck is not None:
                raise ordo.OrdoError(
                    f"the model's forward writes a tensor in place that work waiting for layer "
                    f"`{stuck[1]}` (not reached yet) reads: ordo cannot reorder the layers "
                    f"there; distribute with reorder=False, or write a copy"
                )
            reader.exception(self.timeout)

    def wait(self, pending: Pending, what: str):
        """The value of ``pending``, which the model's code needs now (``what``)."""
        stuck = self._unreached_dependency(pending._layers)
        if stuck is not None:
            layer, missing = stuck
            raise ordo.OrdoError(
                f"the model's forward needs {what} of a value computed from layer `{layer}`, "
                f"which waits for layer `{missing}` that the host has not reached yet: ordo "
                f"cannot reorder the layers there; distribute with reorder=False, or make that "
                f"code part of a layer (leaf_modules)"
            )
        try:
            return pending._future.result(self.timeout)
        except FutureTimeout:
            message = f"{what} of {pending!r}: not ready after {self.timeout:g} s"
            raise ordo.OrdoError(message) from None

    def _unreached_dependency(self, layers) -> tuple[str, str] | None:
        """A layer of ``layers`` that cannot submit yet, with the unreached layer it waits
        for (by name), or None when all of them will submit without the host going further."""
        found = self.core.unreached_dependency(list(layers))
        if found is None:
            return None
        return self.plan.layers[found[0]], self.plan.layers[found[1]]

    # -- the end of the step -----------------------------------------------------------------

    def finish(self, output):
        """Releases the layers not reached, waits for everything of the step, and returns the
        output with its values ready."""
        self.core.release_unreached()
        first = None
        for what, future in self.futures:
            try:
                error = future.exception(self.timeout)
            except FutureTimeout:
                message = f"{what} did not finish within {self.timeout:g} s"
                raise ordo.OrdoError(message) from None
            if error is not None and first is None:
                first = (what, error)
        if first is not None:
            what, error = first
            if hasattr(error, "add_note"):
                error.add_note(f"(in {what}, run by ordo.torch.distribute)")
            raise error
        output = resolve(capture(output), self.timeout)
        return output if self.gpu is None else self.gpu.finish(output)

    def abort(self) -> None:
        """The host failed: every waiting layer gives up, and the step's work is waited for so
        that nothing of it runs into the next step."""
        self.core.fail()
        for _, future in self.futures:
            try:
                future.exception(self.timeout)
            except FutureTimeout:
                break
        if self.gpu is not None:  # what was launched stays ordered before the next step
            self.gpu.finish(None)


class HostWrites(TorchFunctionMode):
    """Watches the torch operations the host runs between layers: before one writes a tensor
    in place, the deferred work that reads it runs (``Step.before_host_write``)."""

    def __init__(self, step: Step) -> None:
        super().__init__()
        self.step = step

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.step.in_layer:
            target = written_by(func, args, kwargs)
            if isinstance(target, torch.Tensor) and not isinstance(target, Pending):
                self.step.before_host_write(target)
        return func(*args, **kwargs)
