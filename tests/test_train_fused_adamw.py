"""The fused AdamW kernel (``kinac.ir.gpu.fused_inplace``): ``adamw-m``, ``adamw-v`` and
``adamw-param`` of ``std/optim.kina`` in one GPU function updating ``p``, ``m`` and ``v`` in
place, run on the CPU emulation of the GPU (``tests/gpu_support.py``) and checked bit for bit
against the three generated kernels run one after another (the 3-kernel path), for a size
with a vector tail and several steps; the NVPTX variant passes ``ptxas``."""

from __future__ import annotations

import dataclasses
from typing import Any

import gpu_support
import numpy as np
import pytest
from gpu_support import _SYMS, launch, run_emulated
from ptx_dataflow import stores

from kinac import pipeline
from kinac.api import compile as compile_defn
from kinac.codegen.llvm import compile_object, host_target, jit_load
from kinac.codegen.target import TargetSpec
from kinac.ir.gpu.emit import module_text
from kinac.ir.gpu.fused_inplace import fuse_inplace_maps, graph_part
from kinac.train.optim import OPTIM_KINA

BUF = {"p": 0, "g": 1, "m": 2, "v": 3, "b1": 4, "b2": 5, "lr": 6, "eps": 7, "wd": 8, "t": 9}
PARTS = (("adamw-m", "m"), ("adamw-v", "v"), ("adamw-param", "p"))
N = 1000  # 250 groups of 4 lanes


def _graphs(n: int, cache: str) -> list[Any]:
    out = []
    for name, _ in PARTS:
        f = compile_defn(OPTIM_KINA, name, target="cuda", cache_dir=cache)
        k = pipeline.EntryKey(f.key.file, name, (("..s", (n,)),), (("T", "f32"),), "cuda")
        out.append(pipeline.entry_graph(f.sess.db, k).graph)
    return out


def _fused(graphs: list[Any], flavour: str) -> Any:
    parts = [
        graph_part(g, [BUF[p] for p, _ in g.params], BUF[w])
        for g, (_, w) in zip(graphs, PARTS, strict=True)
    ]
    return fuse_inplace_maps(parts, len(BUF), "adamw_fused", flavour)


def _no_fma() -> TargetSpec:
    """The host without FMA: ``contract`` lets x86's backend fuse a multiply-add in one lane
    of a long function and not in the standalone kernel (both roundings are allowed), so the
    same operation order is compared with contraction off on both sides."""
    h = host_target()
    return dataclasses.replace(h, features=h.features + ",-fma,-fma4,-avx512f")


def test_fused_adamw_equals_three_kernels_bitwise(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gpu_support, "host_target", _no_fma)
    graphs = _graphs(N, str(tmp_path))
    fn = _fused(graphs, "emu")
    image = jit_load(
        compile_object(module_text([fn.text], [fn.builder], "emu"), _no_fma()),
        _SYMS,
        ("adamw_fused",),
    )
    rng = np.random.default_rng(0)
    p = rng.standard_normal(N).astype(np.float32)
    m = np.zeros(N, np.float32)
    v = np.zeros(N, np.float32)
    fp, fm, fv = p.copy(), m.copy(), v.copy()
    f32 = np.float32
    for t in (1, 2, 3):
        g = rng.standard_normal(N).astype(np.float32)
        sc = {"b1": f32(0.9), "b2": f32(0.999), "lr": f32(3e-3), "eps": f32(1e-8),
              "wd": f32(0.01), "t": f32(t)}  # fmt: skip
        # the 3-kernel path: each defn's generated kernel, emulated
        (m,) = run_emulated(graphs[0], g, m, sc["b1"])  # type: ignore[arg-type]
        (v,) = run_emulated(graphs[1], g, v, sc["b2"])  # type: ignore[arg-type]
        args = [p, m, v, sc["lr"], sc["b1"], sc["b2"], sc["eps"], sc["wd"], sc["t"]]
        (p,) = run_emulated(graphs[2], *args)  # type: ignore[arg-type]
        # the fused kernel, in place over fp, fm, fv
        bufs = [fp, g, fm, fv] + [np.array(sc[k], np.float32) for k in list(BUF)[4:]]
        launch(image.addresses["adamw_fused"], len(bufs), fn.grid, fn.block,
               [b.ctypes.data for b in bufs])  # fmt: skip
        for name, a, b in (("m", m, fm), ("v", v, fv), ("p", p, fp)):
            assert a.tobytes() == b.tobytes(), (t, name)
    assert not np.array_equal(p, rng.standard_normal(N))  # moved


def test_fused_adamw_ptx_assembles(tmp_path: Any) -> None:
    """The NVPTX variant compiles to the three kernels' arithmetic, opcode for opcode (the
    same f32 fmas, divisions, square roots, and pow's f64 fmas) and value for value: each
    stored lane of ``p``, ``m`` and ``v`` is the same PTX expression as the three kernels'
    (``ptx_dataflow``; before the emitter chose which product an add fuses, the NVPTX
    backend fused ``b2*v`` in ``adamw-v`` and ``(1-b2)*g*g`` in the fused kernel: 1 ulp on
    the H200, 2026-12-02 02:22), and ptxas takes it without spilling."""
    import re

    from kinac.codegen.ptx import compile_ptx, ptx_resources, ptxas_path
    from kinac.ir.gpu.pipeline import lower_graph_gpu

    ops = ("fma.rn.f32", "fma.rn.f64", "div.rn.f32", "sqrt.rn.f32", "mul.f32", "sub.f32")

    def counts(ptx: str) -> dict[str, int]:
        return {k: len(re.findall(re.escape(k), ptx)) for k in ops}

    graphs = _graphs(1 << 20, str(tmp_path))
    fn = _fused(graphs, "nvptx")
    ptx = compile_ptx(module_text([fn.text], [fn.builder], "nvptx"))
    assert ".entry adamw_fused" in ptx
    table: dict[Any, int] = {}
    lanes, three = {}, []  # type: ignore[var-annotated]
    for g, (_, w) in zip(graphs, PARTS, strict=True):
        lo = lower_graph_gpu(g)
        ((launch,),) = [s.launches for s in lo.steps]
        names = [w if a.startswith("out") else lo.params[int(a[5:])].name for a in launch.args]
        one = compile_ptx(lo.llvm_ir)
        three.append(counts(one))
        lanes.update(stores(one, names, table, dict(lanes)))  # m, v read as just computed
    assert counts(ptx) == {k: sum(c[k] for c in three) for k in ops}
    fused_lanes = stores(ptx, list(BUF), table)
    assert sorted(fused_lanes) == sorted(lanes) and len(lanes) == 12  # p, m, v x 4 lanes
    assert [k for k in lanes if fused_lanes[k] != lanes[k]] == []
    if ptxas_path() is None:
        pytest.skip("no ptxas")
    res = ptx_resources(ptx)["adamw_fused"]
    assert res.get("spill_stores", 0) == 0, res
