"""A GPU entry's hot path without a GPU (issue 14: calls that cost nothing): the same arrays
at the same addresses replay the captured graph with one launch and nothing rebuilt; a dropped
output's block serves the next call's output; a tensor whose memory moved in place is imported
again. The entry is built without a driver (memory from the pool over a
:class:`~kinac.rt.cuda.resources.VirtualResource`, a fake captured graph that counts launches).
"""

from __future__ import annotations

import gc
from collections import OrderedDict
from typing import Any

import pytest

from kinac.artifacts.gpu import GpuLoweredEntry
from kinac.artifacts.host import BufferSpec
from kinac.rt.cuda import graph as graph_mod
from kinac.rt.cuda.entry import GpuEntry
from kinac.rt.cuda.entry_support import DL_NAMES, array_nbytes
from kinac.rt.cuda.pool import PoolResource
from kinac.rt.cuda.resources import VirtualResource
from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Tensor, contiguous_strides

SHAPES = [(4, 8), (8,)]


class Array:
    """A torch-like CUDA array: weakly referenceable, with a ``data_ptr`` that can move."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr

    def data_ptr(self) -> int:
        return self.ptr


class FakeGraph:
    captured = True

    def __init__(self, log: list[Any]) -> None:
        self.fast_launch = (lambda ex, stream: log.append("launch") or 0, None)  # type: ignore[func-returns-value]
        self.log = log

    def replay(self, stream: Any) -> None:
        self.log.append("replay")

    def close(self) -> None:
        pass


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    calls: list[Any] = []
    monkeypatch.setattr(graph_mod, "capture", lambda seq, stream, name="": FakeGraph(calls))
    return calls


def _entry() -> Any:
    params = tuple(BufferSpec(f"p{i}", "f32", s) for i, s in enumerate(SHAPES))
    outs = (BufferSpec("o", "f32", (4, 8)),)
    lw = GpuLoweredEntry("e", "", params, outs, ("cuda:0",) * 2, ("cuda:0",), 0, 0, (), ())
    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.ordinal, e.pinned = lw, 0, True
    e.resource = PoolResource(VirtualResource())
    e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                     contiguous_strides(o.shape)) for o in outs]  # fmt: skip
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
    e.stream = type("S", (), {"cu": 0, "handle": 0, "cvp": None, "synchronize": lambda s: None})()
    e.capture_stream = e.stream
    e._imports, e._last_box, e._stager = {}, [None], None
    e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(3)], set(), {}, OrderedDict()
    e.captures = e.replays = 0
    e._bind = lambda key: ((lambda stream: None), [])  # type: ignore[method-assign]
    e.device = type("D", (), {"enter": lambda s: False, "leave": lambda s, p: None})()
    # the context check: "the entry's context is current" (cuCtxGetCurrent returns 0, value 0)
    e._ctx_get, e._ctx_ref, e._ctx_cur = (lambda r: 0), None, type("C", (), {"value": 0})()
    return e


def _import(e: Any, arrays: list[Array], res: VirtualResource) -> None:
    """Import each array as ``_input`` does for a CUDA array (at the address it reports)."""
    for i, (a, s) in enumerate(zip(arrays, SHAPES, strict=True)):
        e._remember(i, a, Tensor(a.ptr, s, "float32", device=(KDL_CUDA, 0)))


def _arrays(res: VirtualResource) -> list[Array]:
    return [Array(res.allocate(array_nbytes("f32", s))) for s in SHAPES]


def test_the_same_arrays_replay_with_one_launch_and_the_dropped_outputs_block(
    log: list[Any],
) -> None:
    e, res = _entry(), VirtualResource()
    arrays = _arrays(res)
    _import(e, arrays, res)
    out1 = e(*arrays)  # general path: captures, replays
    p1, id1 = out1.ptr, id(out1)
    del out1  # dropped: the entry's kept output is nobody else's now, reused as it is
    assert [t.ptr for t in e._kept[0]] == [p1]
    # (the arrays were imported already, so the first call made the memo): hot from now on
    outs = []
    for _ in range(5):
        o = e(*arrays)
        outs.append((id(o), o.ptr))
        del o
    assert e.hot_calls == 5 and outs == [(id1, p1)] * 5  # the same object (kept alive)
    assert log == ["replay"] + ["launch"] * 5 and e.captures == 1
    kept = e(*arrays)
    other = e(*arrays)  # the last output still held by the caller: another block
    assert other.ptr != kept.ptr and e.hot_calls == 6  # a new address: general path, captured
    assert e.captures == 2
    assert [t.ptr for t in e._kept[0]] == [kept.ptr, other.ptr]
    del kept, other
    gc.collect()
    live = e.resource.memory_stats()["allocated_bytes.all.current"]
    e._kept = e._spares = None  # the entry lets its outputs go: their blocks return to the pool
    gc.collect()
    assert e.resource.memory_stats()["allocated_bytes.all.current"] < live


def test_an_output_still_referenced_any_way_is_not_reused(log: list[Any]) -> None:
    """A kept output comes back only when nothing else holds it: not while a view's owner, a
    DLPack export, another entry's memo or a weak reference holds it or its block."""
    import weakref

    from kinac.rt.cuda import entry_hot

    assert entry_hot.FREE_T > 0  # reuse is on on this interpreter
    e, res = _entry(), VirtualResource()
    arrays = _arrays(res)
    _import(e, arrays, res)
    call = None
    for _ in range(3):
        e(*arrays)
        call = call or e.hot_path(tuple(arrays))
    assert call is not None
    for run in (e, call):  # the entry's own hot path and the bound call
        first = run(*arrays)
        p = first.ptr
        holders: list[Any] = [
            first,  # the tensor itself
            first.owner,  # its block (a view made from it holds this)
            weakref.ref(first),  # a weak reference (it would see the reused tensor)
        ]
        del first
        for h in holders:
            again = run(*arrays)
            assert (again.ptr == p) == (h is None), h
            if h is not None:
                assert again.ptr != p
            del again
        del h, holders
        gc.collect()
        assert run(*arrays).ptr == p  # nothing holds it: reused again


