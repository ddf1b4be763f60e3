"""cuBLAS and cuBLASLt calls for the GPU entries, through nvmath-python's bindings.

The only module of kinac that imports ``nvmath`` (inside functions: importing this module is
free and works without a GPU). A :class:`~kinac.artifacts.gpu.GpuGemm` is row-major; cuBLAS
is column-major, so ``C = A B`` is issued as ``C^T = B^T A^T`` (:func:`colmajor`, a pure
function the CPU tests check against numpy). Binding a call to buffer addresses
(:meth:`Blas.bind`) returns a closure that issues it on a stream, so an entry's sequence of
kernels and library calls can be captured into one CUDA graph.

- ``single``/``strided``: ``cublasGemmEx`` / ``cublasGemmStridedBatchedEx``;
- ``pointers``: ``cublasGemmBatchedEx`` with device arrays of per-batch pointers (each batch
  in its own buffer where the operand names several: projections sharing an input grouped
  into one call, :mod:`kinac.ir.gpu.gemm_group`), unless the addresses bound to it form one
  stride per operand (:mod:`~kinac.rt.cuda.blas_strides`: the gate and up weights wherever the caller
  allocated them, the outputs adjacent in the arena): then one strided-batched call. Why
  (issue 14): the strided form is what cuBLASLt's algorithms take, so the GEMM tuner can
  choose one (the 45M block's gate/up: 243 us against the pointer arrays' 247 on the H200;
  alone, classic cuBLAS's strided and pointer-array kernels are level), and cuBLAS's
  pointer-array kernel (``..._ptrBatch_...``) was the one that asked for workspace;
- epilogues (``bias``: a vector over the last dim; ``residual``: ``D = A B + R``): cuBLASLt
  (``CUBLASLT_EPILOGUE_BIAS``; ``beta = 1`` with ``C = R``); if cuBLASLt finds no algorithm,
  classic cuBLAS does the same arithmetic (``R`` copied into ``D`` then ``beta = 1``; the bias
  broadcast by a rank-1 product ``ones x bias`` first);
- an autotuned ``GpuGemm.algo`` (:mod:`kinac.artifacts.gemm_algo`, chosen by
  :mod:`kinac.pipeline_gemm_tune`, timed by :mod:`kinac.rt.cuda.blas_tune`): a stored
  cuBLASLt algorithm (re-checked by ``cublasLtMatmulAlgoCheck`` here; refused: today's
  binding), or a grouped call split into one call per member; a grouped call chosen as one
  strided cuBLASLt call, bound where the caller's tensors lie at no common stride, takes the
  choice's stored alternative (``GemmAlgo.alt``: split, at any addresses) instead.

f32 products use ``CUBLAS_COMPUTE_32F`` (no TF32) unless ``allow_tf32``; bf16 and f16 products
read and write their dtype and accumulate in f32; f64 uses ``CUBLAS_COMPUTE_64F``.

Every classic call sets the handle's stream and then its workspace again (:meth:`Blas._on`):
``cublasSetStream`` resets the workspace to cuBLAS's default pool, which under graph capture
(CUDA 12.2+) allocates with ``cudaMallocAsync``, i.e. graph memory nodes in the entry.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from kinac.artifacts.gemm_algo import ALGO_BYTES, GemmAlgo
from kinac.artifacts.gpu import GemmOperand, GpuGemm
from kinac.dtypes import ITEMSIZE
from kinac.rt.cuda.blas_strides import bound_addresses, strided_form

CUDA_R = {"f32": 0, "f64": 1, "f16": 2, "bf16": 14}  # cudaDataType_t
COMPUTE_32F, COMPUTE_32F_FAST_TF32, COMPUTE_64F = 68, 77, 70  # cublasComputeType_t
OP_N, OP_T = 0, 1
GEMM_DEFAULT = -1
WORKSPACE = 32 << 20
HEURISTIC_BYTES = 96  # sizeof(cublasLtMatmulHeuristicResult_t): algo, workspace, state, waves
Call = Callable[[int], None]  # stream handle -> None


@dataclass(frozen=True)
class ColMajor:
    """The column-major call computing a row-major :class:`GpuGemm`: ``C_c = op(A_c) op(B_c)``
    with ``A_c`` our ``B`` and ``B_c`` our ``A`` (``m``, ``n`` swapped)."""

    transa: bool
    transb: bool
    m: int
    n: int
    k: int
    a_buf: str
    a_offs: tuple[int, ...]
    lda: int
    b_buf: str
    b_offs: tuple[int, ...]
    ldb: int
    c_buf: str
    c_offs: tuple[int, ...]
    ldc: int
    # per-batch buffers (``pointers`` calls grouping products over separate buffers; empty:
    # every batch in the ``*_buf`` above)
    a_bufs: tuple[str, ...] = ()
    b_bufs: tuple[str, ...] = ()
    c_bufs: tuple[str, ...] = ()

    def batch_bufs(self, which: str, batch: int) -> tuple[str, ...]:
        """The buffer of each batch of operand ``which`` (``a``, ``b`` or ``c``)."""
        own: tuple[str, ...] = getattr(self, f"{which}_bufs")
        return own or (getattr(self, f"{which}_buf"),) * batch


def colmajor(g: GpuGemm) -> ColMajor:
    return ColMajor(
        g.b.trans, g.a.trans, g.n, g.m, g.k,
        g.b.buf, g.b.offsets, g.b.ld, g.a.buf, g.a.offsets, g.a.ld,
        g.c.buf, g.c.offsets, g.c.ld, g.b.bufs, g.a.bufs, g.c.bufs,
    )  # fmt: skip


def stride(offs: tuple[int, ...]) -> int:
    return offs[1] - offs[0] if len(offs) > 1 else 0


def compute_type(dtype: str, allow_tf32: bool) -> int:
    if dtype == "f64":
        return COMPUTE_64F
    return COMPUTE_32F_FAST_TF32 if dtype == "f32" and allow_tf32 else COMPUTE_32F


class Blas:
    """A cuBLAS handle, a cuBLASLt handle and one workspace, for one device."""

    def __init__(self, alloc: Callable[[int], int], *, allow_tf32: bool = False) -> None:
        from nvmath.bindings import cublas, cublasLt

        self.cublas, self.lt_mod = cublas, cublasLt
        self.allow_tf32 = allow_tf32
        self.alloc = alloc
        self.handle = cublas.create()
        self.lt = cublasLt.create()
        self.ws = alloc(WORKSPACE)
        cublas.set_workspace(self.handle, self.ws, WORKSPACE)
        mode = cublas.Math.TF32_TENSOR_OP_MATH if allow_tf32 else cublas.Math.DEFAULT_MATH
        cublas.set_math_mode(self.handle, int(mode))
        self._keep: list[Any] = []
        self.fallbacks: list[str] = []
        # how each ``pointers`` call was issued once bound ("strided", "pointers", or
        # "strided (cuBLASLt)" for a tuned algorithm): what the benchmark and the tests read
        self.bound_forms: list[str] = []

    def close(self) -> None:
        """Release the handles (the workspace is the allocator's to free): the tuner's."""
        self.cublas.destroy(self.handle)
        self.lt_mod.destroy(self.lt)

    def _scalars(self, dtype: str, beta: float) -> tuple[int, int]:
        ct = ctypes.c_double if dtype == "f64" else ctypes.c_float
        a, b = ct(1.0), ct(beta)
        self._keep += [a, b]
        return ctypes.addressof(a), ctypes.addressof(b)

    # ---- binding --------------------------------------------------------------------------
    def bind(self, g: GpuGemm, ptr: Callable[[str], int], upload: Callable[[bytes], int]) -> Call:
        """A closure issuing ``g`` on a stream, with buffers resolved by ``ptr(name)``;
        ``upload`` copies host bytes to new device memory (pointer arrays, ones vectors).
        An autotuned ``g.algo`` is used when cuBLASLt still accepts it here (else today's)."""
        algo = g.algo
        if algo is not None and algo.alt is not None and algo.how == "lt" and g.mode == "pointers":
            sz, osz = ITEMSIZE[g.dtype], ITEMSIZE[g.out_dtype]
            if strided_form(bound_addresses(colmajor(g), g.batch, ptr, (sz, sz, osz)), (sz, sz, osz)) is None:  # fmt: skip
                # the caller's tensors lie at no common stride: the choice's alternative
                self.bound_forms.append(f"{algo.alt.label} (for {algo.label}: no common stride)")
                algo = algo.alt
        if algo is not None and algo.how != "today":
            try:
                return self.bind_algo(g, algo, ptr, upload)
            except Exception as e:  # noqa: BLE001 - a stale or refused choice: today's binding
                self.fallbacks.append(f"{algo.label}: {e}")
        return self.bind_today(g, ptr, upload)

    def bind_today(self, g: GpuGemm, ptr: Callable[[str], int], upload: Callable[[bytes], int]) -> Call:  # fmt: skip
        """The binding without a tuned choice: classic cuBLAS, cuBLASLt's first heuristic
        algorithm for an epilogue."""
        if g.epilogue:
            try:
                return self._bind_lt(g, ptr)
            except Exception as e:  # noqa: BLE001 - any cuBLASLt refusal: use classic cuBLAS
                self.fallbacks.append(f"{g.epilogue}: {e}")
            return self._bind_fallback(g, ptr, upload)
        return self._bind_classic(g, ptr, upload, beta=0.0)

    def bind_algo(self, g: GpuGemm, algo: GemmAlgo, ptr: Callable[[str], int], upload: Callable[[bytes], int]) -> Call:  # fmt: skip
        """``g`` issued as ``algo`` says; raises where cuBLASLt refuses the stored algorithm."""
        if algo.how == "lt":
            return self._bind_lt(g, ptr, algo.algo)
        if algo.how not in ("split", "split-lt") or g.mode != "pointers" or g.epilogue:
            raise ValueError(f"GEMM algorithm {algo.label} does not apply to a {g.mode} call")
        calls = [
            self._bind_lt(m, ptr, algo.algo)
            if algo.how == "split-lt"
            else self._bind_classic(m, ptr, upload, beta=0.0)
            for m in members(g)
        ]

        def split(stream: int) -> None:
            for c in calls:
                c(stream)

        return split

    def _bind_classic(self, g: GpuGemm, ptr: Callable[[str], int], upload: Callable[[bytes], int], beta: float) -> Call:  # fmt: skip
        cb, cm = self.cublas, colmajor(g)
        at, ot = CUDA_R[g.dtype], CUDA_R[g.out_dtype]
        ct = compute_type(g.dtype, self.allow_tf32)
        sz, osz = ITEMSIZE[g.dtype], ITEMSIZE[g.out_dtype]
        alpha, beta_p = self._scalars(g.dtype, beta)
        ta, tb = OP_T if cm.transa else OP_N, OP_T if cm.transb else OP_N
        a0, b0, c0 = ptr(cm.a_buf), ptr(cm.b_buf), ptr(cm.c_buf)
        h, on = self.handle, self._on
        if g.mode == "pointers":  # pointer arrays uploaded once, here (a graph replays them)
            addrs = bound_addresses(cm, g.batch, ptr, (sz, sz, osz))
            form = strided_form(addrs, (sz, sz, osz))
            if form is not None:  # one stride per operand at these addresses: strided
                self.bound_forms.append("strided")
                (pa, pb, pc), (sa, sb, sc) = form
            else:
                self.bound_forms.append("pointers")
                pa, pb, pc = (upload(bytes((ctypes.c_uint64 * g.batch)(*ps))) for ps in addrs)

                def batched(stream: int) -> None:
                    on(stream)
                    cb.gemm_batched_ex(h, ta, tb, cm.m, cm.n, cm.k, alpha, pa, at, cm.lda, pb, at,
                                       cm.ldb, beta_p, pc, ot, cm.ldc, g.batch, ct, GEMM_DEFAULT)  # fmt: skip

                return batched
        else:
            pa, pb, pc = a0 + cm.a_offs[0] * sz, b0 + cm.b_offs[0] * sz, c0 + cm.c_offs[0] * osz
            sa, sb, sc = stride(cm.a_offs), stride(cm.b_offs), stride(cm.c_offs)
        if g.mode == "single":

            def single(stream: int) -> None:
                on(stream)
                cb.gemm_ex(h, ta, tb, cm.m, cm.n, cm.k, alpha, pa, at, cm.lda, pb, at, cm.ldb,
                           beta_p, pc, ot, cm.ldc, ct, GEMM_DEFAULT)  # fmt: skip

            return single

        def strided(stream: int) -> None:
            on(stream)
            cb.gemm_strided_batched_ex(h, ta, tb, cm.m, cm.n, cm.k, alpha, pa, at, cm.lda, sa,
                                       pb, at, cm.ldb, sb, beta_p, pc, ot, cm.ldc, sc, g.batch,
                                       ct, GEMM_DEFAULT)  # fmt: skip

        return strided

    def _on(self, stream: int) -> None:
        """The handle on ``stream``, with the entry's workspace (``cublasSetStream`` resets the
        workspace to cuBLAS's default pool, whose graph-captured allocations are memory nodes)."""
        self.cublas.set_stream(self.handle, stream)
        self.cublas.set_workspace(self.handle, self.ws, WORKSPACE)

    def _bind_fallback(self, g: GpuGemm, ptr: Callable[[str], int], upload: Callable[[bytes], int]) -> Call:  # fmt: skip
        from kinac.rt.cuda import driver

        d = driver.api()
        out = ptr(g.c.buf) + g.c.offsets[0] * ITEMSIZE[g.out_dtype]
        epi = ptr(g.epi)
        nbytes = g.m * g.n * g.batch * ITEMSIZE[g.out_dtype]
        main = self._bind_classic(g, ptr, upload, beta=1.0)
        if g.epilogue == "residual":

            def residual(stream: int) -> None:
                driver.check("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync(out, epi, nbytes, stream))
                main(stream)

            return residual
        one = {"f32": b"\x00\x00\x80\x3f", "bf16": b"\x80\x3f", "f16": b"\x00\x3c"}[g.out_dtype]
        ones = upload(one * g.m)
        rank1 = GpuGemm(
            g.out_dtype, g.out_dtype, g.m, g.n, 1, 1,
            GemmOperand("ones", (0,), 1), GemmOperand(g.epi, (0,), g.n), g.c, "single",
        )  # fmt: skip
        bcast = self._bind_classic(rank1, lambda n: ones if n == "ones" else ptr(n), upload, 0.0)

        def bias(stream: int) -> None:
            bcast(stream)
            main(stream)

        return bias

    def _bind_lt(self, g: GpuGemm, ptr: Callable[[str], int], algo: bytes | None = None) -> Call:
        """One ``cublasLtMatmul``: with ``algo`` (checked by ``cublasLtMatmulAlgoCheck``
        first), else with the heuristic's first answer."""
        lt, s = self.lt_mod, self.lt_setup(g, ptr)
        stored = algo is not None
        if algo is None:
            found = self.heuristic(s, 1)
            if not found:
                raise RuntimeError("cuBLASLt found no algorithm")
            algo = found[0]
        elif len(algo) != ALGO_BYTES:
            raise ValueError(f"a stored cuBLASLt algorithm has {len(algo)} bytes")
        else:
            for p, off in zip(s.ptrs, s.offsets_bytes, strict=True):
                if _align(p) < _align(off):  # tuned on 256-byte aligned buffers
                    raise ValueError("operand less aligned than where the algorithm was timed")
        buf = ctypes.create_string_buffer(algo, ALGO_BYTES)
        if stored:  # a stored choice: does this cuBLASLt accept it here?
            res = lt.MatmulHeuristicResult(1)
            lt.matmul_algo_check(self.lt, s.desc, s.la, s.lb, s.lc, s.lc,
                                 ctypes.addressof(buf), res.ptr)  # fmt: skip
            if int(res.workspace_size) > WORKSPACE:
                raise RuntimeError("the stored algorithm needs more workspace")
        alpha, beta_p = self._scalars(g.dtype, s.beta)
        self._keep += [s, buf]
        h, ws, ap = self.lt, self.ws, ctypes.addressof(buf)
        desc, la, lb, lc = s.desc, s.la, s.lb, s.lc
        pa, pb, pc, pd = s.ptrs

        def call(stream: int) -> None:
            lt.matmul(h, desc, alpha, pa, la, pb, lb, beta_p, pc, lc, pd, lc, ap, ws, WORKSPACE, stream)  # fmt: skip

        if g.mode == "pointers":  # a grouped call lt_setup found one stride for, once bound
            self.bound_forms.append("strided (cuBLASLt)")
        return call

    def lt_setup(self, g: GpuGemm, ptr: Callable[[str], int]) -> LtSetup:
        """cuBLASLt's descriptors for ``g`` (one matrix, or a batch in strided layouts where
        each operand's batches lie in one buffer at one stride) and its pointers."""
        lt, cm = self.lt_mod, colmajor(g)
        batched = g.batch > 1
        sz, osz = ITEMSIZE[g.dtype], ITEMSIZE[g.out_dtype]
        strides = tuple(stride(o) for o in (cm.a_offs, cm.b_offs, cm.c_offs))
        firsts: tuple[int, ...] | None = None
        uniform = not batched or all(_uniform(cm, w, g.batch) for w in "abc")
        if not uniform and not g.epilogue:  # a pointer-array batch: one stride once bound?
            form = strided_form(bound_addresses(cm, g.batch, ptr, (sz, sz, osz)), (sz, sz, osz))
            if form is not None:
                firsts, strides = form
        if batched and (g.epilogue or (not uniform and firsts is None)):
            raise ValueError("cuBLASLt batches here only strided products without an epilogue")
        ct = compute_type(g.dtype, self.allow_tf32)
        scale = CUDA_R["f64"] if g.dtype == "f64" else CUDA_R["f32"]
        desc = lt.matmul_desc_create(ct, scale)
        keep: list[Any] = []

        def attr(setter: Callable[..., Any], obj: int, which: Any, value: Any) -> None:
            keep.append(value)
            setter(obj, int(which), ctypes.addressof(value), ctypes.sizeof(value))

        mda, mla = lt.MatmulDescAttribute, lt.MatrixLayoutAttribute
        attr(lt.matmul_desc_set_attribute, desc, mda.TRANSA, ctypes.c_int32(OP_T if cm.transa else OP_N))  # fmt: skip
        attr(lt.matmul_desc_set_attribute, desc, mda.TRANSB, ctypes.c_int32(OP_T if cm.transb else OP_N))  # fmt: skip
        beta = 0.0
        if g.epilogue == "bias":
            attr(lt.matmul_desc_set_attribute, desc, mda.EPILOGUE, ctypes.c_uint32(int(lt.Epilogue.BIAS)))  # fmt: skip
            attr(lt.matmul_desc_set_attribute, desc, mda.BIAS_POINTER, ctypes.c_uint64(ptr(g.epi)))  # fmt: skip
        elif g.epilogue == "residual":
            beta = 1.0
        at, ot = CUDA_R[g.dtype], CUDA_R[g.out_dtype]
        la = lt.matrix_layout_create(at, *((cm.k, cm.m) if cm.transa else (cm.m, cm.k)), cm.lda)
        lb = lt.matrix_layout_create(at, *((cm.n, cm.k) if cm.transb else (cm.k, cm.n)), cm.ldb)
        lc = lt.matrix_layout_create(ot, cm.m, cm.n, cm.ldc)
        if batched:
            for lay, st in zip((la, lb, lc), strides, strict=True):
                attr(lt.matrix_layout_set_attribute, lay, mla.BATCH_COUNT, ctypes.c_int32(g.batch))  # fmt: skip
                attr(lt.matrix_layout_set_attribute, lay, mla.STRIDED_BATCH_OFFSET, ctypes.c_int64(st))  # fmt: skip
        pref = lt.matmul_preference_create()
        mpa = lt.MatmulPreferenceAttribute
        attr(lt.matmul_preference_set_attribute, pref, mpa.MAX_WORKSPACE_BYTES, ctypes.c_uint64(WORKSPACE))  # fmt: skip
        if firsts is not None:
            pa, pb, pd = firsts
        else:
            pa = ptr(cm.batch_bufs("a", 1)[0]) + cm.a_offs[0] * sz
            pb = ptr(cm.batch_bufs("b", 1)[0]) + cm.b_offs[0] * sz
            pd = ptr(cm.batch_bufs("c", 1)[0]) + cm.c_offs[0] * osz
        pc = ptr(g.epi) if g.epilogue == "residual" else pd
        # every batch's address is as aligned as the first one and the stride (bytes) allow
        steps = (strides[0] * sz, strides[1] * sz, 0 if g.epilogue == "residual" else strides[2] * osz, strides[2] * osz) if batched else (0,) * 4  # fmt: skip
        for which, p, step in zip("ABCD", (pa, pb, pc, pd), steps, strict=True):
            attr(lt.matmul_preference_set_attribute, pref,
                 getattr(mpa, f"MIN_ALIGNMENT_{which}_BYTES"), ctypes.c_uint32(min(_align(p), _align(step))))  # fmt: skip
        offs = (cm.a_offs[0] * sz, cm.b_offs[0] * sz, 0 if g.epilogue == "residual" else cm.c_offs[0] * osz, cm.c_offs[0] * osz)  # fmt: skip
        return LtSetup(desc, la, lb, lc, pref, (pa, pb, pc, pd), offs, beta, keep)

    def heuristic(self, s: LtSetup, n: int) -> list[bytes]:
        """The first ``n`` algorithms cuBLASLt's heuristic proposes for ``s`` (those it
        reports usable within the workspace), as stored bytes."""
        lt = self.lt_mod
        heur = lt.MatmulHeuristicResult(n)
        count = ctypes.c_int32(0)
        lt.matmul_algo_get_heuristic(self.lt, s.desc, s.la, s.lb, s.lc, s.lc, s.pref, n,
                                     heur.ptr, ctypes.addressof(count))  # fmt: skip
        out = []
        for i in range(count.value):
            raw = ctypes.string_at(heur.ptr + i * HEURISTIC_BYTES, HEURISTIC_BYTES)
            ws, state = struct.unpack_from("<Qi", raw, ALGO_BYTES)
            if state == 0 and ws <= WORKSPACE:
                out.append(raw[:ALGO_BYTES])
        self._keep.append(heur)
        return out


@dataclass
class LtSetup:
    """A cuBLASLt call's descriptors, pointers (A, B, C, D as cuBLASLt names them, column-
    major), their byte offsets into their buffers, ``beta``, and what must outlive them."""

    desc: int
    la: int
    lb: int
    lc: int
    pref: int
    ptrs: tuple[int, int, int, int]
    offsets_bytes: tuple[int, int, int, int]
    beta: float
    keep: list[Any]


def _align(p: int) -> int:
    """The largest power of two (at most 256) dividing address or offset ``p``."""
    return min(256, p & -p) if p else 256


def _uniform(cm: ColMajor, which: str, batch: int) -> bool:
    """Every batch of operand ``which`` in one buffer, at one stride (a strided layout)."""
    offs: tuple[int, ...] = getattr(cm, f"{which}_offs")
    if len(set(cm.batch_bufs(which, batch))) != 1 or len(offs) != batch:
        return False
    d = stride(offs)
    return all(offs[i + 1] - offs[i] == d for i in range(len(offs) - 1))


def members(g: GpuGemm) -> list[GpuGemm]:
    """Each batch of a ``pointers`` call as its own single product (same buffers)."""

    def one(o: GemmOperand, i: int) -> GemmOperand:
        return GemmOperand(o.bufs[i] if o.bufs else o.buf, (o.offsets[i],), o.ld, o.trans)

    return [
        replace(g, batch=1, mode="single", a=one(g.a, i), b=one(g.b, i), c=one(g.c, i), algo=None)
        for i in range(g.batch)
    ]
