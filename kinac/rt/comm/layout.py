"""Global arrays to per-device shards and back, by a ``ParamLayout`` over a ``MeshSpec``.

Why in the runtime: the Python API slices a caller's global arrays into each rank's inputs and
assembles the ranks' outputs into global arrays, and tests do the same to build oracles; both
follow the layout records the compiler wrote (``kinac.artifacts.sharded``), read here by
attribute only (``layout.dims``, ``layout.partial``, ``mesh.shape``, ``mesh.axes``).

Conventions (docs/sharding.md, "Running sharded programs"):

- ``dims[i]`` are the mesh axes splitting dim ``i``, major first: along dim ``i`` rank ``r``
  holds chunk ``k = c[a1] * n[a2] + c[a2]`` (for axes ``a1, a2``; ``c`` its mesh coordinates,
  ``n`` the axis sizes), the chunks in order, as ``numpy.split`` cuts them;
- a partial-sum axis (``@partial(sum)``): the value is the sum of the ranks' shares along it.
  Sharding a global value, the rank at coordinate 0 of every partial axis holds the value and
  the others hold zeros (a valid decomposition that any reduction recovers exactly);
- an axis neither splitting nor partial replicates: assembling takes the rank at coordinate 0
  (with ``check=True``, every replica must be bit-identical to it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kinac.errors import KinaRuntimeError
from kinac.rt.comm.communicator import reduce


def _mesh(mesh: Any) -> tuple[tuple[int, ...], tuple[str, ...]]:
    return tuple(int(s) for s in mesh.shape), tuple(str(a) for a in mesh.axes)


def mesh_coords(mesh: Any, rank: int) -> dict[str, int]:
    """``rank``'s coordinate along each mesh axis (ranks in row-major order over the mesh)."""
    shape, axes = _mesh(mesh)
    return dict(zip(axes, (int(c) for c in np.unravel_index(rank, shape)), strict=True))


def _sizes(mesh: Any) -> dict[str, int]:
    shape, axes = _mesh(mesh)
    return dict(zip(axes, shape, strict=True))


def splits(layout: Any, mesh: Any) -> tuple[int, ...]:
    """How many chunks each dim of a tensor is cut into."""
    size = _sizes(mesh)
    return tuple(int(np.prod([size[a] for a in axs], dtype=np.int64)) for axs in layout.dims)


def local_shape(shape: Sequence[int], layout: Any, mesh: Any) -> tuple[int, ...] | str:
    """The per-device shape of a global ``shape``, or why the layout cannot cut it."""
    shape = tuple(int(d) for d in shape)
    if len(shape) != len(layout.dims):
        return f"rank {len(shape)}, but the layout describes {len(layout.dims)} dims"
    out = []
    for d, (n, axs) in enumerate(zip(splits(layout, mesh), layout.dims, strict=True)):
        if shape[d] % n:
            return (
                f"dim {d} has size {shape[d]}, which the {n} devices of mesh "
                f"{'axes' if len(axs) > 1 else 'axis'} {' x '.join(axs)} do not divide"
            )
        out.append(shape[d] // n)
    return tuple(out)


def shard_slices(layout: Any, mesh: Any, rank: int, shape: tuple[int, ...]) -> tuple[slice, ...]:
    """The slice of a global tensor of ``shape`` that ``rank`` holds."""
    coord, size = mesh_coords(mesh, rank), _sizes(mesh)
    out = []
    for d, axs in enumerate(layout.dims):
        n, k = 1, 0
        for a in axs:
            n *= size[a]
            k = k * size[a] + coord[a]
        c = shape[d] // n
        out.append(slice(k * c, (k + 1) * c))
    return tuple(out)


def shard_global(array: np.ndarray, layout: Any, mesh: Any, rank: int) -> np.ndarray:
    """The local (contiguous) array ``rank`` holds of global ``array``."""
    array = np.asarray(array)
    local = local_shape(array.shape, layout, mesh)
    if isinstance(local, str):
        raise KinaRuntimeError(f"cannot shard a {list(array.shape)} array: {local}")
    part = np.ascontiguousarray(array[shard_slices(layout, mesh, rank, tuple(array.shape))])
    part = part.reshape(local)  # ascontiguousarray makes a rank-0 value [1]
    coord = mesh_coords(mesh, rank)
    if any(coord[a] for a in layout.partial):
        part = np.zeros_like(part)
    return part


def assemble(
    locals_: Sequence[np.ndarray], layout: Any, mesh: Any, *, check: bool = False
) -> np.ndarray:
    """The global array the ranks' ``locals_`` (in rank order) hold: chunks placed, partial
    shares summed (in rank order; bf16 through f32), replicas taken from coordinate 0."""
    shape, axes = _mesh(mesh)
    if len(locals_) != int(np.prod(shape, dtype=np.int64)):
        raise KinaRuntimeError(f"{len(locals_)} local arrays for a mesh of {list(shape)}")
    first = np.asarray(locals_[0])
    gshape = tuple(d * n for d, n in zip(first.shape, splits(layout, mesh), strict=True))
    split = {a for axs in layout.dims for a in axs}
    replicated = [a for a in axes if a not in split and a not in layout.partial]
    out = np.empty(gshape, dtype=first.dtype)
    shares: dict[tuple[int, ...], list[np.ndarray]] = {}
    firsts: dict[tuple[Any, ...], np.ndarray] = {}
    for r, loc in enumerate(locals_):
        loc = np.asarray(loc)
        if loc.shape != first.shape or loc.dtype != first.dtype:
            raise KinaRuntimeError(
                f"rank {r} holds {loc.dtype}{list(loc.shape)}, rank 0 {first.dtype}{list(first.shape)}"
            )
        coord = mesh_coords(mesh, r)
        idx = shard_slices(layout, mesh, r, gshape)
        key = tuple((s.start, s.stop) for s in idx)
        if any(coord[a] for a in replicated):
            if check:
                ref = firsts[key, tuple(coord[a] for a in layout.partial)]
                if not np.array_equal(ref, loc, equal_nan=loc.dtype.kind == "f"):
                    raise KinaRuntimeError(
                        f"rank {r}'s replica differs from the rank at coordinate 0 of "
                        f"{', '.join(replicated)} (a mis-executed sharded program)"
                    )
            continue
        firsts[key, tuple(coord[a] for a in layout.partial)] = loc
        shares.setdefault(tuple(s.start for s in idx), []).append(loc)
        out[idx] = loc
    if layout.partial:
        for start, parts in shares.items():
            idx = tuple(slice(s, s + n) for s, n in zip(start, first.shape, strict=True))
            out[idx] = reduce(parts, "sum")
    return out
