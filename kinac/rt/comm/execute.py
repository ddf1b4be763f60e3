"""One rank's run of a ``DeviceProgram``: compiled segments between collectives.

Why the moves: the program names a tensor dim for each gather, scatter or exchange, while a
communicator (NCCL's contract) splits and concatenates along axis 0 of contiguous buffers. So
a step along ``dim`` moves that dim to the front (one copy, contiguous), calls the flat
collective and moves it back: the collective itself stays the one a NCCL backend would call.

The records are read by attribute only (``kinac.artifacts.sharded``, imported for types): the
runtime never imports the compiler's graph module (``tests/test_layers.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kinac.artifacts.sharded import RunSegment
from kinac.errors import KinaRuntimeError

if TYPE_CHECKING:
    from kinac.artifacts.sharded import Collective, DeviceProgram
    from kinac.rt.comm.communicator import Communicator


def _front(x: np.ndarray, dim: int) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(x, dim, 0))


def collective_step(step: Collective, x: np.ndarray, comm: Communicator) -> np.ndarray:
    """The value a collective step writes, from this rank's ``x``."""
    group = comm.sub(step.axis)
    tag = (step.kind, step.span)
    kind, dim = step.kind, step.dim % x.ndim if x.ndim else step.dim
    if kind == "all-reduce":  # ascontiguousarray makes a rank-0 value [1]: shape it back
        got = group.all_reduce(np.ascontiguousarray(x), op=step.reduce_op or "sum", tag=tag)
        return got.reshape(np.shape(x))
    if kind == "slice":
        if x.shape[dim] % group.size:
            raise KinaRuntimeError(
                f"slice over {step.axis} at {step.span or '?'}: {group.size} ranks do not "
                f"divide dim {dim} of size {x.shape[dim]}"
            )
        c = x.shape[dim] // group.size
        return np.ascontiguousarray(np.take(x, range(group.rank * c, (group.rank + 1) * c), dim))
    if kind == "all-gather":
        return np.ascontiguousarray(np.moveaxis(group.all_gather(_front(x, dim), tag=tag), 0, dim))
    if kind == "reduce-scatter":
        got = group.reduce_scatter(_front(x, dim), op=step.reduce_op or "sum", tag=tag)
        return np.ascontiguousarray(np.moveaxis(got, 0, dim))
    if kind == "all-to-all":
        cat = dim if step.concat_dim < 0 else step.concat_dim
        got = group.all_to_all(_front(x, dim), tag=tag)
        chunks = np.split(got, group.size, axis=0)  # chunk j came from rank j
        return np.ascontiguousarray(
            np.concatenate([np.moveaxis(c, 0, dim) for c in chunks], axis=cat)
        )
    raise KinaRuntimeError(f"unknown collective step {kind!r} at {step.span or '?'}")


def run_program(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    comm: Communicator,
    local_inputs: Sequence[np.ndarray],
) -> list[np.ndarray]:
    """Run ``program`` as this rank of ``comm`` (the mesh's world communicator) on its local
    parameter arrays; its outputs, in local shapes, in the program's order."""
    slots: dict[int, Any] = dict(enumerate(checked_inputs(program, local_inputs)))
    return walk_program(
        program, segments, slots, np.asarray, lambda step, x: collective_step(step, x, comm)
    )


def checked_inputs(program: DeviceProgram, local_inputs: Sequence[Any]) -> Sequence[Any]:
    """``local_inputs``, or a runtime error when the program takes another number of arrays."""
    if len(local_inputs) != len(program.params):
        raise KinaRuntimeError(
            f"the program takes {len(program.params)} local arrays, got {len(local_inputs)}"
        )
    return local_inputs


def walk_program(
    program: DeviceProgram,
    segments: Sequence[Callable[..., Any]],
    slots: dict[int, Any],
    place: Callable[[Any], Any],
    collective: Callable[[Any, Any], Any],
) -> list[Any]:
    """The walk every runner of a per-device program shares (host slots here, device slots in
    :mod:`kinac.rt.comm.device_run`): each segment on its slots, its outputs checked and
    ``place``d, each collective step through ``collective``; the program's outputs in order."""
    for step in program.steps:
        if isinstance(step, RunSegment):
            got = segments[step.segment](*(slots[i] for i in step.inputs))
            outs = got if isinstance(got, tuple) else (got,)
            if len(outs) != len(step.outputs):
                raise KinaRuntimeError(
                    f"segment {step.segment} returned {len(outs)} arrays, the program "
                    f"expects {len(step.outputs)}"
                )
            for slot, value in zip(step.outputs, outs, strict=True):
                slots[slot] = place(value)
        else:
            slots[step.dst] = collective(step, slots[step.src])
    return [slots[slot] for slot, _, _ in program.outputs]
