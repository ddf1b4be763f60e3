"""GPU tests of the CUDA runtime (skipped without a driver and a device)."""

from __future__ import annotations

import gc
import json
import random
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kinac.rt import cuda
from kinac.rt.cuda import soak
from kinac.rt.cuda.testing import TestKernels, read_f32, verify_blocks, write_f32

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not cuda.available(), reason=f"no CUDA GPU: {cuda.unavailable_reason()}"),
]

MiB = 1 << 20


@pytest.fixture(scope="module")
def k() -> TestKernels:
    return TestKernels()


@pytest.fixture(scope="module")
def streams() -> Iterator[tuple[cuda.Stream, cuda.Stream]]:
    a, b = cuda.Stream(), cuda.Stream()
    yield a, b
    a.synchronize()
    b.synchronize()


def test_device_and_event_timing(k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream]) -> None:
    dev = cuda.get_device()
    assert dev.sm_count > 0 and dev.compute_capability >= (7, 0)
    free, total = dev.mem_info()
    assert 0 < free <= total
    s = streams[0]
    pool = cuda.make_resource("pool")
    p = pool.allocate(64 * MiB, s.handle)
    start, end = cuda.Event(), cuda.Event()
    start.record(s)
    k.fill(p, 16 * MiB, 7, s)
    end.record(s)
    end.synchronize()
    assert start.elapsed_ms(end) > 0
    pool.deallocate(p, 64 * MiB, s.handle)


def test_driver_errors_name_the_call_and_the_error() -> None:
    with pytest.raises(cuda.CudaError) as ei:
        cuda.load_module(".version 8.0\n.target sm_90\n.address_size 64\nthis is not ptx\n")
    e = ei.value
    assert e.call == "cuModuleLoadData"
    assert e.name.startswith("CUDA_ERROR_") and e.code != 0
    assert "cuModuleLoadData failed: CUDA_ERROR_" in str(e)
    # a raw binding returns an error tuple; check() turns it into CudaError
    from kinac.rt.cuda.driver import api, check

    with pytest.raises(cuda.CudaError, match="cuMemFree failed: CUDA_ERROR_"):
        check("cuMemFree", api().cuMemFree(0xDEAD0000))


def test_module_cache_and_kernel_lookup(k: TestKernels) -> None:
    from kinac.codegen.ptx_testkernels import hand_kernels_ptx
    from kinac.rt.cuda.module import cached_modules

    n = cached_modules()
    m2 = cuda.load_module(hand_kernels_ptx().encode())
    assert m2 is k.module and cached_modules() == n
    assert m2.function("fill_u32") is k.fill_kernel
    assert k.fill_kernel.num_regs > 0


@pytest.mark.parametrize("path", cuda.module.LAUNCH_PATHS)
def test_launch_paths_and_argument_updates(
    k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream], path: str
) -> None:
    s = streams[0]
    pool = cuda.make_resource("pool")
    n = 100_000
    x, y = pool.allocate(4 * n, s.handle), pool.allocate(4 * n, s.handle)
    rng = np.random.default_rng(1)
    xv, yv = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    write_f32(x, xv, s)
    write_f32(y, yv, s)
    launch = k.axpy(y, x, 2.0, n, path=path)
    launch(s)
    launch(s, y, x, 0.5, n)  # only the scalar changes
    launch(s, x, y, 1.0, n)  # pointers swap: x += y
    ref_y = yv + 2.0 * xv
    ref_y = ref_y + np.float32(0.5) * xv
    ref_x = xv + ref_y
    np.testing.assert_allclose(read_f32(y, n, s), ref_y, rtol=1e-6)
    np.testing.assert_allclose(read_f32(x, n, s), ref_x, rtol=1e-6)
    assert launch.args == (x, y, 1.0, n)
    pool.deallocate(x, 4 * n, s.handle)
    pool.deallocate(y, 4 * n, s.handle)


