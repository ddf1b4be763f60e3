"""The host back end's speed-related choices (issue 14, CPU path), each checked as behaviour:
full-width vector loops on AVX-512 CPUs, BLAS products split into equal blocks per thread of
about ``MIN_BLOCK_ROWS``, pool workers asleep when idle."""

from __future__ import annotations

import ctypes
import platform
import threading
import time

import numpy as np
import pytest

from kinac.codegen.llvm import compile_object, host_target, jit_load, optimize_ir, wide_vectors
from kinac.ir import lower_graph
from kinac.ir.testing import GraphBuilder
from kinac.rt.host import pool

_X86 = platform.machine() == "x86_64"


def test_wide_vectors_only_where_avx512() -> None:
    avx2 = "+avx,+avx2,+fma,-avx512f"
    assert wide_vectors(avx2) == avx2
    avx512 = "+avx2,+avx512f,+evex512"
    assert wide_vectors(avx512) == avx512 + ",-prefer-256-bit"
    assert wide_vectors(wide_vectors(avx512)) == wide_vectors(avx512)  # idempotent
    assert wide_vectors("+avx512f,-evex512") == "+avx512f,-evex512"  # AVX10/256 parts


def test_map_loops_use_the_full_vector_width() -> None:
    """The optimised IR of an f32 map kernel holds 16-lane vectors on AVX-512 hosts and
    8-lane ones on AVX2 hosts (exp expanded inline, so the loop vectorises)."""
    g = GraphBuilder("silu")
    x = g.param("x", "f32", (64, 256))
    one = g.const(1.0)
    y = g.binary("div", x, g.binary("add", one, g.unary("exp", g.unary("neg", x))))
    lw = lower_graph(g.build(y))
    target = host_target()
    mod, _ = optimize_ir(lw.llvm_ir, target)
    text = str(mod)
    flags = target.features.split(",")
    if "+avx512f" in flags and "-evex512" not in flags:
        assert "<16 x float>" in text
    elif "+avx2" in flags:
        assert "<8 x float>" in text
    else:
        pytest.skip("no AVX2 on this host")


_PROTO = ctypes.CFUNCTYPE(
    None, ctypes.c_int32, ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64,
    ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
    ctypes.c_int64, ctypes.c_float, ctypes.c_void_p, ctypes.c_int64,
)  # fmt: skip


def _view(p: int, rows: int, cols: int, ld: int) -> np.ndarray:
    buf = (ctypes.c_float * ((rows - 1) * ld + cols)).from_address(p)
    a = np.frombuffer(memoryview(buf), dtype=np.float32)
    return np.lib.stride_tricks.as_strided(a, (rows, cols), (ld * 4, 4))


def _split_sizes(m: int, n: int, k: int, **pool_args: int) -> list[int]:
    """The block sizes (rows, or columns when there are more) of one ``[m, k] @ [k, n]``
    product split by a pool image of its own with no worker threads (``kinac_parallel`` runs
    the blocks inline), built by ``pool_ir(**pool_args)``; the result checked against numpy."""
    calls: list[tuple[int, int]] = []

    def gemm(o, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc):  # type: ignore[no-untyped-def]
        calls.append((m, n))
        av, bv = _view(a, m, k, lda), _view(b, k, n, ldb)
        _view(c, m, n, ldc)[...] = al * (av @ bv)

    cb = _PROTO(gemm)
    addr = ctypes.cast(cb, ctypes.c_void_p).value
    image = jit_load(
        compile_object(pool.pool_ir(202 if _X86 else 98, **pool_args), host_target()),  # type: ignore[arg-type]
        {"kinac_blas_sgemm": addr, "kinac_blas_dgemm": addr},  # type: ignore[dict-item]
        ("kinac_sgemm",),
    )
    sgemm = _PROTO(image.addresses["kinac_sgemm"])
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), np.float32)
    b = rng.standard_normal((k, n), np.float32)
    c = np.full((m, n), np.nan, np.float32)
    sgemm(101, 111, 111, m, n, k, 1.0, a.ctypes.data, k, b.ctypes.data, n, 0.0,
          c.ctypes.data, n)  # fmt: skip
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    del image
    split = 0 if all(call[1] == n for call in calls) else 1  # row blocks keep every column
    sizes = [call[split] for call in calls]
    assert sum(sizes) == (m, n)[split]
    return sizes


