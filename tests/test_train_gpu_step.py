"""The GPU training step's buffers, without a GPU (issue 12: the 100M step on the H200).

The H200 run measured kinac's 100M step at 38.8 steps/s and 4,855 MiB against eager's 79.6
and 1,864: on a GPU the optimizer made one call per parameter and formula (117), each
returning new tensors, and the loss entry saw its weights at new addresses every step (and
staged copies of them). Now the GPU optimizer keeps parameters, gradients and moments in one
flat device buffer each, updated in place (``donate="inplace"``, the GPU's default) with 3
calls a step, and the loss entry writes its gradients into the flat gradient buffer
(``GpuEntry(*arrays, out=)``, :func:`kinac.rt.cuda.entry_into.call_into`). Checked here: the in-place mode on the host
gives the default run's losses and weights bit for bit with 3 optimizer calls a step;
``call_into`` on a driverless entry (memory in host RAM, kernels in Python) runs an in-place
update once (not twice: the warm-up before a CUDA-graph capture), replays it after, and
refuses outputs that are not safe to write in place.
"""

from __future__ import annotations

from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_determinism_gpu_fake import FakeDriver, HostResource, N, _tensor, _view
from train_support import CACHE, DECODER

from kinac.artifacts.gpu import GpuLaunch, GpuLoweredEntry, GpuStep
from kinac.artifacts.host import BufferSpec
from kinac.rt.cuda import driver, graph
from kinac.rt.cuda.entry import GpuEntry
from kinac.rt.cuda.entry_into import call_into, inplace_safe
from kinac.rt.cuda.entry_support import DL_NAMES, KinaGpuError, array_nbytes
from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Tensor, contiguous_strides
from kinac.train import Trainer
from kinac.train.flat import ALIGN, layout
from kinac.train.optim import to_numpy


def test_inplace_mode_same_bits_three_calls_a_step() -> None:
    """One flat buffer each, overwritten (the GPU's way), on the host: the default run's
    losses and weights bit for bit, 3 AdamW calls a step (per-tensor: 3 per parameter)."""
    a = Trainer(DECODER, "decoder_1m", seed=3, cache_dir=CACHE)
    b = Trainer(DECODER, "decoder_1m", seed=3, cache_dir=CACHE, donate="inplace")
    assert b.opt.mode == "inplace" and a.opt.mode == "pingpong"
    ra, rb = a.run(3), b.run(3)
    assert [r.loss for r in ra] == [r.loss for r in rb]
    for k, v in a.weights.items():
        assert to_numpy(v).tobytes() == to_numpy(b.weights[k]).tobytes(), k
    for name in ("m", "v"):
        sa, sb = a.opt.state(name), b.opt.state(name)
        assert all(sa[k].tobytes() == sb[k].tobytes() for k in sa), name
    assert b.opt.calls == 3 * 3  # adamw-m, adamw-v, adamw-param over the flat buffer
    # the gradients were written into the flat gradient buffer: no copy, no new buffer
    grads = b.opt.grad_buffers()
    assert grads is not None
    outs = b._outs
    assert outs is not None
    assert all(
        o.ctypes.data == grads[n].ctypes.data for n, o in zip(b.names, outs[1:], strict=True)
    )
    # the host's emulation of in place writes each call's result to a temporary first (host
    # kernels take no aliased output): exactly one per optimizer call, nothing else
    assert b.allocations_per_step[1:] == [3, 3]


def test_inplace_f16_scaler_over_flat_buffers_same_bits() -> None:
    """f16 with the dynamic loss scaler: unscaling and the finiteness check over the flat
    gradient buffer (one check per dtype, the GPU's way) skip the same steps and give the
    per-tensor path's losses, scales and weights bit for bit, an overflowing step included."""
    runs = []
    for donate in (None, "inplace"):
        tr = Trainer(DECODER, "decoder_1m_f16", seed=4, growth_interval=2, cache_dir=CACHE,
                     donate=donate)  # fmt: skip
        assert tr.scaler is not None
        tr.scaler.scale = 2.0**40  # the f16 gradients overflow: the first step is skipped
        rs = tr.run(1)
        tr.scaler.scale = 1024.0
        rs += tr.run(3)
        runs.append((rs, tr))
    (ra, a), (rb, b) = runs
    assert rb[0].skipped and not rb[-1].skipped
    assert [(r.loss, r.skipped, r.scale) for r in ra] == [(r.loss, r.skipped, r.scale) for r in rb]
    for k, v in a.weights.items():
        assert to_numpy(v).tobytes() == to_numpy(b.weights[k]).tobytes(), k
    assert b.scaler is not None and b.scaler._flat is not None
    assert b.scaler._flat[1].calls == 4  # one finiteness check a step (one f32 flat buffer)


