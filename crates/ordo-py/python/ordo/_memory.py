"""The memory a schedule's activations take: the tensors autograd keeps for backward, counted
while they live, for measuring a pipeline schedule's memory on any device (a CPU has no
allocator statistics)."""

from __future__ import annotations

import torch


class SavedTensorsPeak:
    """A context manager counting the bytes of the tensors autograd saves for backward while
    it is active (on this thread: saved-tensor hooks are thread-local), each storage once,
    until the graph that saved them is freed; ``peak`` is the largest count reached.
    ``exclude``: tensors not to count (the parameters, which live anyway)."""

    def __init__(self, exclude=()) -> None:
        self._excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self._live: dict[int, list[int]] = {}  # storage -> [bytes, saves alive]
        self.current = 0
        self.peak = 0
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)

    def __enter__(self) -> SavedTensorsPeak:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)

    def _pack(self, tensor: torch.Tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key in self._excluded or storage.nbytes() == 0:
            return tensor
        entry = self._live.get(key)
        if entry is None:
            self._live[key] = [storage.nbytes(), 1]
            self.current += storage.nbytes()
            self.peak = max(self.peak, self.current)
        else:
            entry[1] += 1
        return _Saved(self, key, tensor)

    @staticmethod
    def _unpack(saved):
        return saved.tensor if isinstance(saved, _Saved) else saved

    def _release(self, key: int) -> None:
        entry = self._live[key]
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self._live[key]


class _Saved:
    """A saved tensor; when autograd frees it (its graph is freed), its count goes."""

    __slots__ = ("counter", "key", "tensor")

    def __init__(self, counter: SavedTensorsPeak, key: int, tensor: torch.Tensor) -> None:
        self.counter, self.key, self.tensor = counter, key, tensor

    def __del__(self) -> None:
        self.counter._release(self.key)
