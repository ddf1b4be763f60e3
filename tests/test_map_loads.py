"""A map kernel's loads issued first (``kinac/ir/gpu/map_loads.py``, issue 14; off by default).

Enabled, the map's body branches to a path storing every group without checks (a whole block)
or to the checked path: emulated on the CPU over a grid of one whole and one partial block it
equals the default kernel bit for bit; its PTX issues all of a thread's 16-byte loads before
the first branch, and ptxas accepts it. Disabled, the generated text is the default's."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from gpu_support import run_emulated

from kinac.ir.gpu import kernels, map_loads
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph

SHAPE = (17, 288)  # bf16, 8 lanes a group: 612 groups, 2 a thread: one whole block, one partial


def _swiglu_map() -> Graph:
    g = GraphBuilder("silu_mul")
    a, b = g.param("a", "bf16", SHAPE), g.param("b", "bf16", SHAPE)
    return g.build(g.binary("mul", g.unary("silu", a), b))


def _bf16(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def test_loads_first_equals_the_default_map(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "map_unroll", lambda groups: 2)
    rng = np.random.default_rng(0)
    a, b = (_bf16(rng.standard_normal(SHAPE) * 3) for _ in range(2))
    (plain,) = run_emulated(_swiglu_map(), a, b)
    default_ir = lower_graph_gpu(_swiglu_map()).llvm_ir
    monkeypatch.setattr(map_loads, "ENABLED", True)
    (first,) = run_emulated(_swiglu_map(), a, b)
    np.testing.assert_array_equal(first, plain)
    assert not (plain == 0xFFFF).any()  # every element written (outputs start as 0xFF bytes)
    ir = lower_graph_gpu(_swiglu_map()).llvm_ir
    assert ir != default_ir and "asm sideeffect" in ir
    monkeypatch.setattr(map_loads, "ENABLED", False)
    assert lower_graph_gpu(_swiglu_map()).llvm_ir == default_ir


def test_ptx_issues_every_load_before_the_first_branch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:  # fmt: skip
    from kinac.codegen.ptx import compile_ptx

    monkeypatch.setattr(kernels, "map_unroll", lambda groups: 2)
    monkeypatch.setattr(map_loads, "ENABLED", True)
    ptx = compile_ptx(lower_graph_gpu(_swiglu_map()).llvm_ir)
    body = ptx[ptx.index(".entry") :]
    head = body[: re.search(r"\bbra\b", body).start()]  # type: ignore[union-attr]
    assert head.count("ld.global.nc.v4.u32") == 4  # 2 groups x (a, b), all before the branch
    assert body.count("ld.global") == 4  # no other load
    if shutil.which("ptxas"):
        (tmp_path / "k.ptx").write_text(ptx)
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")], capture_output=True, text=True)  # fmt: skip
        assert r.returncode == 0 and "spill" in r.stderr, r.stderr
        assert "0 bytes spill stores" in r.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("unroll", [None, 2])
def test_loads_first_on_the_gpu_equals_the_default(monkeypatch: pytest.MonkeyPatch, unroll: int | None) -> None:  # fmt: skip
    """The block's map shape (4096 x 5632 bf16, whole blocks only) and an odd one (partial
    last block): the enabled kernel's output is the default kernel's, bit for bit."""
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    import torch

    from kinac.codegen.ptx import compile_ptx
    from kinac.rt.cuda.entry import load_gpu_entry

    if unroll is not None:
        monkeypatch.setattr(kernels, "map_unroll", lambda groups: unroll)
    for shape in ((4096, 5632), (1031, 1048)):
        g = GraphBuilder(f"silu_mul_{shape[0]}")
        a, b = g.param("a", "bf16", shape), g.param("b", "bf16", shape)
        graph = g.build(g.binary("mul", g.unary("silu", a), b))
        ins = [torch.randn(shape, device="cuda").to(torch.bfloat16) * 3 for _ in range(2)]
        outs = []
        for on in (False, True):
            monkeypatch.setattr(map_loads, "ENABLED", on)
            lw = lower_graph_gpu(graph)
            outs.append(torch.from_dlpack(load_gpu_entry(lw, compile_ptx(lw.llvm_ir))(*ins)).clone())  # fmt: skip
        assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), shape