def test_flat_layout_aligns_every_slice() -> None:
    members, n = layout({"a": (3,), "b": (2, 65), "c": ()})
    assert [m.offset for m in members] == [0, ALIGN, 4 * ALIGN]
    assert n == 5 * ALIGN and members[2].size == 1


# ---- call_into on a driverless entry ----------------------------------------------------------


def _map_entry(steps: tuple[GpuStep, ...] | None = None) -> GpuEntry:
    """out0 = 2 * param0 + 1, one "map" kernel (a Python function over host memory)."""
    launch = GpuLaunch("k_map", 1, 128, ("param0", "out0"))
    if steps is None:
        steps = (GpuStep("k0_map", "map", "kernel", "f32", (N,), ("param0",), "out0", (launch,)),)
    params = (BufferSpec("x", "f32", (N,)),)
    outs = (BufferSpec("o", "f32", (N,)),)
    lw = GpuLoweredEntry("e", "", params, outs, ("cuda:0",), ("cuda:0",), 0, 0, steps, ())
    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.ordinal, e.pinned = lw, 0, True
    e.resource = HostResource()
    e.device = SimpleNamespace(enter=lambda: False, leave=lambda pushed: None)  # type: ignore[assignment]
    e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                     contiguous_strides(o.shape)) for o in outs]  # fmt: skip
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
    e.stream = e.capture_stream = SimpleNamespace(cu=0, handle=0, synchronize=lambda: None)  # type: ignore[assignment]
    e._imports, e._last_box, e._stager = {}, [None], None
    e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(2)], set(), {}, OrderedDict()
    e.captures = e.replays = 0
    e.arena = 0
    e.runs = 0  # type: ignore[attr-defined]

    def bind(key: tuple[int, ...]) -> Any:
        x, out = (p or e._staging(pos) for pos, p in enumerate(key))

        def seq(stream: Any) -> None:
            e.runs += 1  # type: ignore[attr-defined]
            _view(out)[:] = 2 * _view(x) + 1

        return seq, [seq]

    e._bind = bind  # type: ignore[method-assign]
    return e


class FakeGraph:
    captured = True

    def __init__(self, seq: Any, stream: Any, name: str = "") -> None:
        self.seq = seq

    def replay(self, stream: Any = None) -> None:
        self.seq(stream)

    def close(self) -> None:
        pass


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "_api", FakeDriver())
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(graph, "capture", FakeGraph)


def test_call_into_updates_in_place_once_then_replays(fake: None) -> None:
    e = _map_entry()
    x = _tensor(e.resource, np.arange(N, dtype=np.float32))
    (got,) = e(x, out=(x,))  # GpuEntry's out= is call_into
    assert got is x
    # the first call at these addresses: warm-up (the update) then capture, no second run
    np.testing.assert_array_equal(_view(x.ptr), 2 * np.arange(N) + 1)
    assert e.runs == 1 and e.captures == 1  # type: ignore[attr-defined]
    e(x, out=(x,))  # the captured graph, replayed
    np.testing.assert_array_equal(_view(x.ptr), 2 * (2 * np.arange(N) + 1) + 1)
    assert e.runs == 2 and e.replays == 1 and e.captures == 1  # type: ignore[attr-defined]
    # into another buffer: the plain path (a fresh binding: warm-up, then replay)
    y = _tensor(e.resource, np.zeros(N, np.float32))
    assert call_into(e, (x,), (y,))[0] is y
    np.testing.assert_array_equal(_view(y.ptr), 2 * _view(x.ptr) + 1)