_SHAPES = ((256, 704, 256), (512, 256, 704), (200, 1000, 64), (130, 40, 512), (1100, 64, 64))


def test_split_products_share_equal_blocks_per_thread() -> None:
    """A product split on the pool of two threads runs as a multiple of two blocks of about
    MIN_BLOCK_ROWS (256) rows or columns, equal to within the rounding to 8, so both threads
    get the same share (rows where there are 256 per thread); without workers, one BLAS call. Before (2026-12-02), blocks were
    at least 256 wide and the rest made a last block: the small block's [512,256] @ [256,704]
    products ran as 256 + 256 + 192 columns, two blocks for one thread and one for the other
    (2/3 of the single-threaded time instead of 1/2)."""
    for m, n, k in _SHAPES:
        assert len(_split_sizes(m, n, k)) == 1, (m, n, k)  # no workers: one call
        sizes = _split_sizes(m, n, k, threads=2)
        total = sum(sizes)
        if total >= 2 * 128:
            assert len(sizes) % 2 == 0, (m, n, k, sizes)
        assert max(sizes) - min(sizes) <= 8 * len(sizes), (m, n, k, sizes)
        assert len(sizes) <= max(1, -(-total // 256)), (m, n, k, sizes)
    # rows when there are enough for 256 per thread (the gate and up products), else columns
    assert _split_sizes(512, 704, 256, threads=2) == [256, 256]
    assert _split_sizes(256, 704, 256, threads=2) == [352, 352]
    assert _split_sizes(512, 512, 256, threads=2) == [256, 256]


def test_split_products_before_used_blocks_of_at_least_min_rows() -> None:
    """The rule until 2026-12-02 (``balanced=False``, kept for ``benches/cpu_ab.py``): blocks
    of >= MIN_BLOCK_ROWS (256) rows or columns except the last."""
    for m, n, k in _SHAPES:
        sizes = _split_sizes(m, n, k, balanced=False)
        assert all(s >= 256 for s in sizes[:-1]), (m, n, k, sizes)
        assert len(sizes) <= max(1, -(-max(m, n) // 256))
    assert _split_sizes(512, 704, 256, balanced=False) == [256, 256, 192]


def test_idle_pool_workers_sleep() -> None:
    """After a job the pool's workers sleep on a futex: an idle process with the pool started
    uses (next to) no CPU time (a spinning wait, tried for speed, would show here)."""
    from kinac.rt.host.pool import runtime_symbols

    g = GraphBuilder("big")
    a, b = g.param("a", "f32", (256, 256)), g.param("b", "f32", (256, 256))
    from host_support import compiled

    e = compiled(g.build(g.matmul(a, b)))
    runtime_symbols()
    x = np.ones((256, 256), np.float32)
    e(x, x)  # the pool has just run a job: its worker spins, then sleeps
    time.sleep(0.05)
    before = time.process_time()
    time.sleep(0.5)
    used = time.process_time() - before
    assert used < 0.1, f"idle process used {used:.3f} s of CPU in 0.5 s"
    assert threading.active_count() >= 1


@pytest.mark.parametrize("n", [7, 128, 200])
def test_softmax_rows_with_nan_and_infinities_match_torch(n: int) -> None:
    """Rows holding NaN, +inf or only -inf come out as PyTorch's do, NaN where it has NaN,
    also where the +inf lies in the vector loop's scalar tail. (A row max by ``maxnum``,
    cheaper on x86 than the NaN-propagating ``maximum``, failed this under LLVM 22: a +inf
    in the tail was lost, so finite entries came out 0 instead of NaN.)"""
    import torch
    from host_support import compiled

    g = GraphBuilder("sm")
    x = g.param("x", "f32", (6, n))
    e = compiled(g.build(g.softmax(x, -1)))
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, n)).astype(np.float32) * 4
    a[1, n // 2] = np.nan
    a[2, n - 1] = np.inf
    a[3, :] = -np.inf
    a[4, 0] = np.nan
    a[4, 1 % n] = np.inf
    a[5, : n // 2] = -np.inf
    got = e(a)
    want = torch.softmax(torch.from_numpy(a), -1).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize(
    "dims",
    [
        {"b": 2, "s": 37, "d": 72, "h": 4, "kv": 2, "f": 100},  # S, D, F off every tile
        {"b": 1, "s": 300, "d": 96, "h": 2, "kv": 1, "f": 264},  # split products, odd rows
    ],
)
def test_block_at_odd_shapes_matches_torch(dims: dict[str, int]) -> None:
    """The transformer block with S not a multiple of any tile or vector width and D not a
    power of two, against PyTorch (f32): the split BLAS blocks, 16-lane loops and their
    scalar tails together cover every element."""
    import torch
    import torch.nn.functional as F
    from host_support import compiled

    from kinac.ir.testing import block_graph

    g = block_graph(**dims)  # type: ignore[arg-type]
    e = compiled(g)
    rng = np.random.default_rng(2)
    ins = []
    for name, t in g.params:
        scale = 1.0 / np.sqrt(t.shape[0]) if len(t.shape) == 2 else 1.0
        shift = 1.0 if name.startswith("wn") else 0.0
        ins.append((rng.standard_normal(t.shape) * scale + shift).astype(np.float32))
    x, wn1, wq, wk, wv, wo, wn2, wg, wu, wd = (torch.from_numpy(a) for a in ins)
    b, s, d, h, kv = dims["b"], dims["s"], dims["d"], dims["h"], dims["kv"]
    dh = d // h

    def rms(v: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return v / torch.sqrt(torch.mean(v * v, dim=-1, keepdim=True) + 1e-6) * w

    n1 = rms(x, wn1)
    q = (n1 @ wq).reshape(b, s, h, dh).transpose(1, 2)
    k = (n1 @ wk).reshape(b, s, kv, dh).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    v = (n1 @ wv).reshape(b, s, kv, dh).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    mask = torch.full((s, s), float("-inf")).triu(1)
    p = torch.softmax(q @ k.transpose(-1, -2) * dh**-0.5 + mask, dim=-1)
    hid = x + (p @ v).transpose(1, 2).reshape(b, s, d) @ wo
    n2 = rms(hid, wn2)
    want = (hid + (F.silu(n2 @ wg) * (n2 @ wu)) @ wd).numpy()
    got = e(*ins)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want))))


_COUNT_TASK = """
declare void @kinac_parallel(ptr, ptr, i64)
declare i64 @syscall(i64, ...)

; task i: count it in c[i]; count it in c[8] too when another thread than the caller (whose
; thread id is c[9]) ran it; then busy ~20 us so that a woken worker has blocks left to take
define void @count(ptr %c, i64 %i) {
entry:
  %p = getelementptr i64, ptr %c, i64 %i
  %o = atomicrmw add ptr %p, i64 1 monotonic
  %tid = call i64 (i64, ...) @syscall(i64 186)
  %cp = getelementptr i64, ptr %c, i64 9
  %caller = load atomic i64, ptr %cp monotonic, align 8
  %other = icmp ne i64 %tid, %caller
  %add = zext i1 %other to i64
  %wp = getelementptr i64, ptr %c, i64 8
  %o2 = atomicrmw add ptr %wp, i64 %add monotonic
  %t0 = call i64 @llvm.readcyclecounter()
  br label %busy
busy:
  %t = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t, %t0
  %more = icmp ult i64 %dt, 40000
  br i1 %more, label %busy, label %out
out:
  ret void
}

define void @jobs(ptr %c, i64 %tasks, i64 %n) {
entry:
  %tid = call i64 (i64, ...) @syscall(i64 186)
  %cp = getelementptr i64, ptr %c, i64 9
  store atomic i64 %tid, ptr %cp monotonic, align 8
  br label %loop
loop:
  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]
  call void @kinac_parallel(ptr @count, ptr %c, i64 %tasks)
  %k1 = add i64 %k, 1
  %more = icmp ult i64 %k1, %n
  br i1 %more, label %loop, label %out
out:
  ret void
}

declare i64 @llvm.readcyclecounter()
"""


@pytest.mark.skipif(platform.system() != "Linux" or not _X86, reason="the pool: Linux x86-64")
@pytest.mark.parametrize("spin_ticks,spin_yield", [(0, False), (2000, False), (20000, True)])
def test_pool_wakes_every_sleeper(spin_ticks: int, spin_yield: bool) -> None:
    """Jobs published while the worker spins, falls asleep or is waking, with pauses of random
    length between them, every task of every job run exactly once and none lost: a waker skips
    the wake syscall when it counts no sleeper, and a lost wake-up would hang here (a sleeping
    worker never joins, which the count of blocks run off the caller's thread shows; a caller
    asleep on the last block never returns)."""
    from kinac.rt.host.blas import raw_gemms

    raw = raw_gemms()  # bound but not called (the symbol table is process-wide: real ones)
    blas = {"kinac_blas_sgemm": raw["kinac_sgemm"], "kinac_blas_dgemm": raw["kinac_dgemm"]}
    ir = pool.pool_ir(202, spin_ticks=spin_ticks, spin_yield=spin_yield)
    image = jit_load(
        compile_object(ir, host_target()), blas, ("kinac_pool_worker", "kinac_parallel")
    )
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    threading.Thread(target=worker, daemon=True).start()
    tasks = jit_load(
        compile_object(_COUNT_TASK, host_target()),
        {"kinac_parallel": image.addresses["kinac_parallel"]},
        ("jobs",),
    )
    jobs = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)(
        tasks.addresses["jobs"]
    )
    counts = np.zeros(10, np.int64)
    rng = np.random.default_rng(3)
    done = threading.Event()

    def drive() -> None:
        for _ in range(60):
            jobs(counts.ctypes.data, 8, int(rng.integers(1, 8)))
            time.sleep(float(rng.choice([0.0, 2e-5, 2e-4, 2e-3])))
        done.set()

    t = threading.Thread(target=drive, daemon=True)
    t.start()
    assert done.wait(30), "a pool job never finished (a lost wake-up)"
    assert len(set(counts[:8].tolist())) == 1 and counts[0] >= 60
    assert counts[8] > 0, "the worker never ran a block: it was never woken"
    _IMAGES_KEPT.extend((image, tasks))  # the worker thread runs this code until exit


