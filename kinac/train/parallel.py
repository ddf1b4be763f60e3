"""Data-parallel training on simulated devices (``kinac train --simulate N``).

Each of N ranks of the threaded mesh simulator (:mod:`kinac.rt.comm`, one thread per device,
collectives checked against NCCL's call-order contract) computes the loss and gradients of its
slice of the batch (``B / N`` sequences) with ``value_and_grad`` of the entry's defn at the
local batch, then all-reduces (average) the loss and every gradient over the ``dp`` axis, in
place. The averaged loss is the global batch's mean loss and the averaged gradients its
gradients (equal slices), so a step equals the single-device step up to the order of the sums.
Every replica would apply the same update to the same weights; the simulation applies it once.

Tensor-parallel (``tp``: Megatron) and 2-D (``2d``: dp x tp) layouts run the per-device
programs of the entry's gradient graph (the sharding stage on the gradient, with the transposed
collectives): ``kinac.api_grad_sharded.MeshParallel``, which has this class's interface.
"""

from __future__ import annotations

from typing import Any

from kinac.errors import KinaUsageError
from kinac.train.params import DATA, EntryInfo

LAYOUTS = ("dp", "tp", "2d")


def make_parallel(
    workspace: str, entry: str, info: EntryInfo, n: int, layout: str, **options: Any
) -> Any:
    """The loss-and-gradient step on ``n`` simulated devices in ``layout``."""
    if layout not in LAYOUTS:
        raise KinaUsageError(f"unknown layout {layout!r}: use {', '.join(LAYOUTS)}")
    if layout == "dp":
        return DataParallel(workspace, entry, info, n, **options)
    try:
        from kinac.api_grad_sharded import MeshParallel  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        raise KinaUsageError(
            f"--layout {layout} needs the sharded gradient programs "
            "(kinac.api_grad_sharded.MeshParallel), which this kinac does not have"
        ) from None
    return MeshParallel(workspace, entry, info, n, layout, **options)


class DataParallel:
    """``value_and_grad`` of a training entry's defn on ``n`` simulated devices."""

    def __init__(self, workspace: str, entry: str, info: EntryInfo, n: int, **options: Any) -> None:
        from kinac.api import compile as compile_defn
        from kinac.api_grad import value_and_grad
        from kinac.artifacts.sharded import MeshSpec

        b, _ = info.batch_shape
        if n < 1 or b % n:
            raise KinaUsageError(
                f"--simulate {n}: the batch B = {b} of `{entry}` must split evenly over {n} "
                "devices (data parallel)"
            )
        cd = compile_defn(workspace, entry, **options)
        assert cd.fixed is not None  # entry_info checked that it is an entry
        self.n, self.info = n, info
        self.mesh = MeshSpec("dp", (n,), ("dp",))
        names = [p.name for p in info.weights]
        # the defn itself (not the entry, whose dims fix B): dims bind from the local arrays
        self.vg = value_and_grad(workspace, cd.fixed.defn, wrt=names, **options)
        self.dims = {d: info.dims[d] for d in info.dim_params}
        self._entry: Any = None
        self._outs: list[tuple[Any, ...]] = []
        self.grad_buffers: dict[str, Any] | None = None  # the optimizer's, set by the trainer
        self.log: Any = None

    def local_args(self, args: tuple[Any, ...], rank: int) -> tuple[Any, ...]:
        """Rank ``rank``'s arguments: its rows of the batch, the weights as they are."""
        k = self.info.batch_shape[0] // self.n
        return tuple(
            a[rank * k : (rank + 1) * k] if p.name in DATA else a
            for a, p in zip(args, self.info.params, strict=True)
        )

    def __call__(self, args: tuple[Any, ...]) -> tuple[Any, dict[str, Any]]:
        """The global batch's loss and gradients, computed by the ranks and all-reduced."""
        import numpy as np

        from kinac.rt.comm import CommLog, simulate
        from kinac.rt.host.arrays import NP_DTYPES
        from kinac.train.optim import specialised

        if self._entry is None:
            self._entry = specialised(self.vg, self.local_args(args, 0), self.dims)
            lw = self._entry.entry.lowered
            self._outs = [
                tuple(np.empty(o.shape, NP_DTYPES[o.dtype]) for o in lw.outputs)
                for _ in range(self.n)
            ]
            # rank 0 reduces straight into the optimizer's gradient buffers
            bufs = self.grad_buffers or {}
            self._outs[0] = (self._outs[0][0],) + tuple(
                bufs[n]
                if n in bufs and bufs[n].dtype == o.dtype and bufs[n].shape == o.shape
                else o
                for n, o in zip(self._entry.wrt, self._outs[0][1:], strict=True)
            )

        def rank(comm: Any) -> None:
            outs = self._entry.entry(*self.local_args(args, comm.rank), out=self._outs[comm.rank])
            for o in outs:  # loss first, then the gradients in wrt order
                comm.all_reduce(o, o, op="avg", tag=("all-reduce", "data-parallel gradient"))

        self.log = CommLog()
        simulate(self.mesh, rank, log=self.log)
        outs = self._outs[0]  # every rank holds the same averages
        return outs[0], dict(zip(self._entry.wrt, outs[1:], strict=True))
