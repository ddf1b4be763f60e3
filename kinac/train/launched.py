"""Data-parallel training over the ranks of a launch (``kinac launch -n N -- kinac train ...``).

Why its own class (not :class:`kinac.train.parallel.DataParallel`): there the ranks are threads
of one process and one copy of the weights is updated; here every rank is a process (its own
GPU under NCCL) holding its own copy. Every rank builds the same synthetic batch (same seed),
computes the loss and gradients of its slice (``B / N`` sequences, rank order), and averages
them over the world in place: NCCL on the gradients' device buffers for the CUDA target, the
TCP process group for the host. Every rank then applies the same update to identical weights,
so the copies stay equal without a broadcast, and a step equals ``--simulate N``'s (the TCP
group reduces in rank order, as the simulator does).

The backend is chosen from how the process was launched (:func:`launched_parallel`):
``WORLD_SIZE`` set makes this process a rank, as ``kinac.compile(..., mesh=)`` decides.
"""

from __future__ import annotations

import os
from typing import Any

from kinac.errors import KinaUsageError
from kinac.train.params import DATA, EntryInfo


def launch_rank() -> int | None:
    """This process's rank when it is one of a launch's (``WORLD_SIZE`` set), else None: the
    CLI prints progress, summaries and ``--json`` lines from rank 0 only (docs/distributed.md)."""
    if not os.environ.get("WORLD_SIZE"):
        return None
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return None  # launched_parallel reports the malformed environment


def launched_parallel(
    workspace: str, entry: str, info: EntryInfo, target: str, **options: Any
) -> Any:
    """The loss-and-gradient step of one rank of a launch, or None outside a launch."""
    if not os.environ.get("WORLD_SIZE"):
        return None
    from kinac.rt.comm.rendezvous import DistEnv

    env = DistEnv.from_env()
    if env is None:
        raise KinaUsageError(
            "WORLD_SIZE is set but not the rest of a launch's environment (RANK, MASTER_ADDR, "
            "MASTER_PORT): start it with `kinac launch -n N -- kinac train ...` or torchrun"
        )
    return LaunchedDataParallel(workspace, entry, info, env, target, **options)


