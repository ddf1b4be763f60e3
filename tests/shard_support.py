"""Running per-device programs in tests: shard global inputs (partials with unequal shares),
run every rank, assemble the outputs.

Why a lockstep runner here: it is the reference meaning of each ``Collective`` record (the
ranks' values of one step side by side, the collective computed from them, no threads), so
a test can tell a wrong program from a wrong runtime. The threaded simulator
(``kinac.rt.comm``: ``simulate`` + ``run_program``) runs the same programs through a
``Communicator``; tests run both (:func:`run_simulated`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kinac.artifacts.sharded import Collective, DeviceProgram, MeshSpec, ParamLayout


def coords(mesh: MeshSpec, rank: int) -> dict[str, int]:
    """Rank ``rank``'s coordinate along each mesh axis (row-major)."""
    return dict(zip(mesh.axes, (int(c) for c in np.unravel_index(rank, mesh.shape)), strict=True))


def shard(
    array: np.ndarray, layout: ParamLayout, mesh: MeshSpec, rng: np.random.Generator
) -> list[np.ndarray]:
    """Each rank's local array of global ``array``: its chunk along split dims, and over each
    partial axis an UNEQUAL share (random noise that sums to zero over the axis), so a
    program that forgets a reduction, or reduces twice, cannot pass by coincidence."""
    sizes = dict(zip(mesh.axes, mesh.shape, strict=True))
    out = []
    for r in range(mesh.size):
        c = coords(mesh, r)
        idx = []
        for n, axes in zip(array.shape, layout.dims, strict=True):
            k, m = 0, 1
            for a in axes:
                k, m = k * sizes[a] + c[a], m * sizes[a]
            idx.append(slice(k * (n // m), (k + 1) * (n // m)))
        out.append(np.ascontiguousarray(array[tuple(idx)]))
    for p in layout.partial:
        n = sizes[p]
        groups: dict[tuple[int, ...], list[int]] = {}
        for r in range(mesh.size):
            c = coords(mesh, r)
            groups.setdefault(tuple(v for a, v in c.items() if a != p), []).append(r)
        for members in groups.values():
            base = out[members[0]]
            noise = rng.uniform(-1.0, 1.0, (n, *base.shape)).astype(base.dtype)
            noise -= noise.mean(axis=0, dtype=np.float64).astype(base.dtype)
            for j, r in enumerate(members):
                out[r] = (out[r] / np.asarray(n, base.dtype) + noise[j]).astype(base.dtype)
    return out


def assemble(locals_: Sequence[np.ndarray], layout: ParamLayout, mesh: MeshSpec) -> np.ndarray:
    """The global array: chunks placed; every replica must agree (a mis-executed program)."""
    sizes = dict(zip(mesh.axes, mesh.shape, strict=True))
    first = locals_[0]
    gshape = list(first.shape)
    for d, axes in enumerate(layout.dims):
        for a in axes:
            gshape[d] *= sizes[a]
    assert not layout.partial, "outputs are never partial"
    out = np.zeros(gshape, dtype=first.dtype)
    seen: dict[tuple[int, ...], np.ndarray] = {}
    for r, loc in enumerate(locals_):
        c = coords(mesh, r)
        idx = []
        for n, axes in zip(gshape, layout.dims, strict=True):
            k, m = 0, 1
            for a in axes:
                k, m = k * sizes[a] + c[a], m * sizes[a]
            idx.append(slice(k * (n // m), (k + 1) * (n // m)))
        key = tuple(s.start for s in idx)
        if key in seen:
            np.testing.assert_allclose(loc, seen[key], rtol=1e-5, atol=1e-5, err_msg=f"rank {r}")
        seen[key] = loc
        out[tuple(idx)] = loc
    return out


def _groups(mesh: MeshSpec, axis: str) -> list[list[int]]:
    """The ranks sharing every coordinate but ``axis``, each group ordered along it."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for r in range(mesh.size):
        c = coords(mesh, r)
        groups.setdefault(tuple(v for a, v in c.items() if a != axis), []).append(r)
    return list(groups.values())


def lockstep_collective(step: Collective, mesh: MeshSpec, slots: list[dict[int, Any]]) -> None:
    """One collective over every group of ranks along ``step.axis`` (the record's meaning)."""
    for members in _groups(mesh, step.axis):
        vals = [slots[r][step.src] for r in members]
        n = len(members)
        if step.kind in ("all-reduce", "reduce-scatter"):
            total = vals[0].copy()
            for v in vals[1:]:
                total = total + v
            res = [total] * n if step.kind == "all-reduce" else np.split(total, n, axis=step.dim)
        elif step.kind == "all-gather":
            res = [np.concatenate(vals, axis=step.dim)] * n
        elif step.kind == "slice":
            res = [np.split(v, n, axis=step.dim)[j] for j, v in enumerate(vals)]
        elif step.kind == "all-to-all":
            cd = step.dim if step.concat_dim < 0 else step.concat_dim
            parts = [np.split(v, n, axis=step.dim) for v in vals]
            res = [np.concatenate([parts[i][j] for i in range(n)], axis=cd) for j in range(n)]
        else:
            raise AssertionError(step.kind)
        for r, v in zip(members, res, strict=True):
            slots[r][step.dst] = np.ascontiguousarray(v)


def run_lockstep(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    local_inputs: Sequence[Sequence[np.ndarray]],
) -> list[list[np.ndarray]]:
    """Every rank's outputs, running the program's steps across all ranks in lockstep."""
    slots: list[dict[int, Any]] = [dict(enumerate(ins)) for ins in local_inputs]
    for step in program.steps:
        if isinstance(step, Collective):
            lockstep_collective(step, program.mesh, slots)
            continue
        for s in slots:
            outs = segments[step.segment](*(s[i] for i in step.inputs))
            outs = outs if isinstance(outs, tuple) else (outs,)
            for slot, v in zip(step.outputs, outs, strict=True):
                s[slot] = np.asarray(v)
    return [[s[o] for o, _, _ in program.outputs] for s in slots]


def run_simulated(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    local_inputs: Sequence[Sequence[np.ndarray]],
) -> list[list[np.ndarray]]:
    """Every rank's outputs, each rank in its own thread of the runtime's simulator."""
    from kinac.rt.comm import simulate
    from kinac.rt.comm.execute import run_program

    return simulate(
        program.mesh,
        lambda comm: run_program(program, segments, comm, local_inputs[comm.rank]),
        timeout_s=30,
    )
