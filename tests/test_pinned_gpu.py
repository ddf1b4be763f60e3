"""Host inputs of a GPU entry staged through pinned slots on a copy stream (issue 17 item 3), on
a GPU: the values arrive right even when calls are queued back to back and the caller rewrites
its array between calls; the pinned and device pools do not grow over many calls; closing the
entry gives the pinned blocks back. ``tests/test_pinned.py`` checks the protocol without a GPU.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
from mlp_sweep_support import sweep_mlp

pytestmark = pytest.mark.gpu


def _need_gpu() -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")


SRC = """(module t)
(defn axpb [(x : (tensor f32 [N D])) (a : (tensor f32 [D])) (b : (tensor f32 [N D]))]
  -> (tensor f32 [N D])
  (add (mul x a) b))
"""


@pytest.fixture
def src(tmp_path: Path) -> Path:
    p = tmp_path / "t.kina"
    p.write_text(SRC, encoding="utf-8")
    return p


def test_staged_host_inputs_are_right_when_calls_queue_back_to_back(src: Path) -> None:
    _need_gpu()
    import kinac

    f = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    rng = np.random.default_rng(0)
    n, d = 512, 1000  # 2 MB per array: copies long enough to overlap
    a = rng.standard_normal(d).astype(np.float32)
    x = np.empty((n, d), np.float32)
    b = rng.standard_normal((n, d)).astype(np.float32)
    outs, wants = [], []
    for _ in range(24):  # no synchronisation between calls; x rewritten in place each time
        x[...] = rng.standard_normal((n, d)).astype(np.float32)
        outs.append(f(x, a, b))
        wants.append(x * a + b)
    for k, (o, w) in enumerate(zip(outs, wants, strict=True)):
        # the GPU contracts x * a + b into one fma (numpy rounds twice): 1e-6 absolute still
        # catches any stale or mixed-up staging buffer, whose values would be O(1) off
        np.testing.assert_allclose(o.numpy(), w, rtol=1e-6, atol=1e-6, err_msg=f"call {k}")
    entry = next(iter(f._entries.values()))
    st = entry._stager
    assert st is not None and st.copies == 24 * 3 and entry.pinned
    assert len(set(st.device_buffers())) == 2 * 3  # two slots per host parameter


def test_staged_and_unstaged_paths_agree_bit_for_bit(src: Path) -> None:
    _need_gpu()
    import torch

    import kinac

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    rng = np.random.default_rng(1)
    ins = [
        rng.standard_normal((7, 33)).astype(np.float32),
        rng.standard_normal(33).astype(np.float32),
        rng.standard_normal((7, 33)).astype(np.float32),
    ]
    staged = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    plain = kinac.compile(src, "axpb", target="cuda", no_cache=True, pinned=False)
    on_device = [torch.from_numpy(v).cuda() for v in ins]
    want = torch.from_dlpack(staged(*on_device)).cpu().numpy()
    for _ in range(3):
        np.testing.assert_array_equal(staged(*ins).numpy(), want)
        np.testing.assert_array_equal(plain(*ins).numpy(), want)
    # a strided CPU torch tensor and a float64 numpy array are staged too (cast on the way)
    t = torch.from_numpy(np.ascontiguousarray(ins[0].T)).t()
    np.testing.assert_array_equal(staged(t, *ins[1:]).numpy(), want)
    entry = next(iter(staged._entries.values()))
    np.testing.assert_array_equal(entry(ins[0], ins[1].astype(np.float64), ins[2]).numpy(), want)
    assert next(iter(plain._entries.values()))._stager is None


def test_no_growth_over_many_calls_and_blocks_back_on_close(src: Path) -> None:
    _need_gpu()
    import kinac
    from kinac.rt.cuda.pinned import default_pool

    pool = default_pool()
    gc.collect()  # entries of earlier tests (reference cycles) give their blocks back first
    base = pool.memory_stats()["allocated_bytes.all.current"]
    f = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    rng = np.random.default_rng(2)
    ins = [rng.standard_normal(s).astype(np.float32) for s in ((64, 256), (256,), (64, 256))]
    for _ in range(5):  # (as the loop below calls: the last output held during the next call,
        out = f(*ins)  # so the entry keeps its two output blocks from here: entry_hot.KEEP)
    del out
    entry = next(iter(f._entries.values()))
    entry.stream.synchronize()
    dev = entry.resource.memory_stats()
    pin = pool.memory_stats()
    for _ in range(300):
        out = f(*ins)
    entry.stream.synchronize()
    np.testing.assert_allclose(out.numpy(), ins[0] * ins[1] + ins[2], rtol=1e-6, atol=1e-6)  # fma
    del out
    gc.collect()
    dev2, pin2 = entry.resource.memory_stats(), pool.memory_stats()
    # the pinned pool: the same blocks, no new ones; the device pool: no growth
    assert pin2["allocated_bytes.all.current"] == pin["allocated_bytes.all.current"]
    assert pin2["misses"] == pin["misses"]
    assert pin2["allocated_bytes.all.current"] - base == entry._stager.pinned_bytes()
    flags = 4096 if entry._stager.flags is not None else 0  # the copy graphs' flags
    assert entry._stager.pinned_bytes() == 2 * (65536 + 4096 + 65536) + flags  # 2 slots x 3
    assert dev2["reserved_bytes.all.current"] == dev["reserved_bytes.all.current"]
    assert dev2["allocated_bytes.all.current"] <= dev["allocated_bytes.all.current"]
    from kinac.metrics import RunMetrics, parse, render

    m = parse(render(RunMetrics("axpb", "cuda", entry=entry)))
    assert m["kinac_host_input_copies_total"] == entry._stager.copies == 305 * 3
    pinned = [
        v for k, v in m.items() if k.startswith("kinac_alloc_allocated_bytes{") and "pinned" in k
    ]
    assert pinned == [pool.memory_stats()["allocated_bytes.all.current"]]
    entry._stager.close()
    assert pool.memory_stats()["allocated_bytes.all.current"] == base
    pool.check()


def test_the_copy_stream_has_the_greatest_priority(src: Path) -> None:
    _need_gpu()
    import kinac
    from kinac.rt.cuda import driver
    from kinac.rt.cuda.staging import priority_range

    f = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    x = np.ones((2, 4), np.float32)
    f(x, np.ones(4, np.float32), x)
    entry = next(iter(f._entries.values()))
    pushed = entry.device.enter()
    try:
        least, greatest = priority_range()
        d = driver.api()
        prio = driver.check(
            "cuStreamGetPriority", d.cuStreamGetPriority(entry._stager.copy_stream.cu)
        )
    finally:
        entry.device.leave(pushed)
    assert greatest <= least and int(prio) == greatest


def test_steady_state_host_calls_match_device_inputs_bit_for_bit(src: Path) -> None:
    """Host ``x`` each call (rewritten in place, no synchronisation), device weights: the calls
    after the first two take the staged steady state (driver calls through ctypes) and give
    what the same entry gives for the same ``x`` on the device, bit for bit."""
    _need_gpu()
    import torch

    import kinac

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    f = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    rng = np.random.default_rng(3)
    n, d = 256, 512
    a = torch.from_numpy(rng.standard_normal(d).astype(np.float32)).cuda()
    b = torch.from_numpy(rng.standard_normal((n, d)).astype(np.float32)).cuda()
    x = np.empty((n, d), np.float32)
    xs, outs = [], []
    for _ in range(16):
        x[...] = rng.standard_normal((n, d)).astype(np.float32)
        xs.append(x.copy())
        outs.append(torch.from_dlpack(f(x, a, b)).clone())  # clone: the output block is reused
    torch.cuda.synchronize()
    entry = next(e for k, e in f._entries.items() if k[0][0].device == "cpu")
    st = entry._stager
    assert st.calls.native and st.hot_calls >= 12
    for k, (xk, o) in enumerate(zip(xs, outs, strict=True)):
        want = torch.from_dlpack(f(torch.from_numpy(xk).cuda(), a, b)).cpu().numpy()
        np.testing.assert_array_equal(o.cpu().numpy(), want, err_msg=f"call {k}")


def test_pinned_empty_arrays_are_read_in_place_and_free_when_the_call_returns(src: Path) -> None:
    """An array from ``pinned_empty``, refilled right after each call returns: every call sees
    its own values (the call waited for its DMA), with no staging copy."""
    _need_gpu()
    import kinac
    from kinac.rt.cuda import pinned_empty

    f = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    rng = np.random.default_rng(4)
    n, d = 512, 1000
    a = rng.standard_normal(d).astype(np.float32)
    b = rng.standard_normal((n, d)).astype(np.float32)
    buf = pinned_empty((n, d), np.float32)
    outs, wants = [], []
    for _ in range(12):
        buf[...] = rng.standard_normal((n, d)).astype(np.float32)
        outs.append(f(buf, a, b))
        wants.append(buf * a + b)
    for k, (o, w) in enumerate(zip(outs, wants, strict=True)):
        np.testing.assert_allclose(o.numpy(), w, rtol=1e-6, atol=1e-6, err_msg=f"call {k}")  # fma
    st = next(iter(f._entries.values()))._stager
    assert st.direct == 12 and st.copies == 36


def test_split_staging_copy_into_pinned_memory() -> None:
    _need_gpu()
    from kinac.rt.cuda.pinned import PinnedBuffer, default_pool
    from kinac.rt.cuda.staging_copy import HostCopier

    src = np.random.default_rng(5).standard_normal((2048, 1024))  # float64, cast on the way
    blk = PinnedBuffer(default_pool(), src.shape, np.float32)
    copier = HostCopier(workers=3, min_bytes=1 << 20)
    copier(blk.array, src)
    assert copier.splits == 1
    np.testing.assert_array_equal(blk.array, src.astype(np.float32))
    blk.free()


def test_pinned_torch_tensors_are_read_in_place_on_the_steady_state(src: Path) -> None:
    """A ``pin_memory()`` CPU tensor refilled right after each call: its steady-state calls
    DMA from it directly (and wait for that DMA), every call sees its own values."""
    _need_gpu()
    import torch

    import kinac

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    f = kinac.compile(src, "axpb", target="cuda", no_cache=True)
    g = torch.Generator().manual_seed(6)
    n, d = 512, 1000
    a = torch.randn(d, generator=g).cuda()
    b = torch.randn(n, d, generator=g).cuda()
    x = torch.empty(n, d).pin_memory()
    outs, xs = [], []
    for _ in range(10):
        x.copy_(torch.randn(n, d, generator=g))
        xs.append(x.clone())
        outs.append(torch.from_dlpack(f(x, a, b)).clone())
    torch.cuda.synchronize()
    for k, (xk, o) in enumerate(zip(xs, outs, strict=True)):
        want = torch.from_dlpack(f(xk.cuda(), a, b)).cpu()
        assert torch.equal(o.cpu(), want), f"call {k}"
    st = next(e for k, e in f._entries.items() if k[0][0].device == "cpu")._stager
    assert st.hot_calls >= 6 and st.direct == st.hot_calls


@pytest.mark.parametrize("size", range(6))
def test_sweep_sizes_host_inputs_equal_device_inputs_through_the_graphs(size: int) -> None:
    """Each size of ``benches/runtime_sweep.py``'s sweep (the MLP, x 0.5-16 MiB from numpy,
    rewritten in place each call, no synchronisation): the steady state runs as two graph
    launches (copy graph + compute wrapper), and as driver calls (``use_graphs = False``),
    and both give what the same MLP gives for the same ``x`` on the device, bit for bit."""
    _need_gpu()
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no PyTorch CUDA")
    with sweep_mlp(size) as m:
        fn, ws, x, rng = m.fn, m.ws, m.x, m.rng
        xs, outs = [], []
        for k in range(10):
            if k == 6:  # the same stager on driver calls
                st = next(e for key, e in fn._entries.items() if key[0][0].device == "cpu")._stager
                assert st.graph_error is None and st.graph_calls >= 3, st.graph_error
                st.use_graphs = False
            x[...] = rng.standard_normal(x.shape, dtype=np.float32)
            xs.append(x.copy())
            outs.append(torch.from_dlpack(fn(x, *ws)).clone())  # (the output block is reused)
        torch.cuda.synchronize()
        assert st.hot_calls >= 7 and st.graph_calls == 4
        for k, (xk, o) in enumerate(zip(xs, outs, strict=True)):
            want = torch.from_dlpack(fn(torch.from_numpy(xk).cuda(), *ws)).cpu()
            assert torch.equal(o.cpu(), want), f"size {size}, call {k}"
