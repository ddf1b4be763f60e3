"""One GPU rank's per-device program as one CUDA graph: inputs in, segments, collectives, out.

Why: issue 13's scaling row measured the Megatron block on a mesh of one through NCCL at
2.427 ms per call against 0.710 ms unsharded (H200, 2026-12-02 01:25), although the
program is the same kernels plus two all-reduces that cost ~6 us each eager and ~1.4 us
captured. The step-by-step runner (:func:`kinac.rt.comm.device_run.run_device_program`) paid,
every call: a pageable, synchronous upload of every shard into a fresh pool tensor (a driver
copy and a wait each), a general call of every segment's GPU entry on new tensor objects (the
per-argument import and checks, outputs from the pool, a graph per address tuple: addresses
that move make arguments *volatile*, a device copy each), a checked collective per step (the
layout compared, a receive buffer allocated, a log entry), the outputs' checked all-gather,
a device-wide synchronisation and a pageable download.

Here the program is bound once per (program, communicator, shard shapes and dtypes):

- every slot gets a buffer of its own, allocated once: each param a device buffer and a
  page-locked host buffer, each segment output a device buffer of the segment graph's type,
  each collective's receive buffer (``comm.prepare``: checked once), each output's gathered
  buffer and a page-locked host buffer for it;
- the steps become calls on those fixed addresses, all on one stream: the host-to-device
  copies from the page-locked inputs, each segment's own launch sequence bound to its
  buffers (the entry's kernels and cuBLAS calls: what its own CUDA graph holds), each
  collective as its prepared NCCL call (dim moves as 2-D copies between fixed buffers), the
  outputs' all-gather over the world and the device-to-host copies into page-locked memory;
- the first call runs them once eagerly (library set-up, NCCL's first call) and captures them
  into one CUDA graph; every later call copies each shard into its page-locked buffer (a host
  ``memcpy``, what the unsharded entry's staging does), launches the graph once, waits for
  the stream once and assembles the outputs from the page-locked buffers. No check, no
  allocation, no log append per call: the step entries were logged once, at bind time
  (:attr:`ProgramGraph.entries`), and every call reports them.

A program this cannot bind (a segment that is not a GPU entry of fixed outputs, one with
runtime checks to read back or outputs placed on the host, a misaligned view) raises
:class:`~kinac.rt.comm.device_run.NotGraphable` while binding, and the caller runs it step
by step as before. The device is :class:`~kinac.rt.comm.device_run.CudaOps` (the GPU) or
:class:`~kinac.rt.comm.device_run.HostOps` (numpy buffers: the CPU tests, whose "graph"
replays the same calls eagerly). ``KINAC_PROGRAM_GRAPH=0`` turns the graph off (A/B).
"""

from __future__ import annotations

import math
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kinac.artifacts.sharded import RunSegment
from kinac.errors import KinaRuntimeError
from kinac.rt.comm.device_run import DEVICE_NAMES, NotGraphable, device_collective
from kinac.rt.comm.gpu_rank import device_dtype
from kinac.rt.comm.nccl import buffer_of
from kinac.rt.comm.nccl_plan import stream_handle
from kinac.rt.comm.rendezvous import RankFailure

if TYPE_CHECKING:
    from kinac.artifacts.sharded import DeviceProgram
    from kinac.rt.comm.simulator import LogEntry

ENV = "KINAC_PROGRAM_GRAPH"
MAX_GRAPHS = 8  # bound programs kept (LRU): each holds its buffers and its graph
Step = Callable[[Any], None]


def enabled() -> bool:
    """Whether a rank's program runs as one graph (``KINAC_PROGRAM_GRAPH=0``: step by step)."""
    return os.environ.get(ENV, "1") != "0"


def on_stream(call: Callable[[], Any]) -> Step:
    """A prepared call (bound to the program's stream already) as a step."""

    def step(stream: Any) -> None:
        call()

    return step


class _Group:
    """A sub-communicator while the program is bound: a collective step becomes a prepared
    call on the step's fixed send buffer, its receive buffer allocated once."""

    def __init__(self, real: Any, pg: ProgramGraph) -> None:
        self._real, self._pg = real, pg
        self.size, self.rank = real.size, real.rank

    def run_step(self, kind: str, send: Any, op: str, stream: int, tag: Any, step: Any) -> Any:
        p = self._real.prepare(kind, send, None, op, stream=stream, tag=tag)
        self._pg.add(on_stream(p), collective=True)
        self._pg.entries.append(p.entry)
        return p.recv


class _Comm:
    """The world communicator while binding (:func:`device_collective` reads ``sub``)."""

    def __init__(self, real: Any, pg: ProgramGraph) -> None:
        self._real, self._pg = real, pg
        self._subs: dict[str, _Group] = {}

    def sub(self, axis: str) -> _Group:
        if axis not in self._subs:
            self._subs[axis] = _Group(self._real.sub(axis), self._pg)
        return self._subs[axis]