def test_a_tensor_moved_in_place_is_imported_again(log: list[Any]) -> None:
    e, res = _entry(), VirtualResource()
    arrays = _arrays(res)
    _import(e, arrays, res)
    for _ in range(3):
        e(*arrays)
    hot = e.hot_calls
    assert hot == 2
    arrays[1].ptr = res.allocate(array_nbytes("f32", SHAPES[1]))  # torch's set_ / resize_
    seen: list[int] = []
    e._input = lambda x, i: seen.append(i) or Tensor(x.ptr, SHAPES[i], "float32")  # type: ignore[func-returns-value]
    ins, _, ptrs = e.prepare(*arrays)
    assert e.hot_calls == hot and seen == [1]  # the moved one only, at its new address
    assert ptrs[1] == arrays[1].ptr and ins[1].ptr == arrays[1].ptr


def test_bind_hot_skips_the_checks_only_while_the_memo_is_the_bound_one(log: list[Any]) -> None:
    e, res = _entry(), VirtualResource()
    arrays = _arrays(res)
    _import(e, arrays, res)
    e(*arrays)
    assert e.hot_path(tuple(reversed(arrays))) is None  # not the memo's arrays
    call = e.hot_path(tuple(arrays))
    call(*arrays)
    call(*arrays)
    assert e.hot_calls == 2
    e._last_box[0] = None  # the memo went (an argument died): a plain call, never the bound one
    call(*arrays)
    assert e.hot_calls == 2 and e._last_box[0] is not None  # the general path made a new memo
    arrays[1].ptr = res.allocate(array_nbytes("f32", SHAPES[1]))  # moved: only a full check sees it
    e._input = lambda x, i: Tensor(x.ptr, SHAPES[i], "float32")
    call(*arrays)
    assert e.hot_calls == 2 and log[-1] == "replay"  # the general path, which re-imported it