_IMAGES_KEPT: list[object] = []


def test_entry_reads_array_addresses_through_the_buffer_protocol() -> None:
    """The call path's fast address read gives ``a.ctypes.data`` for writable, read-only,
    empty, sliced and bf16 arrays (read-only and empty ones take the slow path)."""
    from kinac.rt.host.arrays import bf16_array
    from kinac.rt.host.entry import _address

    a = np.arange(10, dtype=np.float32)
    ro = a.copy()
    ro.flags.writeable = False
    rows = np.arange(12.0).reshape(3, 4)[1:]
    for x in (a, ro, np.empty(0, np.float32), rows, bf16_array(np.zeros(4, np.uint16))):
        assert _address(x) == x.ctypes.data


@pytest.mark.parametrize("s", [40, 64])
def test_causal_softmax_reads_visible_keys_and_keeps_fully_masked_rows_nan(s: int) -> None:
    """softmax(scores + user mask + causal) over keys, rows cut at the diagonal (rounded up to
    16): equal to PyTorch's on ordinary rows, and a row the user's mask hides entirely is NaN
    across the whole row, the part past the diagonal included (language.md, "Fully masked
    softmax rows"; it was 0 there when the skipped part was stored as a constant 0)."""
    import torch
    from host_support import compiled

    from kinac.ir.testing import causal_mask

    g = GraphBuilder("causal_sm")
    sc, um = g.param("scores", "f32", (2, s, s)), g.param("mask", "f32", (2, s, s))
    x = g.binary("add", g.binary("add", sc, um), causal_mask(g, s))
    e = compiled(g.build(g.softmax(x, -1)))
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, s, s)).astype(np.float32) * 3
    m = np.zeros((2, s, s), np.float32)
    m[1, 5, :] = -np.inf  # row 5 of batch 1: every key masked
    got = e(a, m)
    tri = np.triu(np.full((s, s), -np.inf, np.float32), 1)
    want = torch.softmax(torch.from_numpy(a + m + tri), -1).numpy()
    assert np.isnan(got[1, 5]).all() and np.isnan(want[1, 5]).all()
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=2e-6, atol=1e-7)
    assert (got[0][np.triu_indices(s, 1)] == 0).all()