class _Ops:
    """The device while binding: buffers kept for the graph's life, 2-D copies recorded."""

    def __init__(self, real: Any, pg: ProgramGraph) -> None:
        self._real, self._pg = real, pg
        self.copies = 0

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Any:
        t = self._real.empty(tuple(shape), dtype)
        self._pg.keep.append(t)
        return t

    def view(self, buf: Any, shape: tuple[int, ...], offset: int = 0) -> Any:
        return self._real.view(buf, shape, offset)

    def copy2d(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, stream: Any
    ) -> None:
        real = self._real
        self.copies += 1
        self._pg.add(
            lambda s: real.copy2d(dst, dpitch, src, spitch, width, height, stream_handle(s))
        )


class ProgramGraph:
    """A rank's program bound to fixed buffers (see the module docstring): ``run(glob)`` takes
    the call's global arguments (host arrays of the bound shapes and dtypes) and returns the
    global outputs, assembled as the simulator assembles them. Which slice of each argument
    this rank holds, and where each rank's output goes, is worked out once, at bind time
    (:mod:`kinac.rt.comm.layout`'s general functions cost ~0.3 ms of Python a call)."""

    def __init__(
        self,
        program: DeviceProgram,
        segments: Sequence[Any],
        comm: Any,
        ops: Any,
        glob: Sequence[np.ndarray],
    ) -> None:
        from kinac.rt.comm.layout import mesh_coords, shard_global, shard_slices

        self.program, self.segments, self.comm, self.ops = program, tuple(segments), comm, ops
        mesh, me = program.mesh, comm.global_rank
        local = [
            shard_global(a, lay, mesh, me)
            for a, (_, _, lay) in zip(glob, program.params, strict=True)
        ]
        # per argument: its slice, the local shape when slicing gives another (a rank-0
        # value), or None when this rank holds zeros (a partial share not at coordinate 0)
        self.slices: list[tuple[tuple[slice, ...], tuple[int, ...] | None] | None] = []
        for a, part, (_, _, lay) in zip(glob, local, program.params, strict=True):
            idx = shard_slices(lay, mesh, me, tuple(np.shape(a)))
            zero = any(mesh_coords(mesh, me)[ax] for ax in lay.partial)
            sliced = np.asarray(a)[idx].shape
            self.slices.append(
                None if zero else (idx, None if sliced == part.shape else part.shape)
            )
        self.keep: list[Any] = []  # every buffer the graph reads or writes
        self.entries: list[LogEntry] = []  # one per collective step, in order
        self._steps: list[Step] = []
        self._collectives: list[int] = []  # indices in _steps of the NCCL calls
        self._reached = 0  # steps the running sequence has started (the first run's progress)
        self.stream = ops.stream()
        self.graph: Any = None
        self.replays = 0
        self.broken = ""  # why the first run failed (then never used again)
        self.eager_reason = ""  # why the capture failed (then the bound calls run eagerly)
        h = stream_handle(self.stream)
        rops, rcomm = _Ops(ops, self), _Comm(comm, self)
        slots: dict[int, Any] = {}
        self.host_in: list[np.ndarray] = []
        for i, a in enumerate(local):
            pinned = ops.pinned(tuple(a.shape), a.dtype)
            pinned[...] = a  # a partial share's zeros stay
            dev = rops.empty(tuple(a.shape), device_dtype(a.dtype))
            self._copy(dev, pinned, a.nbytes)
            self.host_in.append(pinned)
            slots[i] = dev
        for step in program.steps:
            if isinstance(step, RunSegment):
                g = program.segments[step.segment]
                types = [g.nodes[o].type for o in g.outputs]
                if len(types) != len(step.outputs):
                    raise NotGraphable(f"segment {step.segment}: {len(types)} outputs")
                outs = [rops.empty(tuple(t.shape), DEVICE_NAMES[t.dtype]) for t in types]
                ins = [slots[i] for i in step.inputs]
                self.add(ops.bind_segment(segments[step.segment], ins, outs))
                slots.update(zip(step.outputs, outs, strict=True))
            else:
                slots[step.dst] = device_collective(step, slots[step.src], rcomm, rops, h)
        self.host_out: list[np.ndarray] = []
        for slot, _, _ in program.outputs:
            o = slots[slot]
            shape = tuple(int(d) for d in o.shape)
            every = comm.prepare(
                "all-gather",
                ops.view(o, (1, *shape)),
                None,
                stream=h,
                tag=("all-gather", "outputs"),
            )
            self.add(on_stream(every), collective=True)
            self.keep.append(every)
            pinned = ops.pinned((comm.size, *shape), np.dtype(_host_name(o.dtype)))
            self._copy(pinned, every.recv, pinned.nbytes)
            self.host_out.append(pinned)
        self._places = [
            _places(lay, mesh, tuple(h.shape[1:]))
            for (_, _, lay), h in zip(program.outputs, self.host_out, strict=True)
        ]

    def add(self, step: Step, collective: bool = False) -> None:
        if collective:
            self._collectives.append(len(self._steps))
        self._steps.append(step)

    def _copy(self, dst: Any, src: Any, nbytes: int) -> None:
        if nbytes:
            d, s, ops = buffer_of(dst)[0], buffer_of(src)[0], self.ops
            self.add(lambda stream: ops.copy_async(d, s, nbytes, stream_handle(stream)))

    def sequence(self, stream: Any) -> None:
        """Every step once, on ``stream`` (what the graph captures)."""
        for i, f in enumerate(self._steps):
            self._reached = i + 1
            f(stream)

    def run(self, glob: Sequence[np.ndarray]) -> list[np.ndarray] | None:
        """One call: this rank's slices copied into the page-locked inputs, the graph
        replayed (the first call: the steps run eagerly, then captured), one wait, the outputs
        assembled. None: the first run failed before any collective (warned once;
        :attr:`broken` says why), the caller runs the program step by step, which reports a
        genuine error of the program; one that failed after a collective raises
        (:meth:`_first_run`)."""
        for dst, a, cut in zip(self.host_in, glob, self.slices, strict=True):
            if cut is not None:
                part = a[cut[0]]
                np.copyto(dst, part if cut[1] is None else part.reshape(cut[1]), casting="no")
        stream = self.stream
        if self.graph is None:
            if not self._first_run(stream):
                return None
        else:
            self.graph.replay(stream)
            self.replays += 1
            stream.synchronize()
        return [self._assemble(k, every) for k, every in enumerate(self.host_out)]

    def _first_run(self, stream: Any) -> bool:
        """The steps once, eagerly (after the legacy stream's work: the entries' set-up), then
        captured. False: they failed before this rank issued any collective, so the caller may
        run the program step by step (its collectives pair one for one with its peers', who
        run the same sequence). A failure after a collective was issued raises: this rank's
        peers are past it (or waiting in the next one), and a step-by-step run would issue
        that collective again, paired with their next (with NCCL a hang or a wrong result;
        the caller reports this rank's error to them through the rendezvous). A capture that
        fails after a good eager run keeps the bound calls, replayed eagerly: their results
        are this call's, and every later call issues the same collectives."""
        global last_fallback_reason
        self._reached = 0
        try:
            self.ops.synchronize()
            self.sequence(stream)
            stream.synchronize()
        except RankFailure:
            raise
        except Exception as e:  # noqa: BLE001 - before any collective: run step by step
            failed = self._reached - 1  # the step that raised (-1: before the first)
            issued = sum(1 for i in self._collectives if i <= failed)  # a failed call counts
            why = f"{type(e).__name__}: {e}"
            if issued:
                self.broken = why
                raise KinaRuntimeError(
                    f"rank {self.comm.global_rank}: its sharded program's first run as one "
                    f"graph failed after {issued} of its {len(self._collectives)} collectives "
                    f"had been issued ({why}); it cannot run again step by step, whose "
                    "collectives would pair with its peers' next ones"
                ) from e
            self.broken = why
            last_fallback_reason = f"its first run failed ({why})"
            _warn(last_fallback_reason)
            return False
        try:
            name = f"program on {self.program.mesh.name}"
            self.graph = self.ops.capture(self.sequence, stream, name=name)
        except RankFailure:
            raise
        except Exception as e:  # noqa: BLE001 - the bound calls, replayed eagerly
            self.graph = _Eager(self.sequence)
            self.eager_reason = f"{type(e).__name__}: {e}"
            last_fallback_reason = f"its capture failed ({self.eager_reason}): bound calls, eager"
            _warn(last_fallback_reason)
        return True

    def _assemble(self, k: int, every: np.ndarray) -> np.ndarray:
        """Output ``k`` from every rank's share (``every``, the page-locked gather: copied
        out, as the next call rewrites it): placed by the slices worked out at bind time; a
        partial output summed by :func:`~kinac.rt.comm.layout.assemble`."""
        from kinac.rt.comm.layout import assemble

        places = self._places[k]
        if places is None:
            out = assemble(
                [every[i] for i in range(len(every))], self.program.outputs[k][2], self.program.mesh
            )
            return out.copy() if np.may_share_memory(out, every) else out
        gshape, where = places
        out = np.empty(gshape, every.dtype)
        for r, idx in where:
            out[idx] = every[r]
        return out

    @property
    def alive(self) -> bool:
        """False once the communicator is destroyed (its captured calls hold a freed handle)."""
        return getattr(self.comm, "_comm", True) is not None


