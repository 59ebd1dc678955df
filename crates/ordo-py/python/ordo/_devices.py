"""Logical devices on the CPU, as the Assigner's compute streams."""

from __future__ import annotations

import queue
import threading
from typing import Callable

__all__ = ["Inline", "Worker", "close_all"]


class Worker:
    """A logical device's compute stream on the CPU: one thread running the jobs submitted to
    it one at a time, in submission order."""

    def __init__(self, index: int) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._loop, name=f"ordo device {index}", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._queue.put(job)

    def _loop(self) -> None:
        while (job := self._queue.get()) is not None:
            job()

    def close(self) -> None:
        """Stops the thread once the jobs submitted so far have run (joined, so that it never
        outlives the interpreter's shutdown)."""
        self._queue.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(5.0)


class Inline:
    """A device whose jobs run on the thread that submits them."""

    @staticmethod
    def submit(job: Callable[[], None]) -> None:
        job()

    def close(self) -> None:
        pass


def close_all(devices) -> None:
    for device in devices:
        device.close()