_WHO_TASK = """
declare void @kinac_parallel(ptr, ptr, i64)
declare i64 @syscall(i64, ...)
declare i64 @llvm.readcyclecounter()

; task i: c[i] = the id of the thread that ran it, then busy ~100 us (so both threads take some)
define void @who(ptr %c, i64 %i) {
entry:
  %tid = call i64 (i64, ...) @syscall(i64 186)
  %p = getelementptr i64, ptr %c, i64 %i
  store atomic i64 %tid, ptr %p monotonic, align 8
  %t0 = call i64 @llvm.readcyclecounter()
  br label %busy
busy:
  %t = call i64 @llvm.readcyclecounter()
  %dt = sub i64 %t, %t0
  %more = icmp ult i64 %dt, 200000
  br i1 %more, label %busy, label %out
out:
  ret void
}

define void @job(ptr %c, i64 %tasks) {
entry:
  call void @kinac_parallel(ptr @who, ptr %c, i64 %tasks)
  ret void
}
"""


@pytest.mark.skipif(platform.system() != "Linux" or not _X86, reason="the pool: Linux x86-64")
@pytest.mark.parametrize("sides", [True, False])
def test_pool_caller_takes_the_bottom_blocks_and_workers_the_top(sides: bool) -> None:
    """With ``sides`` (pool.SIDES, 2026-12-02d) the caller runs a prefix of a job's blocks and
    the worker the rest from the top, so consecutive jobs over the same rows give each thread
    the same rows; every block runs once either way (without ``sides`` both take from the
    bottom: the worker's blocks need not be a suffix)."""
    from kinac.rt.host.blas import raw_gemms

    raw = raw_gemms()
    blas = {"kinac_blas_sgemm": raw["kinac_sgemm"], "kinac_blas_dgemm": raw["kinac_dgemm"]}
    ir = pool.pool_ir(202, sides=sides)
    image = jit_load(
        compile_object(ir, host_target()), blas, ("kinac_pool_worker", "kinac_parallel")
    )
    worker = ctypes.CFUNCTYPE(None)(image.addresses["kinac_pool_worker"])
    threading.Thread(target=worker, daemon=True).start()
    time.sleep(0.05)  # the worker registers itself (until then jobs run inline)
    tasks = jit_load(
        compile_object(_WHO_TASK, host_target()),
        {"kinac_parallel": image.addresses["kinac_parallel"]},
        ("job",),
    )
    job = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(tasks.addresses["job"])
    caller = threading.get_native_id()
    shared = 0
    for _ in range(40):
        who = np.zeros(16, np.int64)
        job(who.ctypes.data, 16)
        assert (who != 0).all(), "a block did not run"
        mine = who == caller
        if sides:  # the caller's blocks are a prefix, the worker's the suffix
            first_other = int(np.argmin(mine)) if not mine.all() else 16
            assert mine[:first_other].all() and not mine[first_other:].any(), who
        shared += int(0 < mine.sum() < 16)
        if shared >= 3:
            break
    assert shared > 0, "the worker never took a block"
    _IMAGES_KEPT.extend((image, tasks))
