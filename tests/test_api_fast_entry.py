"""A GPU entry's per-call argument handling without a GPU (issue 14 item 3: calls that cost
nothing): the same CUDA arrays as the last call skip the per-argument lookups, and the
memo is dropped as soon as one of them dies, before its id could name another array.

The entry is built without a driver (its launch sequence replaced by a no-op, memory from the
pool over a :class:`~kinac.rt.cuda.resources.VirtualResource`), so this runs anywhere.
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from typing import Any

from kinac.artifacts.gpu import GpuLoweredEntry
from kinac.artifacts.host import BufferSpec
from kinac.rt.cuda.entry import GpuEntry
from kinac.rt.cuda.entry_support import DL_NAMES, array_nbytes
from kinac.rt.cuda.pool import PoolResource
from kinac.rt.cuda.resources import VirtualResource
from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Tensor, contiguous_strides

SHAPES = [(4, 8), (8,), (8, 8)]


class Array:
    """A stand-in for a torch CUDA tensor: an object the entry can weakly reference."""


def _entry() -> Any:
    params = tuple(BufferSpec(f"p{i}", "f32", s) for i, s in enumerate(SHAPES))
    outs = (BufferSpec("o", "f32", (4, 8)),)
    lw = GpuLoweredEntry("e", "", params, outs, ("cuda:0",) * 3, ("cuda:0",), 0, 0, (), ())
    e = GpuEntry.__new__(GpuEntry)  # no driver: only what prepare and _call read
    e.lowered, e.ordinal, e.pinned = lw, 0, True
    e.resource = PoolResource(VirtualResource())
    e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                     contiguous_strides(o.shape)) for o in outs]  # fmt: skip
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], False, 8, 0
    e.stream = type("S", (), {"cu": 0, "handle": 0})()
    e._imports, e._last_box, e._stager = {}, [None], None
    e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(4)], set(), {}, OrderedDict()
    e.captures = e.replays = 0
    e._bind = lambda key: ((lambda stream: None), [])  # type: ignore[method-assign]
    return e


def _imported(e: Any, arrays: list[Array]) -> None:
    """Record each array's import as a CUDA array's is (:meth:`GpuEntry._remember`)."""
    res = VirtualResource()
    for i, (a, s) in enumerate(zip(arrays, SHAPES, strict=False)):
        t = Tensor(res.allocate(array_nbytes("f32", s)), s, "float32", device=(KDL_CUDA, 0))
        e._remember(i, a, t)


def test_same_arrays_reuse_the_last_calls_imports() -> None:
    e = _entry()
    arrays = [Array() for _ in SHAPES]
    _imported(e, arrays)
    ins1, _, ptrs1 = e.prepare(*arrays)
    assert e._last_box[0] is not None and e._last_box[0][1] is ins1
    ins2, _, ptrs2 = e.prepare(*arrays)
    assert ins2 is ins1 and ptrs2[:3] == ptrs1[:3]  # no per-argument lookup: the same list
    out = e._call(tuple(arrays))  # calls run through the memo too
    assert e._last_box[0][1] is ins1 and out.shape == (4, 8)
    other = [arrays[0], Array(), arrays[2]]
    _imported(e, other)
    ins3, _, _ = e.prepare(*other)  # another array: looked up again, memo replaced
    assert ins3 is not ins1 and e._last_box[0][1] is ins3


def test_the_memo_goes_when_an_argument_dies() -> None:
    e = _entry()
    arrays = [Array() for _ in SHAPES]
    _imported(e, arrays)
    e.prepare(*arrays)
    assert e._last_box[0] is not None
    del arrays[2]
    gc.collect()
    assert e._last_box[0] is None  # before another array could take the dead one's id
    assert (2, 0) not in e._imports and len(e._imports) == 2


def test_arrays_not_all_imported_are_not_memoised() -> None:
    e = _entry()
    arrays = [Array() for _ in SHAPES]
    _imported(e, arrays[:2])
    kinac_tensor = Tensor(VirtualResource().allocate(256), (8, 8), "float32", device=(KDL_CUDA, 0))
    e.prepare(arrays[0], arrays[1], kinac_tensor)  # a kinac tensor is checked each call
    assert e._last_box[0] is None
