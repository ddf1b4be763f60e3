"""A sharded call's mesh (:mod:`kinac.api_sharded`): how a ``mesh=`` request reads (a name, a
device count or a shape, within the largest mesh anyone runs), how its shape is written in
messages, which backend runs it (from how the process was launched), and whether a planned
split divides the dims of the graph it splits. Shared by the sharded and the differentiated
sharded defns."""

from __future__ import annotations

import numbers
import os
import re
from typing import Any

from kinac.errors import KinaUsageError

DEFAULT_TIMEOUT_S = 60.0
MAX_DEVICES = 1 << 20
"""The most devices a mesh request may name (NCCL's scale; beyond it a size is a typo)."""
MAX_SIMULATED = 1024
"""The most devices the threaded simulator runs (one thread per device)."""
BACKENDS = ("auto", "simulator", "tcp", "nccl")


def choose_backend(target: str, environ: dict[str, str] | None = None) -> str:
    """How a sharded call runs, from how the process was launched: ``WORLD_SIZE`` set (by
    ``kinac launch``, torchrun or SLURM) means this process is one rank of a group: NCCL for
    the CUDA target, the TCP process group for the host; otherwise every rank is a thread of
    the simulator."""
    env = os.environ if environ is None else environ
    if not env.get("WORLD_SIZE"):
        return "simulator"
    return "nccl" if target == "cuda" else "tcp"


def parse_mesh(mesh: Any) -> str | tuple[int, ...] | None:
    """A mesh request: ``None`` (the entry's own), a name, or a shape."""
    if mesh is None or mesh == "":
        return None
    if isinstance(mesh, bool):
        raise KinaUsageError(f"mesh= takes a mesh name, a device count or a shape, got {mesh!r}")
    if isinstance(mesh, numbers.Integral):  # numpy's integers too
        shape: tuple[int, ...] = (int(mesh),)
    elif isinstance(mesh, str) and re.fullmatch(r"\d+(x\d+)*", mesh.strip()):
        shape = tuple(int(x) for x in mesh.strip().split("x"))
    elif isinstance(mesh, str):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", mesh):
            raise KinaUsageError(
                f"mesh {mesh!r}: expected a mesh name, a device count (4) or a shape (2x2)"
            )
        return mesh
    elif isinstance(mesh, tuple | list) and all(
        isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in mesh
    ):
        shape = tuple(int(x) for x in mesh)
    else:
        raise KinaUsageError(
            f"mesh= takes a mesh name, a device count or a shape, got {type(mesh).__name__}"
        )
    if not shape or any(s < 1 for s in shape):
        raise KinaUsageError(f"a mesh needs at least one device per axis, got {list(shape)}")
    total = 1
    for s in shape:
        total *= s
    if total > MAX_DEVICES:
        raise KinaUsageError(
            f"a mesh of {shape_text(shape)} has {total} devices, more than {MAX_DEVICES:,}"
        )
    return shape


def shape_text(shape: tuple[int, ...]) -> str:
    """A mesh shape as messages write it (``2x4``)."""
    return "x".join(map(str, shape))


def check_divisible(graph: Any, plan: Any, what: str) -> None:
    """A usage error when a planned split does not divide its dim (a mesh chosen by the caller
    rather than checked against the annotations by the checker)."""
    from kinac.shard.report import tensor_name

    sizes = dict(plan.axes)
    for lay in plan.layouts:
        t = graph.nodes[lay.node].type
        for d, axs in enumerate(lay.dims):
            n = 1
            for a in axs:
                n *= sizes[a]
            if t.shape[d] % n:
                raise KinaUsageError(
                    f"{what}: the {n} devices of mesh axis {' x '.join(axs)} do not divide dim "
                    f"{d} (size {t.shape[d]}) of `{tensor_name(graph, lay.node)}` "
                    f"({t.dtype}[{' '.join(map(str, t.shape))}])"
                )
