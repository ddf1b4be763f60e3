"""One process's part of a sharded call when the process is a rank of a launched group.

Why separate from the simulator's path: here the other ranks are other processes running the
same call on the same global arguments (``kinac launch`` gives every rank the same command,
so the same inputs). Each rank slices its own shard, runs its per-device program over the
process-group communicator (:mod:`kinac.rt.comm.tcp`), and the outputs are all-gathered over
the world so that every rank holds the global result, assembled exactly as the simulator
assembles it (partial shares summed in rank order, replicas from coordinate 0): the printout
of rank 0 equals ``--simulate``'s.
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


def _nccl_world(shape: tuple[int, ...], axes: tuple[str, ...], env: DistEnv) -> Any:
    """The mesh's NCCL world communicator, staged for host slots (:mod:`.gpu_rank`)."""
    from kinac.rt.comm import gpu_rank, tcp

    check_world(shape, env)
    key = (shape, axes)
    if key not in _GPU_WORLDS:
        _GPU_WORLDS[key] = gpu_rank.nccl_world(shape, axes, tcp.process_client(env))
    return _GPU_WORLDS[key]


_GPU_WORLDS: dict[tuple[tuple[int, ...], tuple[str, ...]], Any] = {}


def run_distributed(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    glob: Sequence[np.ndarray],
    env: DistEnv,
    backend: str = "tcp",
) -> tuple[list[np.ndarray], RankLog]:
    """This rank's run of ``program`` on the global arguments; the global outputs.
    ``backend``: ``tcp`` (host segments, the process-group communicator) or ``nccl`` (GPU
    segments brought back to the host, NCCL through :class:`.gpu_rank.StagedComm`)."""
    from kinac.rt.comm import tcp

    mesh = program.mesh
    shape = tuple(int(s) for s in mesh.shape)
    axes = tuple(str(a) for a in mesh.axes)
    comm: Any = _nccl_world(shape, axes, env) if backend == "nccl" else world_comm(shape, axes, env)
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
    result = []
    for o, (_, _, lay) in zip(outs, program.outputs, strict=True):
        mine = np.ascontiguousarray(o)
        every = comm.all_gather(mine.reshape(1, *mine.shape), tag=("all-gather", "outputs"))
        result.append(assemble([every[i] for i in range(comm.size)], lay, mesh))
    del comm.log[start:]  # the outputs' gather is the API's, not the program's
    return result, log
