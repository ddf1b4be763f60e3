"""Sharded artifacts: one per-device (SPMD) program per entry, and the mesh it runs on.

Why records of their own: the per-device program is the contract between the compiler
(:mod:`kinac.shard.device` builds it from an entry's graph and its ``ShardPlan``) and the
runtime (``kinac.rt.comm`` runs it on a communicator: the threaded simulator today, NCCL
later). It is plain data, imports only the codec (the graph's ``TType`` and ``Graph`` for annotations
only, so the runtime's layer stays clear of the compiler), and is NCCL-shaped: every
step is either a compiled local segment or one collective over one mesh axis.

Value slots: slots ``0 .. len(params)-1`` hold the parameters' local arrays; every
:class:`RunSegment` and :class:`Collective` writes new slots (SSA: a slot is written once).
Values in slots are arrays in their LOCAL shapes (each dim divided by the sizes of the mesh
axes splitting it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kinac.rules.codec import record

if TYPE_CHECKING:  # annotations only: the runtime reads these records without the graph module
    from kinac.tir.graph import Graph, TType


@record
class MeshSpec:
    """A device mesh: ``shape`` with one name per axis. Ranks are row-major: rank ``r`` has
    coordinates ``numpy.unravel_index(r, shape)``."""

    name: str
    shape: tuple[int, ...]
    axes: tuple[str, ...]

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def axis_size(self, axis: str) -> int:
        """The number of ranks along mesh axis ``axis``."""
        return self.shape[self.axes.index(axis)]


@record
class ParamLayout:
    """How a parameter or output is laid out over the mesh: ``dims[i]`` are the mesh axes
    splitting dim ``i`` (major first; ``()`` whole), ``partial`` the axes over which each
    rank holds a partial sum. The API slices global arrays with it and assembles outputs
    (partial axes summed)."""

    dims: tuple[tuple[str, ...], ...]
    partial: tuple[str, ...] = ()


@record
class RunSegment:
    """Run compiled segment ``segment`` (a local-shape Graph compiled like any entry) on the
    values of slots ``inputs`` (its params, in order), writing its outputs to slots
    ``outputs``."""

    segment: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@record
class Collective:
    """One collective step: read slot ``src``, write slot ``dst``.

    ``kind``: ``all-reduce`` (``dim`` is -1; ``reduce_op`` is ``sum``), ``all-gather``
    (concatenate the ranks' locals along ``dim``, rank order along ``axis``),
    ``reduce-scatter`` (sum, then keep this rank's chunk along ``dim``), ``all-to-all``
    (split the local along ``dim`` into ``size`` chunks, chunk ``j`` to rank ``j``; the
    received chunks are concatenated along ``concat_dim``, which is ``dim`` when -1) or
    ``slice`` (local, no traffic: keep this rank's chunk along ``dim``). ``axis`` is the mesh
    axis whose ranks take part (the ranks sharing every other coordinate). ``nbytes`` is what
    one rank sends; ``span`` is ``file:line:col`` of the annotation or op that caused it
    (empty when unknown), ``reason`` one line for reports and errors."""

    kind: str
    axis: str
    src: int
    dst: int
    dim: int
    reduce_op: str
    nbytes: int
    span: str
    reason: str
    concat_dim: int = -1


@record
class DeviceProgram:
    """One entry as a program every rank runs (SPMD): the mesh, the parameters (name, LOCAL
    type, layout), the outputs (slot, LOCAL type, layout), the steps in order and the
    segments they run (local-shape graphs, compiled by the ordinary host or GPU path)."""

    mesh: MeshSpec
    params: tuple[tuple[str, TType, ParamLayout], ...]
    outputs: tuple[tuple[int, TType, ParamLayout], ...]
    steps: tuple[RunSegment | Collective, ...]
    segments: tuple[Graph, ...]

    def count(self, kind: str, axis: str | None = None) -> int:
        """How many collective steps of ``kind`` (over ``axis`` when given) the program has."""
        return sum(
            1
            for s in self.steps
            if isinstance(s, Collective) and s.kind == kind and axis in (None, s.axis)
        )
