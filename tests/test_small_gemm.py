"""``gpu-small-gemm`` on the CPU: the small bf16 block's IR after the pass (golden: 5 kernels,
the norms as prologues, q/k/v from one launch read by the attention kernel as slices, the
residuals and ``silu * mul`` as epilogues), the 45M block untouched, the size rule's
boundaries, odd shapes left to cuBLAS, and each kernel through ``ptxas`` (no spills)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from goldens import compare
from small_gemm_cases import norm_product, norm_swiglu, norm_two_multiplied, residual

from kinac.artifacts.gpu import GpuKernel
from kinac.codegen.ptx import compile_ptx, ptx_resources
from kinac.ir.gpu import small_gemm_rule as rule
from kinac.ir.gpu.pipeline import gpu_module, lower_graph_gpu, print_ir
from kinac.ir.gpu.small_gemm_kernel import SmallGemmParams, kernel_ir, lower_small_gemm, smem_bytes
from kinac.ir.gpu.stitch import kernel_module
from kinac.ir.testing import block_graph
from kinac.rt.cuda.module import waiting_kernels
from kinac.rules.codec import encode
from kinac.tir.graph import Graph

GOLDEN = Path(__file__).parent / "golden" / "lower" / "small_gemm"


def _impls(graph: Graph) -> list[str]:
    return [
        s.impl + (f" {s.launches[0].note}" if s.launches else "")
        for s in lower_graph_gpu(graph).steps
    ]


def test_small_block_ir_after_the_pass_golden() -> None:
    text = print_ir(gpu_module(block_graph(dtype="bf16")))
    compare(GOLDEN / "block_small_bf16.mlir", text)
    assert text.count('"kina.kernel"') == 5 and 'impl = "blas"}>' not in text


def test_switch_off_and_f32_and_large_products_keep_cublas(monkeypatch: pytest.MonkeyPatch) -> None:
    assert 'impl = "tc"' not in print_ir(gpu_module(block_graph(dtype="f32")))
    big = gpu_module(block_graph(4, 1024, 2048, 16, 4, 5632, "bf16"), verify=False)
    assert 'impl = "tc"' not in print_ir(big)
    monkeypatch.setenv("KINAC_SMALL_GEMM_PREFETCH", "0")  # the kernels, without prefetches
    text = print_ir(gpu_module(block_graph(dtype="bf16")))
    assert text.count('impl = "tc", sym') == 4 and "prefetch\\22:[]" in text
    assert "prefetch\\22:[\\22" not in text
    monkeypatch.setenv("KINAC_SMALL_GEMM", "0")
    assert 'impl = "tc"' not in print_ir(gpu_module(block_graph(dtype="bf16")))


def test_size_rule_boundaries() -> None:
    # the largest products taken: 2 M N K == ALONE_FLOPS alone, SMALL_FLOPS with a norm
    assert rule.choose("bf16", 512, 512, (512,)) is not None  # 2^28 flops
    assert rule.choose("bf16", 544, 512, (512,)) is None
    assert rule.choose("bf16", 1024, 512, (512,), norm=True) is not None  # 2^29
    assert rule.choose("bf16", 1024, 512, (256, 256), norm=True) is not None
    assert rule.choose("bf16", 1056, 512, (512,), norm=True) is None
    assert rule.choose("f16", 64, 64, (64,)) is not None
    assert rule.choose("f32", 64, 64, (64,)) is None  # f32/f64: cuBLAS
    assert rule.choose("bf16", 80, 64, (64,)) is None  # M not a multiple of 32
    assert rule.choose("bf16", 64, 96, (64,)) is None  # K not a multiple of 64
    assert rule.choose("bf16", 64, 64, (64, 96)) is None  # an N not a multiple of 64
    assert rule.choose("bf16", 64, 1024, (64,)) is not None  # 192 KiB of tiles
    assert rule.choose("bf16", 128, 1280, (64,)) is None  # past the shared memory (in 32 rows,
    # although 16-row blocks would fit: which products are taken does not depend on M16)
    assert rule.block_m(512, 256, m16=False) == 32 and rule.block_m(512, 704) == 64
    assert rule.block_m(512, 256) == 16  # the default: 16-row blocks where 32 fill few SMs


def test_variant_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    """KINAC_SMALL_GEMM_FOLD / _M16: the folded norm and 16-row blocks for small grids, only
    where asked (and the defaults the rule names)."""
    for name, default in (("FOLD", rule.FOLD), ("M16", rule.M16), ("EARLY", rule.EARLY)):
        monkeypatch.delenv(f"KINAC_SMALL_GEMM_{name}", raising=False)
        assert rule.switch(name, default) is default
    monkeypatch.setenv("KINAC_SMALL_GEMM_M16", "1")
    assert rule.block_m(512, 256) == 16 and rule.block_m(512, 512) == 32  # 64 -> 128 blocks
    assert rule.block_m(512, 704) == 64
    monkeypatch.setenv("KINAC_SMALL_GEMM_FOLD", "1")
    notes = [s.launches[0].note for s in lower_graph_gpu(block_graph(dtype="bf16")).steps]
    assert [n.split(" grid")[0] for n in notes if n.startswith("tc")] == [
        "tc 32x64 rms fold k/4", "tc 16x64 residual k/4",
        "tc 64x64 rms fold swiglu k/2", "tc 16x64 residual k/4",
    ]  # fmt: skip
    monkeypatch.setenv("KINAC_SMALL_GEMM_FOLD", "0")
    monkeypatch.setenv("KINAC_SMALL_GEMM_M16", "0")
    assert rule.block_m(512, 256) == 32
    p = rule.choose("bf16", 512, 256, (256,), "", True)
    assert p is not None and not p.fold
    early = rule.choose("bf16", 512, 256, (256,), "residual")
    assert early is not None and early.early_res is rule.EARLY
    monkeypatch.setenv("KINAC_SMALL_GEMM_EARLY", "0")
    assert not rule.choose("bf16", 512, 256, (256,), "residual").early_res  # type: ignore[union-attr]
    placed = replace(early, args=(0, 1, 2), n_inputs=3)
    _, body = kernel_ir(replace(placed, early_res=True), "k")
    _, late = kernel_ir(replace(placed, early_res=False), "k")
    # the residual's 16 loads a lane: before the products' loop (early) or after it
    for text, before in ((body, 16), (late, 0)):
        head = text.split("mm:", 1)[0]
        assert head.count("load <2 x bfloat>, ptr addrspace(1)") == before


@pytest.mark.parametrize(("graph", "tc"), [
    (residual(512, 256, 256), "tc 16x64 residual"), (residual(100, 200, 72), None),
    (norm_product(2, 48, 128, 64), "tc 16x64 rms fold"), (norm_product(3, 50, 256, 64), None),
    (norm_swiglu(64, 128, 192), "tc 16x64 rms fold swiglu"),
])  # fmt: skip
def test_which_kernels(graph: Graph, tc: str | None) -> None:
    got = _impls(graph)
    if tc is None:
        assert not any("tc " in x for x in got) and any(x.startswith("cublas") for x in got), got
    else:
        assert len(got) == 1 and got[0].startswith(f"kernel {tc} "), got


def test_small_block_kernels_through_ptxas() -> None:
    """The norm + q/k/v and the residual kernels (all four: docs/gpu.md's table; each ~1 s)."""
    lw = lower_graph_gpu(block_graph(dtype="bf16"))
    codes = [lower_small_gemm(k) for k in lw.kernels if k.source == "small_gemm"]
    assert len(codes) == 4
    codes = [c for c in codes if "swiglu" not in c.launches[0].note]
    codes = [c for c in codes if c.launches[0].shared < 100_000]  # not the K = 704 one
    ptx = compile_ptx(kernel_module(codes), "sm_90")
    # the entry's own operands prefetched into L2 before the wait (weights, x, the norm
    # weight), and every kernel still launched with PDL (waiting_kernels accepts them)
    assert waiting_kernels(ptx) == {c.symbol for c in codes}
    for c in codes:
        body = ptx.split(f".entry {c.symbol}(", 1)[1].split("griddepcontrol.wait", 1)[0]
        assert "prefetch.global.L2::evict_last" in body, c.launches[0].note
    res = ptx_resources(ptx, "sm_90")
    for name in (c.symbol for c in codes):
        r = res.get(name, {})
        if res:  # ptxas installed
            assert r["spill_stores"] == 0 and r["stack"] == 0 and r["registers"] <= 128, (name, r)


def test_round_two_variants_through_ptxas() -> None:
    """The folded norm (bf16 q/k/v-like and f16 swiglu) and a 16-row residual kernel with the
    early residual and every prefetch: ptxas takes them, no spills, sane registers."""
    qkv = SmallGemmParams("bf16", 512, 256, (256, 128, 128), 32, "", True, 1e-6,
                          (0, 1, 2, 3, 4), 5, 4, ("a", "w", "wn"), fold=True)  # fmt: skip
    sw = SmallGemmParams("f16", 512, 256, (704, 704), 64, "swiglu", True, 1e-6, (0, 1, 2, 3), 4,
                         2, ("w", "wn"), fold=True)  # fmt: skip
    res = SmallGemmParams("bf16", 512, 256, (256,), 16, "residual", False, 0.0, (0, 1, 2), 3,
                          4, ("a", "w", "res"), early_res=True)  # fmt: skip
    codes = [
        lower_small_gemm(GpuKernel(f"k{i}", encode(p).decode(), 0, "small_gemm"))
        for i, p in enumerate((qkv, sw, res))
    ]
    ir = kernel_module(codes)
    ptx = compile_ptx(ir, "sm_90")
    res_ = ptx_resources(ptx, "sm_90")
    assert len(waiting_kernels(ptx)) == 3  # the prefetches keep PDL
    for r in res_.values():
        assert r["spill_stores"] == 0 and r["stack"] == 0 and r["registers"] <= 128, r


def test_kernel_parameters_shared_memory() -> None:
    p = SmallGemmParams("bf16", 512, 256, (704, 704), 64, "swiglu", True, 1e-6, (0, 1, 2, 3), 4)
    assert smem_bytes(p) == 2 * 256 * (64 + 128 + 1)  # A, gate and up tiles, the norm weight
    decls, body = kernel_ir(p, "k")
    assert "griddepcontrol.wait" in "".join(decls) and "@k_smem" in body


def test_products_side_by_side_read_as_slices_by_a_map() -> None:
    text = print_ir(gpu_module(norm_two_multiplied(64, 128, 64)))
    assert text.count('"kina.kernel"') == 2 and "kina.concat" in text
    assert text.count("kina.slice") == 2 and 'kind = "map"' in text
