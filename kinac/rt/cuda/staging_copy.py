"""The host copy of a staged input (numpy array -> pinned block), split across threads when big.

Why: staging a host argument is a ``memcpy`` into a page-locked block, done by the calling
thread before the call returns (the caller may rewrite its array right after). One core copies
~10-30 GB/s, so a 16 MiB input costs the host 0.5-1.5 ms per call, more than the DMA that
follows (~0.3 ms on the H200). ``numpy.copyto`` releases the GIL while it copies, so parts of
one array copy in parallel on a few worker threads. Handing work to a thread costs ~10-40 us
(a queue, a wake-up, the GIL), so only copies of at least :data:`PARALLEL_MIN_BYTES` are split,
into parts of at least a quarter of that; smaller ones are one ``copyto`` on the calling thread.

The threshold is 2 MiB: the H200 host (2026-12-02 sweep, ``benches/runtime_sweep.py``) copied
0.5 and 1 MiB at ~30 GB/s on one core (source and block within the core's cache) but 2 MiB in
185 us (~11 GB/s), while 2 MiB parts on 2 and 4 threads reached 15 and 31 GB/s together; it
was 4 MiB, in two parts of 2 MiB, before.

The result is the same bytes whatever the split (each part is an element range of the same
cast); the call waits for every part before it queues the DMA.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from typing import Any

MiB = 1 << 20
PARALLEL_MIN_BYTES = 2 * MiB


def default_workers() -> int:
    """Worker threads of the process's copier: up to 3, leaving a core to the caller."""
    return max(0, min(3, (os.cpu_count() or 1) - 1))


class HostCopier:
    """``copier(dst, src)``: ``numpy.copyto(dst, src, casting="unsafe")``, big copies split.

    ``workers`` threads are started at the first split copy (daemon threads that wait on a
    queue); ``workers=0`` never splits. ``splits`` counts the copies that were split."""

    def __init__(self, workers: int | None = None, min_bytes: int = PARALLEL_MIN_BYTES) -> None:
        self.workers = default_workers() if workers is None else workers
        self.min_bytes = min_bytes
        self.splits = 0
        self._tasks: queue.SimpleQueue[Any] | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __call__(self, dst: Any, src: Any) -> None:
        import numpy as np

        n = dst.nbytes
        if n < self.min_bytes or not self.workers:
            np.copyto(dst, src, casting="unsafe")
            return
        parts = min(self.workers + 1, max(1, 4 * n // self.min_bytes))
        if (
            parts < 2
            or src.shape != dst.shape
            or not (src.flags.c_contiguous and dst.flags.c_contiguous)
        ):
            np.copyto(dst, src, casting="unsafe")
            return
        d, s = dst.reshape(-1), src.reshape(-1)  # views (both contiguous): element ranges
        bounds = [d.size * k // parts for k in range(parts + 1)]
        jobs = [
            (_copyto, (d[bounds[k] : bounds[k + 1]], s[bounds[k] : bounds[k + 1]]))
            for k in range(parts)
        ]
        self._run(jobs)

    def streaming(
        self, raw: Callable[[int, int, int], None], counts: Any = None
    ) -> Callable[[Any, Any], None]:
        """``copy(dst, src)``: :meth:`__call__` with each part written by ``raw(dst address,
        src address, bytes)`` (the streaming-store copy of :mod:`~kinac.rt.cuda.staging_nt`),
        the parts cut at 4 KiB multiples of ``dst`` (aligned as its stores need), when both
        arrays are C-contiguous of one dtype (no cast) and ``dst`` is page-aligned (counted in
        ``counts.streamed`` when ``counts`` is given); else the plain :meth:`__call__`."""

        def copy(dst: Any, src: Any) -> None:
            n = dst.nbytes
            dp = dst.ctypes.data
            if (
                not self.workers
                or n < self.min_bytes
                or dp % 4096
                or src.dtype != dst.dtype
                or src.shape != dst.shape
                or not (src.flags.c_contiguous and dst.flags.c_contiguous)
            ):
                self(dst, src)
                return
            sp = src.ctypes.data
            parts = min(self.workers + 1, max(1, 4 * n // self.min_bytes))
            cuts = [0, *[(n * k // parts) & ~4095 for k in range(1, parts)], n]
            self._run(
                [
                    (raw, (dp + a, sp + a, b - a))
                    for a, b in zip(cuts[:-1], cuts[1:], strict=True)
                    if b > a
                ]
            )
            if counts is not None:
                counts.streamed += 1

        return copy

    def _run(self, jobs: list[tuple[Callable[..., None], tuple[Any, ...]]]) -> None:
        """Run ``jobs`` (``(function, arguments)``): the first on the calling thread, the
        others on the workers; return when every one is done (raise the first error)."""
        tasks = self._start() if len(jobs) > 1 else None
        done: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()
        for job in jobs[1:]:
            tasks.put((*job, done))  # type: ignore[union-attr]
        err: BaseException | None = None
        try:
            jobs[0][0](*jobs[0][1])
        except BaseException as e:  # noqa: BLE001 - wait for the workers before raising
            err = e
        for _ in range(1, len(jobs)):
            got = done.get()
            err = err or got
        if err is not None:
            raise err
        if len(jobs) > 1:
            self.splits += 1

    def _start(self) -> queue.SimpleQueue[Any]:
        with self._lock:
            if self._tasks is None or self._pid != os.getpid():  # (a forked child: no threads)
                self._pid = os.getpid()
                tasks: queue.SimpleQueue[Any] = queue.SimpleQueue()
                for k in range(self.workers):
                    t = threading.Thread(
                        target=_work, args=(tasks,), name=f"kinac-stage-{k}", daemon=True
                    )
                    t.start()
                self._tasks = tasks
            return self._tasks


def _copyto(dst: Any, src: Any) -> None:
    import numpy as np

    np.copyto(dst, src, casting="unsafe")


def _work(tasks: queue.SimpleQueue[Any]) -> None:
    while True:
        fn, args, done = tasks.get()
        try:
            fn(*args)
            done.put(None)
        except BaseException as e:  # noqa: BLE001 - handed back to the caller, who raises it
            done.put(e)


_copier: HostCopier | None = None


def default_copier() -> HostCopier:
    """The process's copier (its threads are shared by every entry)."""
    global _copier
    if _copier is None:
        _copier = HostCopier()
    return _copier