def test_graph_path_launches_keep_queued_values_and_follow_set_and_update(
    k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream]
) -> None:
    """The one-kernel graph of the default path: argument changes made while earlier launches
    are still queued affect only later launches; set()/update()/close() and a second stream."""
    s, s2 = streams
    pool = cuda.make_resource("pool")
    n = 1 << 20  # big enough that launches are still queued while the host changes arguments
    y = pool.allocate(4 * n, s.handle)
    write_f32(y, np.ones(n, np.float32), s)
    launch = k.scale_add(y, 1.0, 0.0, n, path="graph")
    assert launch.path == "graph"
    expected = np.ones(n, np.float32)
    for i in range(20):
        launch(s, y, 1.0 + i / 64, 0.5 * i, n)
        expected = expected * np.float32(1.0 + i / 64) + np.float32(0.5 * i)
    launch.set(2, 3.0)  # b = 3
    launch(s)
    expected = expected * np.float32(1.0 + 19 / 64) + np.float32(3.0)
    launch.update((y, 2.0, -1.0, n))
    launch(s)
    expected = expected * np.float32(2.0) - np.float32(1.0)
    s.synchronize()
    launch.run(s2)  # the same graph on another stream
    expected = expected * np.float32(2.0) - np.float32(1.0)
    s2.synchronize()
    launch.close()  # released now; the next launch builds it again
    launch(s, y, 0.5, 0.0, n)
    expected = expected * np.float32(0.5)
    np.testing.assert_allclose(read_f32(y, n, s), expected, rtol=1e-5)
    pool.deallocate(y, 4 * n, s.handle)


def test_graph_path_launch_inside_a_foreign_capture(
    k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream]
) -> None:
    """A graph-path launch on a stream that someone else (not kinac) is capturing ends up in
    their graph and replays with the right values."""
    from kinac.rt.cuda.driver import api, check

    d = api()
    s = cuda.Stream()
    pool = cuda.make_resource("pool")
    n = 4096
    y = pool.allocate(4 * n, s.handle)
    write_f32(y, np.ones(n, np.float32), s)
    launch = k.scale_add(y, 2.0, 1.0, n, path="graph")
    launch(s)  # built and launched eagerly first: y = 3
    mode = d.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
    check("cuStreamBeginCapture", d.cuStreamBeginCapture(s.cu, mode))
    try:
        launch(s)
    finally:
        graph = check("cuStreamEndCapture", d.cuStreamEndCapture(s.cu))
    ex = check("cuGraphInstantiate", d.cuGraphInstantiate(graph, 0))
    for _ in range(2):
        check("cuGraphLaunch", d.cuGraphLaunch(ex, s.cu))
    np.testing.assert_array_equal(read_f32(y, n, s), np.full(n, 15.0, np.float32))
    check("cuGraphExecDestroy", d.cuGraphExecDestroy(ex))
    check("cuGraphDestroy", d.cuGraphDestroy(graph))
    pool.deallocate(y, 4 * n, s.handle)


def _pattern_run(
    resource: cuda.MemoryResource,
    k: TestKernels,
    streams: tuple[cuda.Stream, cuda.Stream],
    seed: int,
) -> None:
    rng = random.Random(seed)
    by_handle = {st.handle: st for st in streams}
    live: list[tuple[int, int, int, int]] = []  # ptr, nbytes, value, stream handle
    value = 1
    for step in range(1500):
        if live and (rng.random() < 0.45 or len(live) > 200):
            ptr, nbytes, _, h = live.pop(rng.randrange(len(live)))
            free_on = rng.choice(
                list(by_handle)
            )  # interleaved frees, sometimes on the other stream
            if free_on != h:
                cuda.order_streams(h, free_on)
            resource.deallocate(ptr, nbytes, free_on)
        else:
            nbytes = soak.mixed_size(rng) if rng.random() < 0.3 else rng.randrange(4, 256 * 1024)
            st = rng.choice(streams)
            ptr = resource.allocate(nbytes, st.handle)
            k.fill(ptr, nbytes // 4, value, st)
            live.append((ptr, nbytes, value, st.handle))
            value += 1
        if step % 500 == 499:
            for st in streams:
                st.synchronize()
            bad = verify_blocks([(p, n, v) for p, n, v, _ in live], streams[0])
            assert not bad, bad[:5]
    for ptr, nbytes, _, h in live:
        resource.deallocate(ptr, nbytes, h)
    for st in streams:
        st.synchronize()


@pytest.mark.parametrize("name", ["cuda", "async", "pool", "logging"])
def test_allocation_patterns_contents(
    name: str, k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream], tmp_path: Path
) -> None:
    log = tmp_path / "alloc.jsonl"
    res = cuda.make_resource(name, log_path=str(log))
    _pattern_run(res, k, streams, seed=zlib.crc32(name.encode()) & 0xFFFF)
    s = res.memory_stats()
    assert s["allocated_bytes.all.current"] == 0 and s["allocation.all.current"] == 0
    assert s["allocation.all.allocated"] == s["allocation.all.freed"] > 500
    if isinstance(res, cuda.PoolResource):
        res.check()
        res.release()
        assert res.memory_stats()["reserved_bytes.all.current"] == 0
        assert res.upstream.memory_stats()["allocated_bytes.all.current"] == 0
    if isinstance(res, cuda.LoggingResource):
        res.close()
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        ops = [x["op"] for x in lines]
        assert ops.count("allocate") == ops.count("deallocate") == s["allocation.all.allocated"]


