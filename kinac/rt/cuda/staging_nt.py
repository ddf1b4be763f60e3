"""The staging copy with streaming (non-temporal) stores (issue 17's last goal, lever 2).

Why: the H200 host copied a 1 MiB ``x`` into one pinned block in 33 us, but in the host-input
loop, into the two turns' blocks in turn, in 51 us: ``numpy.copyto`` writes through the cache,
so each block is first read into the core's cache (read for ownership) and the two blocks and
``x`` together exceed its L2, evicting ``x`` and each other. The DMA reads the block once, from
memory or the last-level cache; the host never reads it. Streaming stores (x86 ``vmovntdq``,
AArch64 ``stnp``) write whole lines without reading them and without keeping them in the
core's cache, so the copy costs the reads of ``x`` (cached) and the line writes only.

The copy is LLVM IR compiled for this machine once per process through the runtime's llvmlite
loader (:mod:`kinac.codegen.llvm`, as the host task pool): 128 bytes per iteration as four
32-byte vectors (unaligned loads, aligned non-temporal stores: the blocks are page-aligned),
the tail by ``llvm.memcpy``, then a full fence (streaming stores are weakly ordered: they must
be visible before the DMA the host queues next may read them).

The call reads the numpy array's data pointer itself (``PyArray_DATA``: the word after the
object header of ``PyArrayObject``), which :func:`stream_copier` checks once against
``ndarray.ctypes.data``: that attribute alone costs ~2 us per call in Python. Where the check
or the compile fails the copier is None and staging keeps ``numpy.copyto``.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any

_DATA_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # PyObject_HEAD: refcount, type

_BODY = """
define void @kinac_stream_copy{W}(ptr noalias %dst, ptr noalias %src, i64 %n) nounwind {{
entry:
  %nb = and i64 %n, -{STEP}
  %any = icmp ugt i64 %nb, 0
  br i1 %any, label %loop, label %tail

loop:
  %i = phi i64 [ 0, %entry ], [ %i.next, %loop ]
  %s0 = getelementptr i8, ptr %src, i64 %i
  %s1 = getelementptr i8, ptr %s0, i64 {W}
  %s2 = getelementptr i8, ptr %s0, i64 {W2}
  %s3 = getelementptr i8, ptr %s0, i64 {W3}
  %v0 = load {V}, ptr %s0, align 1
  %v1 = load {V}, ptr %s1, align 1
  %v2 = load {V}, ptr %s2, align 1
  %v3 = load {V}, ptr %s3, align 1
  %d0 = getelementptr i8, ptr %dst, i64 %i
  %d1 = getelementptr i8, ptr %d0, i64 {W}
  %d2 = getelementptr i8, ptr %d0, i64 {W2}
  %d3 = getelementptr i8, ptr %d0, i64 {W3}
  store {V} %v0, ptr %d0, align {W}, !nontemporal !0
  store {V} %v1, ptr %d1, align {W}, !nontemporal !0
  store {V} %v2, ptr %d2, align {W}, !nontemporal !0
  store {V} %v3, ptr %d3, align {W}, !nontemporal !0
  %i.next = add i64 %i, {STEP}
  %more = icmp ult i64 %i.next, %nb
  br i1 %more, label %loop, label %tail

tail:
  %rest = sub i64 %n, %nb
  %dt = getelementptr i8, ptr %dst, i64 %nb
  %st = getelementptr i8, ptr %src, i64 %nb
  call void @llvm.memcpy.p0.p0.i64(ptr %dt, ptr %st, i64 %rest, i1 false)
  fence seq_cst
  ret void
}}

