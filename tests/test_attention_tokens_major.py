"""The fused attention kernel writing tokens-major (issue 14): ``o_strides`` of a
``[B, S, H, Dh]`` buffer, as ``gpu-fuse-attention`` plans when the output projection reads
``[B, S, H*Dh]`` (the transpose map that followed the kernel is gone). Every mma path the
autotuner can pick (``sync``, ``wgmma_qk``, ``wgmma``, ``wgmma_pipe``, the mbarrier ring and
the warp-specialised producer) is run on the CPU emulation against float64 in both layouts;
the pass keeps the map when the kernel has other users of its heads-major output."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from attention_ptx_support import assembled, entries
from test_attention_emu import reference, run_kernel

from kinac.codegen.ptx import ptxas_path
from kinac.ir.gpu.attention_kernel import kernel_name
from kinac.ir.gpu.attention_params import AttnTiles, bhsd_params, check_params
from kinac.ir.gpu.attention_tune import candidates, label
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import block_graph
from kinac.tir.interp import bf16_to_f32, f32_to_bf16

VARIANTS = [
    ("sync", 2, {}, AttnTiles(64, 64)),
    ("wgmma_qk", 2, {}, AttnTiles(64, 64)),
    ("wgmma", 2, {"pack_p": True}, AttnTiles(64, 64)),
    ("wgmma_pipe", 3, {}, AttnTiles(64, 64)),
    ("wgmma", 3, {"mbar": True}, AttnTiles(64, 64)),
    ("wgmma", 3, {"mbar": True, "ws": True}, AttnTiles(128, 64)),
]


@pytest.mark.parametrize("mma,stages,switches,tiles", VARIANTS)
def test_output_layouts_on_cpu(
    mma: str, stages: int, switches: dict[str, bool], tiles: AttnTiles
) -> None:
    """Tokens-major, two heads, one key tile, and two batches with packed P (each stride of
    the output used; the layout is the shared epilogue's; heads-major: test_attention_emu)."""
    b, h, kv, s, d = 2 if switches.get("pack_p") else 1, 2, 1, 40, 64
    p = replace(bhsd_params("bf16", b, h, kv, s, d, True, tiles), mma=mma, stages=stages,
                **switches)  # type: ignore[arg-type]  # fmt: skip
    p = replace(p, o_strides=(s * h * d, d, h * d))
    assert check_params(p) is None
    rng = np.random.default_rng(11)
    q = f32_to_bf16(rng.standard_normal((b, h, s, d)).astype(np.float32))
    k = f32_to_bf16(rng.standard_normal((b, kv, s, d)).astype(np.float32))
    v = f32_to_bf16(rng.standard_normal((b, kv, s, d)).astype(np.float32))
    f64 = lambda x: bf16_to_f32(x).astype(np.float64)  # noqa: E731
    raw = f64(run_kernel(p, q, k, v))  # the output buffer, [B*H*S*D] elements
    out = raw.reshape(b, s, h, d).transpose(0, 2, 1, 3)
    ref = reference(f64(q), f64(k), f64(v), True)
    assert np.isfinite(out).all()  # every element written once (NaN where nothing was)
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-2


def test_block_plans_tokens_major_output() -> None:
    """The block's attention step yields ``[B, S, H*Dh]`` and no map step follows it."""
    lw = lower_graph_gpu(block_graph(2, 64, 256, 4, 2, 128, "bf16"))
    kinds = [s.kind for s in lw.steps]
    i = kinds.index("attention")
    assert lw.steps[i].shape == (2, 64, 256)
    assert kinds[i + 1] == "matmul" and "map" not in kinds[: i + 1]


def test_every_candidate_takes_tokens_major_strides_without_spills() -> None:
    """The autotuner's Hopper candidates keep the planned ``o_strides`` (they replace only
    tuned fields) and each assembles for sm_90a with no stack and no spill (the compilation
    ``test_attention_kernel``'s head-dim-64 case shares: ``attention_ptx_support``)."""
    b, h, kv, s, d = 2, 8, 2, 1000, 64
    p = replace(bhsd_params("bf16", b, h, kv, s, d), o_strides=(s * h * d, d, h * d))
    cands = candidates(p, "sm_90a")
    assert len(cands) >= 5 and all(c.o_strides == p.o_strides for c in cands)
    ptxs, res = assembled(cands)
    assert entries(ptxs, cands)
    if ptxas_path() is None:
        return
    for c in cands:
        r = res[kernel_name(c)]
        assert r["spill_stores"] == 0 and r["spill_loads"] == 0 and r["stack"] == 0, (label(c), r)


def _attention_pair(extra_heads_major_use: bool) -> list[tuple[str, tuple[int, ...]]]:
    """Attention whose heads-major output is viewed tokens-major for ``wo``, and (with
    ``extra_heads_major_use``) also scaled heads-major into a second output."""
    from kinac.ir.testing import GraphBuilder, causal_mask

    g = GraphBuilder("att")
    b, s, h, dh = 1, 40, 2, 64
    d = h * dh
    x = g.param("x", "bf16", (b, s, d))
    ws = [g.param(n, "bf16", (d, d)) for n in ("wq", "wk", "wv", "wo")]

    def heads(w: int) -> int:
        return g.transpose(g.reshape(g.matmul(x, w), (b, s, h, dh)), (0, 2, 1, 3))

    q, k, v = heads(ws[0]), heads(ws[1]), heads(ws[2])
    scale = g.unary("rsqrt", g.const(float(dh), "bf16"))
    sc = g.binary("add", g.binary("mul", g.matmul(q, g.transpose(k, (0, 1, 3, 2))), scale),
                  causal_mask(g, s, "bf16"))  # fmt: skip
    o = g.matmul(g.softmax(sc, -1), v)
    y = g.matmul(g.reshape(g.transpose(o, (0, 2, 1, 3)), (b, s, d)), ws[3])
    outs = (y, g.binary("mul", o, o)) if extra_heads_major_use else (y,)
    return [(st.kind, st.shape) for st in lower_graph_gpu(g.build(*outs)).steps]


def test_map_stays_when_the_heads_major_output_has_another_user() -> None:
    alone = _attention_pair(False)
    assert ("attention", (1, 40, 128)) in alone and not any(k == "map" for k, _ in alone)
    shared = _attention_pair(True)
    assert ("attention", (1, 2, 40, 64)) in shared
    assert sum(k == "map" for k, _ in shared) >= 1  # the transpose still runs as its own map
