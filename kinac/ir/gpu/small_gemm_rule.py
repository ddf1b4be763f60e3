"""Which products the generated tensor-core GEMM takes instead of cuBLAS: the size rule.

Why: inside a CUDA graph a cuBLAS call of a small product costs 3-4 us (launch, its own
prologue, a grid sized for large products), and nothing around it can be fused into it. A
product whose work is a few hundred thousand tensor-core cycles spread over the GPU is latency
bound either way, so a generated kernel that also absorbs the RMSNorm before it and the
residual or ``silu(gate) * up`` after it removes whole launches. Large products keep cuBLAS,
whose kernels are faster per flop (wgmma, multi-stage pipelines; this kernel stages its whole
``A`` slice once and uses mma.sync).

The rule (docs/gpu.md, "Small products: the generated tensor-core GEMM"), from the H200's
crossover (benches/small_gemm_probe.py): a bf16/f16 product ``[M, K] x [K, N]`` (weights side
by side count their total ``N``) is taken when ``2 M N K <= ALONE_FLOPS`` (2^28, ~0.27 GFLOP:
the kernel alone is 1.03-1.10x of cuBLASLt's time up to there, 1.27x at 0.54 GFLOP, 2-4x past
1 GFLOP), or ``<= SMALL_FLOPS`` (2^29) when it absorbs an RMSNorm (a row kernel of ~2.3 us
saved, and the ``silu * mul`` map with gate/up), ``M`` is a multiple of 32, ``K`` and every
``N`` of 64, and its tiles fit the
shared memory (:func:`kinac.ir.gpu.small_gemm_kernel.check_params`). ``KINAC_SMALL_GEMM=0``
turns the pass off, ``=norm`` or ``=alone`` keeps one kind of rewrite (measuring switches; the
lowering queries depend on them through the input query ``gpu_lowering_switches``). Round 2's kernel
variants have switches of their own, the same kind (``KINAC_SMALL_GEMM_PREFETCH``, ``_EARLY``,
``_FOLD``, ``_M16``: :func:`switch`, the defaults below; docs/gpu.md, "Round 2").
"""

from __future__ import annotations

import os

from kinac.ir.gpu.small_gemm_kernel import BLOCK_N, SmallGemmParams, check_params

SMALL_FLOPS = 2**29  # ~0.54 GFLOP, with a norm prologue (the small block's gate/up: 0.37)
ALONE_FLOPS = 2**28  # ~0.27 GFLOP, a product on its own (its residual at most)
SMS = 132  # H200: a sizing heuristic only
DTYPES = ("bf16", "f16")


# the variants' defaults (docs/gpu.md, "Small products"; each measured against the other in
# benches/small_gemm_probe.py): the norm folded into the products, 16-row blocks for small grids
FOLD = True
M16 = True
EARLY = True  # the residual loaded with the tile copies (bit-identical; KINAC_SMALL_GEMM_EARLY)
PARTS = ("norm", "alone")  # the fusions with a norm prologue; products on their own


def enabled(part: str) -> bool:
    """``KINAC_SMALL_GEMM``: unset or ``1``: every rewrite; ``0``: none; a comma list of
    :data:`PARTS`: those (a measuring switch, see the module doc)."""
    v = os.environ.get("KINAC_SMALL_GEMM", "").strip()
    if v in ("", "1"):
        return True
    return part in {x.strip() for x in v.split(",")}


def switch(name: str, default: bool) -> bool:
    """A measuring switch ``KINAC_SMALL_GEMM_<name>`` (``0`` or ``1``; unset: ``default``)."""
    v = os.environ.get(f"KINAC_SMALL_GEMM_{name}", "").strip()
    return default if v not in ("0", "1") else v == "1"


def block_m(m: int, n_out: int, m16: bool | None = None) -> int:
    """64 rows a block when that still gives half the SMs a block, else 32; with ``m16``
    (default: ``KINAC_SMALL_GEMM_M16``, on), 16 when 32 gives fewer than half the SMs a block
    (the small block's 512 x 256 products: 128 blocks of 4 warps instead of 64 of 8)."""
    if m % 64 == 0 and (m // 64) * (n_out // BLOCK_N) >= SMS // 2:
        return 64
    if m16 is None:
        m16 = switch("M16", M16)
    if m16 and m % 16 == 0 and (m // 32) * (n_out // BLOCK_N) < SMS // 2:
        return 16
    return 32


def choose(
    dtype: str, m: int, k: int, ns: tuple[int, ...], epilogue: str = "", norm: bool = False
) -> SmallGemmParams | None:
    """The kernel's parameters (operands not yet placed) when the rule takes the product."""
    if dtype not in DTYPES or not ns or m <= 0:
        return None
    n_out = ns[0] if epilogue == "swiglu" else sum(ns)
    limit = SMALL_FLOPS if norm else ALONE_FLOPS
    if 2 * m * k * sum(ns) > limit or m % 32 or n_out % BLOCK_N:
        return None
    fold = norm and switch("FOLD", FOLD)
    early = epilogue == "residual" and switch("EARLY", EARLY)

    def fitting(bm: int) -> SmallGemmParams | None:
        for ks in (4, 2, 1):  # the most warps (up to 8) a row block's k is split over
            p = SmallGemmParams(
                dtype, m, k, ns, bm, epilogue, norm, ksplit=ks, fold=fold, early_res=early
            )
            if check_params(p) is None:
                return p
        return None

    # which products are taken is decided with 32/64-row blocks, as measured against cuBLAS;
    # 16-row blocks only change how a taken product is cut (the smaller tiles would otherwise
    # let products past the shared memory in, never measured)
    base = fitting(block_m(m, n_out, m16=False))
    bm = block_m(m, n_out)
    if base is None or bm == base.block_m:
        return base
    return fitting(bm) or base