class _Eager:
    """A program whose capture failed: a replay runs its bound calls again, eagerly (still no
    check, allocation or plan per call; the same collectives as its peers' graphs)."""

    def __init__(self, sequence: Callable[[Any], None]) -> None:
        self.sequence = sequence

    def replay(self, stream: Any) -> None:
        self.sequence(stream)


def _host_name(dtype: Any) -> str:
    name = device_dtype(dtype)
    return "uint16" if name == "bfloat16" else name


_GRAPHS: OrderedDict[tuple[Any, ...], tuple[tuple[Any, ...], ProgramGraph | None]] = OrderedDict()


def bound(
    program: DeviceProgram,
    segments: Sequence[Any],
    comm: Any,
    ops: Any,
    glob: Sequence[np.ndarray],
) -> ProgramGraph | None:
    """The program's graph for these shards (bound at the first call of this key; None: the
    program cannot be graphed, run it step by step). Cached per program, segments,
    communicator, device and shard layout (each entry holds them, so their ids stay theirs)."""
    global last_fallback_reason
    if not enabled():
        return _fell_back(f"{ENV}=0")
    if not hasattr(comm, "prepare"):
        return _fell_back(f"{type(comm).__name__} has no prepared calls")
    if not hasattr(ops, "bind_segment"):
        return _fell_back(f"{type(ops).__name__} cannot bind a segment")
    key = (
        id(program),
        id(comm),
        id(ops),
        tuple(map(id, segments)),
        tuple((np.shape(a), np.asarray(a).dtype.str) for a in glob),
    )
    hit = _GRAPHS.get(key)
    if hit is not None and (hit[1] is None or hit[1].alive):
        _GRAPHS.move_to_end(key)
        if hit[1] is None or hit[1].broken:
            broken = f"its first run failed ({hit[1].broken})" if hit[1] else ""
            return _fell_back(_WHY.get(key, "") or broken)
        last_fallback_reason = ""
        return hit[1]
    why = ""
    try:
        pg: ProgramGraph | None = ProgramGraph(program, segments, comm, ops, glob)
    except NotGraphable as e:  # documented: runs step by step, the reason recorded
        pg, why = None, f"not graphable: {e}"
    except RankFailure:
        raise
    except Exception as e:  # noqa: BLE001 - binding is an optimisation: run step by step
        why = f"it could not be bound ({type(e).__name__}: {e})"
        _warn(why)
        pg = None
    _GRAPHS[key] = ((program, comm, ops, tuple(segments)), pg)
    _WHY[key] = why
    while len(_GRAPHS) > MAX_GRAPHS:
        old, _ = _GRAPHS.popitem(last=False)
        _WHY.pop(old, None)
    if pg is None:
        return _fell_back(why)
    last_fallback_reason = ""
    return pg