class FakeTorchCuda:
    """Looks like a torch CUDA tensor to :func:`~kinac.rt.cuda.entry_hot.torch_import`."""

    def __init__(self, torch: Any, **over: Any) -> None:
        self.is_cuda, self.requires_grad, self.layout = True, False, torch.strided
        self.dtype, self.shape, self._stride, self.ptr = torch.bfloat16, (4, 8), (8, 1), 0x7000
        self.storage = object()
        self.__dict__.update(over)

    def is_conj(self) -> bool:
        return False

    def is_neg(self) -> bool:
        return False

    def get_device(self) -> int:
        return 0

    def data_ptr(self) -> int:
        return self.ptr

    def stride(self) -> tuple[int, ...]:
        return self._stride

    def untyped_storage(self) -> Any:
        return self.storage


FakeTorchCuda.__module__ = "torch._fake"  # what the import checks before reading anything


def test_torch_tensors_are_imported_from_their_attributes_in_the_plain_case(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    torch = pytest.importorskip("torch")
    from kinac.rt.cuda.entry_hot import torch_import

    current = type("Stream", (), {"cuda_stream": 0})()
    monkeypatch.setattr(torch.cuda, "current_stream", lambda index=None: current)
    x = FakeTorchCuda(torch)
    t = torch_import(x)
    assert t is not None and (t.ptr, t.shape, t.strides, t.dtype.name) == (
        0x7000, (4, 8), (8, 1), "bfloat16",
    )  # fmt: skip
    assert t.owner is x.storage and t.device == (KDL_CUDA, 0)
    # anything but the plain case goes through DLPack (which orders streams, decides the rest)
    assert torch_import(FakeTorchCuda(torch, requires_grad=True)) is not None  # read only
    assert torch_import(FakeTorchCuda(torch, layout=torch.sparse_coo)) is None
    assert torch_import(FakeTorchCuda(torch, dtype=torch.complex64)) is None
    assert torch_import(FakeTorchCuda(torch, is_cuda=False)) is None
    assert torch_import(torch.zeros(3)) is None  # a CPU tensor
    current.cuda_stream = 0x5000  # torch works on a side stream: DLPack's event orders them
    assert torch_import(x) is None


def test_the_bound_call_checks_addresses(log: list[Any]) -> None:
    """torch's ``x.data = y`` moves a tensor without counting an in-place change, so the
    caller's version check cannot see it: the bound call compares addresses itself."""
    e, res = _entry(), VirtualResource()
    arrays = _arrays(res)
    _import(e, arrays, res)
    e(*arrays)
    call = e.hot_path(tuple(arrays))
    call(*arrays)
    assert e.hot_calls == 1
    arrays[0].ptr = res.allocate(array_nbytes("f32", SHAPES[0]))
    e._input = lambda x, i: Tensor(x.ptr, SHAPES[i], "float32")
    call(*arrays)
    assert e.hot_calls == 1 and log[-1] == "replay"  # the general path, at the new address


def test_the_bound_calls_graph_is_not_evicted_by_other_addresses(log: list[Any]) -> None:
    """The bound call launches its graph without moving it to the end of the entry's LRU order:
    binding other addresses passes over it (it would be evicted and captured again)."""
    e, res = _entry(), VirtualResource()
    e.max_graphs = 2
    a, b = _arrays(res), _arrays(res)
    _import(e, a, res)
    for _ in range(3):
        e(*a)
    call = e.hot_path(tuple(a))
    call(*a)
    call(*a)  # (launched from the bound call's own record of its graph)
    key_a = next(iter(e._bound))
    _import(e, b, res)
    e(*b)
    mixed = [a[0], b[1]]
    for i, x in enumerate(mixed):
        e._remember(i, x, Tensor(x.ptr, SHAPES[i], "float32", device=(KDL_CUDA, 0)))
    e(*mixed)  # a third binding: the least recently bound that is not hot goes (b's)
    assert key_a in e._bound and len(e._bound) == 2 and e.captures == 3
    call(*a)  # (the entry's memo is of other arrays now: a plain call, which finds a's graph)
    assert log[-1] == "replay" and e.captures == 3