def test_call_into_refuses_unsafe_outputs(fake: None) -> None:
    e = _map_entry()
    x = _tensor(e.resource, np.arange(N, dtype=np.float32))
    wrong = Tensor(e.resource.allocate(4 * N), (N - 1,), "float32", device=(KDL_CUDA, 0))
    with pytest.raises(KinaGpuError, match="expected float32"):
        call_into(e, (x,), (wrong,))
    with pytest.raises(KinaGpuError, match="outputs, got 2"):
        call_into(e, (x,), (x, x))
    base = e.resource.allocate(4 * (N + 8))
    x2 = Tensor(base, (N,), "float32", device=(KDL_CUDA, 0))
    shifted = Tensor(base + 16, (N,), "float32", device=(KDL_CUDA, 0))
    with pytest.raises(KinaGpuError, match="partly overlaps input 0"):
        call_into(e, (x2,), (shifted,))
    # a reduction may not overwrite its input
    red = GpuStep("k0_reduce", "reduce", "kernel", "f32", (N,), ("param0",), "out0")
    r = _map_entry((red,))
    z = _tensor(r.resource, np.arange(N, dtype=np.float32))
    with pytest.raises(KinaGpuError, match="cannot overwrite its input: step 0"):
        call_into(r, (z,), (z,))
    assert inplace_safe(e.lowered, {0: 0}) is None
    # an entry updating an input in place (the fused optimizer step) takes no copied input
    e.updates_inputs = (0,)
    with pytest.raises(KinaGpuError, match="updates `x` in place: pass a contiguous"):
        e(np.zeros(N, np.float32), out=(x,))
    assert "not a map" in (inplace_safe(r.lowered, {0: 0}) or "")


def _no_gpu() -> bool:
    from kinac.rt import cuda

    return not cuda.available()


@pytest.mark.gpu
@pytest.mark.skipif(_no_gpu(), reason="no CUDA GPU")
def test_gpu_step_in_place_one_graph_no_growth(tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the GPU: the in-place flat step gives the per-tensor step's losses and weights bit
    for bit (the same kernels' arithmetic), makes one fused optimizer call a step (equal to the 3 separate kernels bit for bit), the loss entry
    replays one CUDA graph with nothing staged (its weights and gradients never move), and
    the pool's allocated bytes do not grow after the first steps. Its graphs: one per
    address of the host batch's two pinned staging slots (``kinac.rt.cuda.staging``)."""
    from kinac.rt import cuda

    cache = str(tmp_path_factory.mktemp("gpu-step-cache"))
    a = Trainer(DECODER, "decoder_1m", seed=2, target="cuda", cache_dir=cache)
    b = Trainer(DECODER, "decoder_1m", seed=2, target="cuda", cache_dir=cache, donate=False)
    assert a.opt.mode == "inplace" and b.opt.mode == "calls"
    res = cuda.default_resource()
    ra = a.run(2)  # the host batch's two staging slots (device buffers) exist after two
    used = res.memory_stats()["allocated_bytes.all.current"]
    ra += a.run(3)
    assert res.memory_stats()["allocated_bytes.all.current"] == used
    rb = b.run(5)
    assert [r.loss for r in ra] == [r.loss for r in rb]
    for k, v in a.weights.items():
        assert to_numpy(v).tobytes() == to_numpy(b.weights[k]).tobytes(), k
    assert a.opt.fused and a.opt.calls == 5  # one fused AdamW kernel a step
    # the fused kernel equals the three separate in-place kernels bit for bit
    c = Trainer(DECODER, "decoder_1m", seed=2, target="cuda", cache_dir=cache, fused=False)
    rc = c.run(5)
    assert [r.loss for r in rc] == [r.loss for r in ra] and c.opt.calls == 3 * 5
    for k, v in a.weights.items():
        assert to_numpy(v).tobytes() == to_numpy(c.weights[k]).tobytes(), k
    fused_entry = a.opt._fused["flat.float32"]
    assert fused_entry.captures <= 2 and not fused_entry.volatile
    entry = a._entry.entry
    assert entry.captures <= 2 and not entry.volatile and entry.replays >= 3
    assert ra[-1].loss < ra[0].loss
