"""One process's part of a sharded call when the process is a rank of a launched group.

Why separate from the simulator's path: here the other ranks are other processes running the
same call on the same global arguments (``kinac launch`` gives every rank the same command,
so the same inputs). Each rank slices its own shard, runs its per-device program over the
process-group communicator (:mod:`kinac.rt.comm.tcp`; host segments) or, on GPUs, NCCL with
every slot on the device (:func:`run_nccl`, :mod:`kinac.rt.comm.device_run`), and the outputs
are all-gathered over the world so that every rank holds the global result, assembled exactly
as the simulator assembles it (partial shares summed in rank order, replicas from coordinate
0): the printout of rank 0 equals ``--simulate``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from kinac.rt.comm.execute import run_program
from kinac.rt.comm.layout import assemble, shard_global
from kinac.rt.comm.rendezvous import RankFailure
from kinac.rt.comm.simulator import LogEntry

if TYPE_CHECKING:
    from kinac.artifacts.sharded import DeviceProgram
    from kinac.rt.comm.rendezvous import DistEnv
    from kinac.rt.comm.tcp import TcpComm

_WORLDS: dict[tuple[tuple[int, ...], tuple[str, ...]], TcpComm] = {}


@dataclass
class RankLog:
    """What this rank ran in one call (the :class:`~kinac.rt.comm.simulator.CommLog` shape for
    one rank: every rank runs the same SPMD program)."""

    entries: list[LogEntry] = field(default_factory=list)

    def counts(self) -> dict[tuple[str, str], int]:
        out: dict[tuple[str, str], int] = {}
        for e in self.entries:
            out[e.kind, e.axis] = out.get((e.kind, e.axis), 0) + 1
        return out

    def bytes_per_device(self) -> int:
        return sum(e.nbytes for e in self.entries)

    def summary(self, per_device_only: bool = True) -> str:
        counts = self.counts()
        what = ", ".join(f"{n} {k} over {a}" for (k, a), n in sorted(counts.items())) or "none"
        return (
            f"{sum(counts.values())} collectives per device ({what}); "
            f"{self.bytes_per_device():,} bytes moved per device"
        )


def check_world(shape: tuple[int, ...], env: DistEnv) -> None:
    """A mesh of another device count than ``WORLD_SIZE`` is a usage error naming both."""
    from kinac.errors import KinaUsageError

    n = int(np.prod(shape, dtype=np.int64))
    if n != env.world_size:
        dims = "x".join(map(str, shape))
        raise KinaUsageError(
            f"the mesh ({dims}: {n} devices) needs {n} ranks, but this launch has "
            f"WORLD_SIZE={env.world_size}: launch -n {n}, or pass --distributed "
            f"{env.world_size} to resize the mesh"
        )


def world_comm(shape: tuple[int, ...], axes: tuple[str, ...], env: DistEnv) -> TcpComm:
    """The mesh's world communicator over this process group, made once per mesh."""
    from kinac.rt.comm import tcp

    check_world(shape, env)
    key = (shape, axes)
    if key not in _WORLDS:
        _WORLDS[key] = tcp.world(shape, axes, env)
    return _WORLDS[key]


def nccl_world(
    shape: tuple[int, ...], axes: tuple[str, ...], env: DistEnv, ops: Any, lib: Any = None
) -> Any:
    """The mesh's NCCL world communicator (made once per mesh by :func:`.nccl.world`) on this
    rank's GPU, receive buffers from ``ops`` (the device's pool)."""
    from kinac.rt.comm import nccl, tcp

    check_world(shape, env)
    return nccl.world(shape, axes, tcp.process_client(env), alloc=ops.empty, lib=lib)


def _gather_outputs(outs: Sequence[Any], program: DeviceProgram, comm: Any) -> list[np.ndarray]:
    """Every rank's outputs on every rank, assembled (partial shares summed in rank order,
    replicas from coordinate 0), as the simulator assembles them."""
    result = []
    for o, (_, _, lay) in zip(outs, program.outputs, strict=True):
        mine = np.ascontiguousarray(o)
        every = comm.all_gather(mine.reshape(1, *mine.shape), tag=("all-gather", "outputs"))
        result.append(assemble([every[i] for i in range(comm.size)], lay, program.mesh))
    return result