def test_pool_coalescing_and_exact_stats_on_device(
    k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream]
) -> None:
    s = streams[0]
    policy = cuda.GrowthPolicy(min_segment=32 * MiB, max_segment=32 * MiB, factor=0.0)
    pool = cuda.PoolResource(cuda.CudaResource(), policy, order=cuda.order_streams)
    a, b, c = (pool.allocate(MiB, s.handle) for _ in range(3))
    assert (b - a, c - b) == (MiB, MiB)
    for i, p in enumerate((a, b, c)):
        k.fill(p, MiB // 4, 100 + i, s)
    assert not verify_blocks([(a, MiB, 100), (b, MiB, 101), (c, MiB, 102)], s)
    pool.deallocate(b, MiB, s.handle)
    pool.deallocate(a, MiB, s.handle)
    d = pool.allocate(2 * MiB, s.handle)  # a and b merged: the 2 MiB block starts at a
    assert d == a
    k.fill(d, 2 * MiB // 4, 200, s)
    assert not verify_blocks([(d, 2 * MiB, 200), (c, MiB, 102)], s)
    pool.deallocate(c, MiB, s.handle)
    pool.deallocate(d, 2 * MiB, s.handle)
    st = pool.memory_stats()
    assert st["free_blocks"] == 1 and st["largest_free_block_bytes"] == 32 * MiB
    assert st["allocated_bytes.all.peak"] == 3 * MiB
    assert st["allocated_bytes.all.allocated"] == st["allocated_bytes.all.freed"] == 5 * MiB
    assert st["allocation.all.allocated"] == 4 and st["allocation.all.peak"] == 3
    assert st["reserved_bytes.all.current"] == 32 * MiB and st["segment.all.current"] == 1
    pool.check()
    assert pool.release() == 32 * MiB
    assert pool.upstream.memory_stats()["allocated_bytes.all.current"] == 0


def test_pool_out_of_memory_error_has_statistics(streams: tuple[cuda.Stream, cuda.Stream]) -> None:
    pool = cuda.PoolResource(cuda.CudaResource(), order=cuda.order_streams)
    keep = pool.allocate(MiB, streams[0].handle)
    with pytest.raises(cuda.OutOfMemoryError) as ei:
        pool.allocate(1 << 38, streams[0].handle)  # 256 GiB: more than the card has
    e = ei.value
    assert e.stats["num_ooms"] == 1 and e.stats["num_alloc_retries"] == 1
    assert e.stats["allocated_bytes.all.current"] == MiB
    assert "allocated_bytes.all.current=" in str(e) and "CUDA_ERROR_OUT_OF_MEMORY" in str(e)
    pool.deallocate(keep, MiB, streams[0].handle)
    pool.release()


def test_dlpack_round_trip_with_torch(
    k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream]
) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    s = streams[0]
    pool = cuda.make_resource("pool")
    n = 32 * MiB  # large enough that an unordered torch read would race with the fill
    t = cuda.Tensor.empty((n,), "float32", pool, s.handle)
    k.fill(t.ptr, n, np.float32(1.5).view(np.uint32).item(), s)  # queued on our stream
    tt = torch.from_dlpack(t)  # orders torch's stream after ours (no host sync)
    assert tt.data_ptr() == t.ptr and tt.device.type == "cuda" and tt.shape == (n,)
    assert float(tt.min()) == float(tt.max()) == 1.5  # the fill finished before torch read
    tt.mul_(2)  # in-place torch op on kinac memory
    r = torch.sqrt(tt) + 1  # out-of-place: a torch buffer
    kr = cuda.Tensor.from_dlpack(r, stream=s.handle)  # zero copy back into kinac
    assert kr.ptr == r.data_ptr() and kr.shape == (n,)
    got = kr.numpy()
    np.testing.assert_allclose(got[:1000], np.sqrt(3.0) + 1, rtol=1e-6)
    assert t.numpy()[-1] == 3.0
    # legacy capsule path, and a kinac -> kinac import
    legacy = torch.utils.dlpack.from_dlpack(t.__dlpack__(stream=1))
    assert legacy.data_ptr() == t.ptr
    again = cuda.Tensor.from_dlpack(t, stream=streams[1].handle)
    assert again.ptr == t.ptr
    torch.cuda.synchronize()
    del tt, legacy, again, kr, r
    gc.collect()
    from kinac.rt.cuda.dlpack import live_exports

    assert live_exports() == 0


def test_graph_replay_equals_eager(
    k: TestKernels, streams: tuple[cuda.Stream, cuda.Stream]
) -> None:
    s = streams[0]
    pool = cuda.make_resource("pool")
    n = 1 << 20
    rng = np.random.default_rng(5)
    x0 = rng.standard_normal(n).astype(np.float32)
    y0 = rng.standard_normal(n).astype(np.float32)
    bufs = {}
    for name in ("xe", "ye", "xg", "yg"):
        bufs[name] = pool.allocate(4 * n, s.handle)
        write_f32(bufs[name], x0 if name[0] == "x" else y0, s)

    def sequence_for(x: int, y: int) -> list[cuda.Launch]:
        out = []
        for i in range(10):
            out.append(k.axpy(y, x, 0.5 + i / 8, n))
            out.append(k.scale_add(x, 0.9, 0.01 * i, n))
        return out

    eager = sequence_for(bufs["xe"], bufs["ye"])
    graphed = sequence_for(bufs["xg"], bufs["yg"])

    def run_graphed(st: cuda.Stream) -> None:
        for launch in graphed:
            launch(st)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # capture must not fall back here
        g = cuda.capture(run_graphed, s, name="test-entry")
    assert g.captured and g.num_nodes in (20, -1)
    for _ in range(3):
        for launch in eager:
            launch(s)
        g.replay()
    s.synchronize()
    for a, b in (("xe", "xg"), ("ye", "yg")):
        np.testing.assert_array_equal(read_f32(bufs[a], n, s), read_f32(bufs[b], n, s))
    assert not np.array_equal(read_f32(bufs["ye"], n, s), y0)
    g.close()


def test_graph_capture_failure_falls_back_once(k: TestKernels) -> None:
    pool = cuda.make_resource("pool")
    null = cuda.Stream.null()  # the legacy NULL stream cannot be captured
    n = 4096
    y = pool.allocate(4 * n)
    write_f32(y, np.zeros(n, np.float32), null)
    launch = k.scale_add(y, 1.0, 1.0, n)
    with pytest.warns(cuda.GraphCaptureWarning, match="running its launches eagerly") as rec:
        g = cuda.capture(lambda st: launch(st), null, name="legacy-entry")
    assert len(rec) == 1 and not g.captured and "cuStreamBeginCapture" in (g.fallback_reason or "")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once: replays do not warn again
        for _ in range(3):
            g.replay()
    np.testing.assert_array_equal(read_f32(y, n, null), np.full(n, 3.0, np.float32))
    pool.deallocate(y)