define void @kinac_stream_copy_array{W}(ptr %dst, ptr %array, i64 %n) nounwind {{
entry:
  %pp = getelementptr i8, ptr %array, i64 {OFF}
  %src = load ptr, ptr %pp, align 8
  call void @kinac_stream_copy{W}(ptr %dst, ptr %src, i64 %n)
  ret void
}}
"""


def ir() -> str:
    """The module: the copy with 32-byte and with 64-byte vectors (one AVX2 / AVX-512 store
    each where the CPU has them; LLVM splits them where it does not)."""
    parts = [
        _BODY.format(W=w, W2=2 * w, W3=3 * w, STEP=4 * w, V=f"<{w // 8} x i64>", OFF=_DATA_OFFSET)
        for w in WIDTHS
    ]
    return (
        "\n".join(parts)
        + "\ndeclare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)\n!0 = !{i32 1}\n"
    )


WIDTHS = (32, 64)  # bytes per store


_IMAGES: list[Any] = []  # the code stays mapped for the life of the process


@functools.cache
def _functions() -> dict[int, tuple[Any, Any]] | None:
    """Per store width, ``(copy(dst, src, n), copy_array(dst, ndarray, n))`` through ctypes
    (each releases the GIL while it copies, as ``numpy.copyto`` does), or None where they
    cannot be made."""
    try:
        import numpy as np

        from kinac.codegen.llvm import compile_object, host_target, jit_load

        names = [f"kinac_stream_copy{w}" for w in WIDTHS]
        exports = (*names, *[f"kinac_stream_copy_array{w}" for w in WIDTHS])
        image = jit_load(compile_object(ir(), host_target()), {}, exports)
    except Exception:  # noqa: BLE001 - no llvmlite / no target: numpy.copyto stays
        return None
    _IMAGES.append(image)
    vp, i64 = ctypes.c_void_p, ctypes.c_int64
    probe = np.arange(7, dtype=np.int64)  # PyArray_DATA where this numpy keeps it?
    if ctypes.c_void_p.from_address(id(probe) + _DATA_OFFSET).value != probe.ctypes.data:
        return None
    out: dict[int, tuple[Any, Any]] = {}
    for w in WIDTHS:
        raw = ctypes.CFUNCTYPE(None, vp, vp, i64)(image.addresses[f"kinac_stream_copy{w}"])
        arr = ctypes.CFUNCTYPE(None, vp, ctypes.py_object, i64)(
            image.addresses[f"kinac_stream_copy_array{w}"]
        )
        got = np.zeros(7, dtype=np.int64)
        arr(got.ctypes.data, probe, probe.nbytes)
        if not np.array_equal(got, probe):
            return None
        out[w] = (raw, arr)
    return out


def available() -> bool:
    """Whether the streaming copy could be made on this machine."""
    return _functions() is not None


def stream_copier(
    dst: Any, counts: Any = None, width: int = 32
) -> Callable[[Any, Any], None] | None:
    """``copy(dst, src)`` for the C-contiguous numpy array ``dst`` (a pinned block, aligned to
    ``width`` bytes): ``src`` (a numpy array of ``dst``'s shape and dtype, checked by the
    caller) copied with streaming stores of ``width`` bytes when C-contiguous (counted in
    ``counts.streamed`` when ``counts`` is given), else by ``numpy.copyto``. None when the
    streaming copy cannot be made here or ``dst`` is not aligned."""
    fns = _functions()
    ptr = dst.ctypes.data
    if fns is None or width not in fns or ptr % width or not dst.flags.c_contiguous:
        return None
    import numpy as np

    arr, n, copyto = fns[width][1], dst.nbytes, np.copyto

    def copy(d: Any, src: Any) -> None:
        if src.flags.c_contiguous:
            arr(ptr, src, n)
            if counts is not None:
                counts.streamed += 1
        else:
            copyto(d, src)

    return copy


def raw_copy(width: int = 32) -> Callable[[int, int, int], None] | None:
    """``copy(dst, src, n)`` over addresses (``dst`` aligned to ``width``), or None."""
    fns = _functions()
    return None if fns is None or width not in fns else fns[width][0]


def copy_bytes(dst: int, src: int, n: int, width: int = 32) -> None:
    """``n`` bytes from address ``src`` to ``dst`` (aligned to ``width``) with streaming
    stores (tests, benches)."""
    raw = raw_copy(width)
    if raw is None:
        ctypes.memmove(dst, src, n)
    else:
        raw(dst, src, n)