last_fallback_reason = ""
"""Why the last :func:`bound` (or the first :meth:`ProgramGraph.run`) left the program to
run step by step; "" when it ran as one graph. Every fallback records it, the silent ones
(``KINAC_PROGRAM_GRAPH=0``, a segment :func:`~kinac.rt.comm.device_run.unbindable` names)
too, so a bench or a GPU test can print why (benches/collectives.py's scaling row)."""
_WHY: dict[tuple[Any, ...], str] = {}  # per bound key: why it is not graphed ("" if it is)


def _fell_back(why: str) -> ProgramGraph | None:
    """None (run step by step), ``why`` recorded in :data:`last_fallback_reason`."""
    global last_fallback_reason
    last_fallback_reason = why or "unknown"
    return None


def _places(
    layout: Any, mesh: Any, shape: tuple[int, ...]
) -> tuple[tuple[int, ...], list[tuple[int, tuple[slice, ...]]]] | None:
    """Where each rank's share of an output of local ``shape`` goes in the global output
    (replicas: the rank at coordinate 0 of the axes that do not split it), as
    :func:`~kinac.rt.comm.layout.assemble` places them; None for a partial output (summed)."""
    from kinac.rt.comm.layout import mesh_coords, shard_slices, splits

    if layout.partial:
        return None
    gshape = tuple(d * n for d, n in zip(shape, splits(layout, mesh), strict=True))
    split = {a for axs in layout.dims for a in axs}
    replicated = [a for a in mesh.axes if a not in split]
    where = []
    for r in range(math.prod(mesh.shape)):
        if not any(mesh_coords(mesh, r)[a] for a in replicated):
            where.append((r, shard_slices(layout, mesh, r, gshape)))
    return gshape, where


class ProgramGraphWarning(UserWarning):
    """A rank's program runs step by step because its one graph failed (see the message)."""


def _warn(why: str) -> None:
    import warnings

    warnings.warn(f"a sharded program runs step by step: {why}", ProgramGraphWarning, stacklevel=3)


def forget() -> None:
    """Drop every bound program (their buffers and graphs)."""
    _GRAPHS.clear()
    _WHY.clear()