class LaunchedDataParallel:
    """``value_and_grad`` of a training entry's defn on this rank's slice of the batch, the
    loss and gradients averaged over every rank of the launch (see the module docstring)."""

    def __init__(
        self, workspace: str, entry: str, info: EntryInfo, env: Any, target: str, **options: Any
    ) -> None:
        from kinac.api import compile as compile_defn
        from kinac.api_grad import value_and_grad

        n = env.world_size
        b = info.batch_shape[0]
        if b % n:
            raise KinaUsageError(
                f"kinac launch -n {n}: the batch B = {b} of `{entry}` must split evenly over "
                f"{n} ranks (data parallel)"
            )
        cd = compile_defn(workspace, entry, target=target, **options)
        assert cd.fixed is not None  # entry_info checked that it is an entry
        self.env, self.n, self.info, self.target = env, n, info, target
        names = [p.name for p in info.weights]
        # the defn itself (not the entry, whose dims fix B): dims bind from the local arrays
        self.vg = value_and_grad(workspace, cd.fixed.defn, wrt=names, target=target, **options)
        self.dims = {d: info.dims[d] for d in info.dim_params}
        self._entry: Any = None
        self._comm: Any = None
        self._outs: tuple[Any, ...] | None = None
        self.grad_buffers: dict[str, Any] | None = None  # the optimizer's (unused: see below)
        self.log: Any = None  # the last step's collectives (a RankLog)
        self._reduce: PreparedReduce | None = None  # the GPU's (_gpu_buffers)

    def local_args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """This rank's arguments: its rows of the batch, the weights as they are."""
        k = self.info.batch_shape[0] // self.n
        r = self.env.rank
        return tuple(
            a[r * k : (r + 1) * k] if p.name in DATA else a
            for a, p in zip(args, self.info.params, strict=True)
        )

    def _world(self) -> Any:
        """The launch's ``dp`` world: NCCL for the CUDA target, the TCP group on the host."""
        from kinac.rt.comm import distributed

        if self.target == "cuda":
            from kinac.rt.comm.device_run import CudaOps

            return distributed.nccl_world((self.n,), ("dp",), self.env, CudaOps())
        return distributed.world_comm((self.n,), ("dp",), self.env)

    def __call__(self, args: tuple[Any, ...]) -> tuple[Any, dict[str, Any]]:
        """The global batch's loss and gradients: this rank's, averaged over the launch."""
        import numpy as np

        from kinac.rt.comm.distributed import RankLog
        from kinac.train.optim import specialised

        local = self.local_args(args)
        if self._entry is None:
            self._entry = specialised(self.vg, local, self.dims)
        if self._comm is None:
            self._comm = self._world()
        host = self.target != "cuda"
        if host:  # into buffers made once (the process group reduces them in place)
            from kinac.rt.host.arrays import NP_DTYPES

            if self._outs is None:
                lw = self._entry.entry.lowered
                self._outs = tuple(np.empty(o.shape, NP_DTYPES[o.dtype]) for o in lw.outputs)
            outs = self._entry.entry(*local, out=self._outs)
            loss, grads = outs[0], dict(zip(self._entry.wrt, outs[1:], strict=True))
        elif self._gpu_buffers():  # into buffers made once, reduced by calls prepared once
            outs = self._entry.entry(*local, out=self._outs)
            assert self._reduce is not None
            self.log = self._reduce()
            return outs[0], dict(zip(self._entry.wrt, outs[1:], strict=True))
        else:  # device tensors, reduced in place by NCCL on the entry's stream
            loss, grads = self._entry(*local)
        comm, tag = self._comm, ("all-reduce", "data-parallel gradient")
        start = len(comm.log)
        flat = loss.reshape(1) if host else loss  # a view: the process group sends [1]
        for o in (flat, *grads.values()):  # the loss first, then the gradients in wrt order
            if not host and isinstance(o, np.ndarray):  # an output the entry put on the host
                self._reduce_staged(o, tag)
            else:
                comm.all_reduce(o, o, op="avg", tag=tag)
        self.log = RankLog(list(comm.log[start:]))
        del comm.log[start:]
        return loss, grads

    def _gpu_buffers(self) -> bool:
        """On a GPU whose entry keeps every output on the device: the loss and gradient
        buffers allocated once (the entry writes them through ``out=``, so one CUDA graph of
        its own replays at fixed addresses) and their all-reduces prepared once on them
        (:class:`PreparedReduce`). False: an entry with host outputs takes the general path."""
        if self._reduce is not None:
            return True
        entry = self._entry.entry
        if getattr(entry, "_host_outputs", True) or not hasattr(self._comm, "prepare"):
            return False
        from kinac.rt.comm.device_run import DEVICE_NAMES, CudaOps

        ops = CudaOps()
        lw = entry.lowered
        self._outs = tuple(ops.empty(tuple(o.shape), DEVICE_NAMES[o.dtype]) for o in lw.outputs)
        self._reduce = PreparedReduce(self._comm, self._outs, "avg", stream=0)
        return True

    def _reduce_staged(self, o: Any, tag: tuple[str, str]) -> None:
        """NCCL reads device memory only: a host output goes to the GPU and back."""
        from kinac.rt.comm.device_run import CudaOps

        ops = CudaOps()
        d = ops.upload(o)
        self._comm.all_reduce(d, d, op="avg", tag=tag)
        ops.synchronize()
        o[...] = ops.download(d).reshape(o.shape)


class PreparedReduce:
    """In-place all-reduces of buffers that stay the same every step (a launched step's loss
    and gradients), each prepared once (:meth:`~kinac.rt.comm.nccl.NcclComm.prepare`: shape,
    dtype, GPU, stream and communicator checked at bind time): a call is one NCCL call per
    buffer and nothing else (no layout comparison, no log append); the step's
    :class:`~kinac.rt.comm.distributed.RankLog` is built from the entries logged at bind time.

    Why: through the checked eager API each gradient cost its layout key, a dictionary
    lookup and a log append per step (about 1 us of Python each: 1.1-1.3 us against 0.12-0.18
    for a prepared call, ``benches/collectives.py --host-overhead``)."""

    def __init__(self, comm: Any, buffers: Any, op: str = "avg", stream: Any = 0) -> None:
        tag = ("all-reduce", "data-parallel gradient")
        self.calls = tuple(
            comm.prepare("all-reduce", b, b, op, stream=stream, tag=tag) for b in buffers
        )
        self.entries = [p.entry for p in self.calls]

    def __call__(self) -> Any:
        from kinac.rt.comm.distributed import RankLog

        for p in self.calls:
            p()
        return RankLog(list(self.entries))
