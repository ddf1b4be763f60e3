"""The host side of staging, without a GPU (issue 17 item 3): big staging copies split across
threads give the same bytes as one ``numpy.copyto`` (cast included); small or strided ones are
not split; ``pinned_empty`` arrays live in the pinned pool, are recognised only as the object
handed out, and give their block back when they and their views are gone."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

from kinac.rt.cuda import pinned
from kinac.rt.cuda.pinned import PinnedPool
from kinac.rt.cuda.staging_copy import HostCopier


@pytest.mark.parametrize("src_dtype", ["float32", "float64", "int32"])
def test_split_copies_are_one_copyto(src_dtype: str) -> None:
    rng = np.random.default_rng(0)
    src = (rng.standard_normal((37, 1001)) * 1e3).astype(src_dtype)
    copier = HostCopier(workers=3, min_bytes=4096)
    got = np.empty((37, 1001), np.float32)
    copier(got, src)
    want = np.empty_like(got)
    np.copyto(want, src, casting="unsafe")
    assert got.tobytes() == want.tobytes() and copier.splits == 1
    strided = src.T.copy().T  # not contiguous: one copyto
    copier(got, strided)
    assert got.tobytes() == want.tobytes() and copier.splits == 1
    small = HostCopier(workers=3)  # under PARALLEL_MIN_BYTES: one copyto
    small(got, src)
    assert small.splits == 0 and got.tobytes() == want.tobytes()


def test_a_failing_part_is_raised_after_every_part_is_done() -> None:
    copier = HostCopier(workers=2, min_bytes=64)
    dst = np.empty(1000, np.int32)
    src = np.full(1000, 7, np.int64)
    src[999] = 1  # fine: casting is unsafe, so no part fails; then a read-only destination
    copier(dst, src)
    assert (dst[:999] == 7).all() and dst[999] == 1
    dst.flags.writeable = False
    with pytest.raises(ValueError):
        copier(dst, src)
    assert copier.splits == 1  # the failed one was not counted


def test_pinned_empty_blocks_come_from_the_pool_and_go_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live: dict[int, ctypes.Array[ctypes.c_char]] = {}

    def alloc(n: int) -> int:
        b = ctypes.create_string_buffer(n)
        live[ctypes.addressof(b)] = b
        return ctypes.addressof(b)

    pool = PinnedPool(alloc=alloc, free=lambda p: None)
    monkeypatch.setattr(pinned, "_pool", pool)
    a = pinned.pinned_empty((3, 5), "float64")
    assert a.shape == (3, 5) and a.dtype == np.float64 and a.flags.c_contiguous
    assert a.flags.writeable and a.ctypes.data in live
    assert pinned.handed_out(a) == (a.ctypes.data, 120)
    v = a[1:]
    assert pinned.handed_out(v) == (0, 0)  # a view: an ordinary host array to the stager
    a[...] = 2.5
    assert pool.memory_stats()["allocated_bytes.all.current"] == 4096
    del a
    gc.collect()
    assert pool.memory_stats()["allocated_bytes.all.current"] == 4096  # the view keeps it
    assert float(v.sum()) == 25.0 and not pinned.HANDED
    del v
    gc.collect()
    assert pool.memory_stats()["allocated_bytes.all.current"] == 0
    pool.check()


def test_streaming_split_copies_are_one_copyto() -> None:
    """The streaming-store copy split across threads (parts cut at 4 KiB multiples of the
    page-aligned block): the same bytes as one ``numpy.copyto``; a cast, a strided source or an
    unaligned block take the plain copy."""
    from kinac.rt.cuda import staging_nt

    raw = staging_nt.raw_copy()
    if raw is None:
        pytest.skip("no llvmlite host target")
    rng = np.random.default_rng(3)
    copier = HostCopier(workers=3, min_bytes=4096)
    copy = copier.streaming(raw)
    n = 37 * 1001  # not a multiple of the parts or of 4 KiB
    mem = np.zeros(4 * n + 8192, np.uint8)
    off = -mem.ctypes.data % 4096
    dst = mem[off : off + 4 * n].view(np.float32).reshape(37, 1001)
    src = rng.standard_normal((37, 1001)).astype(np.float32)
    copy(dst, src)
    assert dst.tobytes() == src.tobytes() and copier.splits == 1
    for other in (src.astype(np.float64), src.T.copy().T):  # a cast, a strided source: plain
        dst[...] = 0
        copy(dst, other)
        assert dst.tobytes() == src.tobytes()
    unaligned = mem[off + 64 : off + 64 + 4 * n].view(np.float32).reshape(37, 1001)
    copy(unaligned, src)
    assert unaligned.tobytes() == src.tobytes() and copier.splits == 3  # (2 plain splits)


def test_the_plans_copyto_without_its_dispatcher_copies_as_numpy_does() -> None:
    """``staging_graphs.raw_copyto`` (``numpy.copyto``'s C function, no ``__array_function__``
    dispatch): the same bytes, casts and errors as ``numpy.copyto`` on plain arrays."""
    from kinac.rt.cuda.staging_graphs import raw_copyto

    cp = raw_copyto()
    rng = np.random.default_rng(3)
    src = rng.standard_normal((3, 5)).astype(np.float32)
    a, b = np.empty_like(src), np.empty_like(src)
    cp(a, src)
    np.copyto(b, src)
    assert a.tobytes() == b.tobytes() == src.tobytes()
    cp(a, src[:, ::-1])  # strided: read as strided
    np.testing.assert_array_equal(a, src[:, ::-1])
    with pytest.raises(ValueError):
        cp(a, src.T)  # (5, 3) into (3, 5), as numpy.copyto refuses it