def run_nccl(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    glob: Sequence[np.ndarray],
    env: DistEnv,
    ops: Any = None,
    lib: Any = None,
) -> tuple[list[np.ndarray], RankLog]:
    """This GPU rank's run of ``program`` (device-resident: :mod:`.device_run`) on the global
    arguments; the global outputs (gathered over NCCL on the device, then brought back)."""
    from kinac.rt.comm import tcp, watchdog

    ops = ops or default_ops()
    mesh = program.mesh
    shape = tuple(int(s) for s in mesh.shape)
    comm = nccl_world(shape, tuple(str(a) for a in mesh.axes), env, ops, lib)
    client = tcp.process_client(env)
    dog = watchdog.watch(client)  # a peer's failure aborts this rank's NCCL waits
    dog.guard(comm.abort)
    try:
        got = run_on_comm(program, segments, glob, comm, ops)
    except RankFailure:
        raise
    except Exception as e:  # this rank's own error (a runtime check): the others learn it
        dog.check()  # unless a peer's failure aborted this rank's collectives: that one
        client.abort(f"{type(e).__name__}: {e}")
        raise
    dog.check()  # the collectives were aborted: what the waits returned is no result
    return got


def run_on_comm(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    glob: Sequence[np.ndarray],
    comm: Any,
    ops: Any,
) -> tuple[list[np.ndarray], RankLog]:
    """:func:`run_nccl` on a NCCL communicator made already (the CPU tests' fake ranks make
    theirs): the program bound as one graph, or step by step when it cannot be."""
    from kinac.rt.comm import device_run, program_graph
    from kinac.rt.comm.gpu_rank import device_segment
    from kinac.rt.comm.nccl_calls import trim_log

    mesh = program.mesh
    segs = [device_segment(s) for s in segments]
    pg = program_graph.bound(program, segs, comm, ops, glob)
    got = pg.run(glob) if pg is not None else None  # one graph replay, one wait
    if got is not None:
        assert pg is not None
        return got, RankLog(list(pg.entries))
    local = [
        shard_global(a, lay, mesh, comm.global_rank)
        for a, (_, _, lay) in zip(glob, program.params, strict=True)
    ]
    trim_log(comm.log)  # room for this call's window (the log is bounded: LOG_CAP)
    start = len(comm.log)
    outs = device_run.run_device_program(program, segs, comm, local, ops)
    log = RankLog(list(comm.log[start:]))
    gathered = []
    for o in outs:
        oshape = tuple(int(d) for d in o.shape)
        every = comm.all_gather(ops.view(o, (1, *oshape)), tag=("all-gather", "outputs"))
        gathered.append(every)
    ops.synchronize()
    hosts = [ops.download(g) for g in gathered]
    del comm.log[start:]
    result = [
        assemble([every[i] for i in range(comm.size)], lay, mesh)
        for every, (_, _, lay) in zip(hosts, program.outputs, strict=True)
    ]
    return result, log


_OPS: list[Any] = []


def default_ops() -> Any:
    """This process's CUDA device ops, made once (a bound program is cached per ops)."""
    if not _OPS:
        from kinac.rt.comm.device_run import CudaOps

        _OPS.append(CudaOps())
    return _OPS[0]


def run_distributed(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    glob: Sequence[np.ndarray],
    env: DistEnv,
    backend: str = "tcp",
) -> tuple[list[np.ndarray], RankLog]:
    """This rank's run of ``program`` on the global arguments; the global outputs.
    ``backend``: ``tcp`` (host segments, the process-group communicator) or ``nccl`` (GPU
    segments, device-resident, NCCL: :func:`run_nccl`)."""
    from kinac.rt.comm import tcp

    if backend == "nccl":
        return run_nccl(program, segments, glob, env)
    mesh = program.mesh
    shape = tuple(int(s) for s in mesh.shape)
    axes = tuple(str(a) for a in mesh.axes)
    comm: Any = world_comm(shape, axes, env)
    local = [
        shard_global(a, lay, mesh, comm.global_rank)
        for a, (_, _, lay) in zip(glob, program.params, strict=True)
    ]
    start = len(comm.log)
    try:
        outs = run_program(program, segments, comm, local)
    except RankFailure:
        raise  # a peer's failure, already known to every rank
    except Exception as e:  # this rank's own error (a runtime check): the others learn it
        tcp.process_client(env).abort(f"{type(e).__name__}: {e}")
        raise
    log = RankLog(list(comm.log[start:]))
    result = _gather_outputs(outs, program, comm)
    del comm.log[start:]  # the outputs' gather is the API's, not the program's
    return result, log
