"""Programmatic dependent launch (issue 14, docs/gpu.md "Latency of a small call").

Every generated kernel waits for the grids it depends on before it touches memory
(``griddepcontrol.wait`` first, then ``launch_dependents``) in sm_90 code, and has neither
instruction in sm_80 code (``__nvvm_reflect``); ptxas accepts the PTX, and no kernel gains
registers' spills or a stack. The runtime reads which kernels wait from the PTX it loads
(:func:`kinac.rt.cuda.module.waiting_kernels`: a memory access before the wait disqualifies a
kernel), refuses to launch any other with the programmatic attribute, and builds the
``cuLaunchKernelEx`` configuration cuda.h describes. On a GPU: the small block's output is
bit-identical with the switch on and off, and ``f.synchronize()`` waits for it.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kinac.codegen.ptx import compile_ptx, ptx_resources
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import block_graph
from kinac.rt.cuda import kernel_graph
from kinac.rt.cuda.module import Launch, waiting_kernels

ROOT = Path(__file__).resolve().parent.parent


def _bodies(ptx: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in re.finditer(r"\.entry (\w+)\((.*?)\n}", ptx, re.S)}


def test_generated_kernels_wait_first_on_sm90_and_not_on_sm80() -> None:
    lw = lower_graph_gpu(block_graph(dtype="bf16"))
    ptx90 = compile_ptx(lw.llvm_ir, "sm_90")
    # the fused attention here is its mma.sync variant (wgmma: sm_90a, the next test)
    generated = {n for n in lw.functions if not n.startswith("attn_")}
    assert len(generated) >= 2 and waiting_kernels(ptx90) == generated
    for name, body in _bodies(ptx90).items():
        if name not in generated:
            continue
        code = [ln.strip() for ln in body.split("{", 1)[1].splitlines() if ln.strip()]
        code = [c for c in code if not c.startswith(("//", ".reg", "ld.param"))]
        # the first instructions: the wait, then the trigger (nothing touches memory before)
        first = [c for c in code if "griddepcontrol" in c][:2]
        assert first == ["griddepcontrol.wait;", "griddepcontrol.launch_dependents;"], name
    for r in ptx_resources(ptx90, "sm_90").values():  # ptxas accepts it (where installed)
        assert r.get("spill_stores", 0) == 0 and r.get("stack", 0) == 0, r
    ptx80 = compile_ptx(lw.llvm_ir, "sm_80")
    assert "griddepcontrol" not in ptx80 and waiting_kernels(ptx80) == frozenset()
    assert ".local" not in ptx90 and ".local" not in ptx80  # the entry blocks merged (SROA)


def test_the_fused_attention_waits_in_its_wgmma_variant_only() -> None:
    from kinac.ir.gpu.attention_kernel import attention_llvm_ir, kernel_name
    from kinac.ir.gpu.attention_params import AttnTiles, bhsd_params

    p = bhsd_params("bf16", 1, 2, 1, 128, 64, True, AttnTiles(64, 64))
    w = replace(p, mma="wgmma")
    ptx = compile_ptx(attention_llvm_ir((w,)), "sm_90a")
    assert waiting_kernels(ptx) == {kernel_name(w)}
    ptx_resources(ptx, "sm_90a")
    sync = compile_ptx(attention_llvm_ir((replace(p, mma="sync"),)), "sm_90")
    assert "griddepcontrol" not in sync and waiting_kernels(sync) == frozenset()


PTX = """
.visible .entry {name}(
\t.param .u64 {name}_param_0
)
{{
\t.reg .b64 %rd<3>;
{before}
\tgriddepcontrol.wait;
\tld.global.f32 %f1, [%rd1];
\tret;
}}
"""


@pytest.mark.parametrize(
    ("before", "waits"),
    [
        ("\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;", True),
        ("\t// ld.global.f32 in a comment", True),
        ("\tld.global.f32 %f0, [%rd1];", False),
        ("\tst.global.f32 [%rd1], %f0;", False),
        ("\tcp.async.ca.shared.global [%r1], [%rd1], 16;", False),
        ("\tcall.uni f, (%rd1);", False),
        # an L2 prefetch (plain or evict_last, predicated or not) is the one access allowed
        ("\tprefetch.global.L2 [%rd2];", True),
        ("\tprefetch.global.L2::evict_last [%rd2+128];\n\t@%p1 prefetch.global.L2 [%rd1];", True),
        ("\tprefetch.global.L1 [%rd2];", False),
        ("\tprefetch.L2 [%rd2];", False),  # generic address: not the global L2 form
        ("\tprefetchu.L1 [%rd2];", False),
        ("\tprefetch.global.L2 [%rd2]; ld.global.f32 %f0, [%rd1];", False),  # two on a line
        ("\tprefetch.global.L2 [%rd2];\n\tld.global.nc.f32 %f0, [%rd1];", False),
        ("\tprefetch.global.L2 [%rd2];\n\tst.global.f32 [%rd1], %f0;", False),
        ("\tprefetch.global.L2 [%rd2];\n\tcp.async.cg.shared.global [%r1], [%rd1], 16;", False),
    ],
)
def test_waiting_kernels_refuses_a_memory_access_before_the_wait(before: str, waits: bool) -> None:
    text = PTX.format(name="k", before=before) + PTX.format(name="plain", before="").replace(
        "\tgriddepcontrol.wait;\n", ""
    )
    assert waiting_kernels(text) == ({"k"} if waits else set())


class _Kernel:
    """What a Launch reads of a kernel (no driver)."""

    def __init__(self, waits: bool) -> None:
        self.name, self.address, self.handle, self.waits = "k_test", 0x1234, None, waits


def test_pdl_launch_config_and_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    lk = kernel_graph.LaunchAttribute
    lc = kernel_graph.LaunchConfig
    # cuda.h's layout: CUlaunchAttribute is 72 bytes (value at 8), CUlaunchConfig 56
    assert (ctypes.sizeof(lk), lk.value.offset, ctypes.sizeof(lc)) == (72, 8, 56)
    assert (lc.hStream.offset, lc.attrs.offset, lc.numAttrs.offset) == (32, 40, 48)
    with pytest.raises(ValueError, match="programmatic dependent launch"):
        Launch(_Kernel(False), ("ptr",), (2, 3, 4), 128, 0, (7,), "pdl")  # type: ignore[arg-type]
    seen: list[Any] = []

    def fake(ref: Any, f: Any, params: Any, extra: Any) -> int:
        cfg = ref._obj
        attr = lk.from_address(cfg.attrs)
        seen.append((tuple(getattr(cfg, n) for n, _ in lc._fields_[:7]), cfg.hStream,  # type: ignore[misc]
                     cfg.numAttrs, attr.id, attr.value[0], f.value, params.value, extra))  # fmt: skip
        return 0

    plain: list[Any] = []
    monkeypatch.setitem(kernel_graph._fns, "cuLaunchKernelEx", fake)
    monkeypatch.setattr(kernel_graph, "pydll_call", lambda *a: plain.append)
    ln = Launch(_Kernel(True), ("ptr",), (2, 3, 4), 128, 512, (7,), "pdl")  # type: ignore[arg-type]
    stream = type("S", (), {"handle": 0x77})()
    ln.run(stream)
    assert plain == []
    dims, hs, nattr, aid, val, fn, params, extra = seen[0]
    assert dims == (2, 3, 4, 128, 1, 1, 512) and hs == 0x77 and fn == 0x1234 and extra is None
    assert (nattr, aid, val) == (1, kernel_graph.PROGRAMMATIC_STREAM_SERIALIZATION, 1)
    assert (
        params == ln._params
        and ctypes.c_uint64.from_address(ctypes.c_void_p.from_address(params).value).value == 7  # type: ignore[arg-type]
    )  # the argument slot holds the bound pointer


def test_kinac_pdl_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from kinac.rt.cuda import entry

    for v, want in (("1", True), ("0", False), ("", entry.PDL_DEFAULT)):
        monkeypatch.setenv("KINAC_PDL", v)
        assert entry.default_pdl() is want
    monkeypatch.setenv("KINAC_PDL", "yes")
    with pytest.raises(ValueError, match="KINAC_PDL"):
        entry.default_pdl()


@pytest.mark.gpu
def test_block_bit_identical_with_and_without_pdl() -> None:
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip(f"no CUDA GPU ({cuda.unavailable_reason()})")
    import torch
    from gpu_refs import SMALL, block_inputs

    import kinac

    ins = block_inputs(SMALL, torch.bfloat16)
    h, kv = SMALL["h"], SMALL["kv"]
    outs = {}
    for on in (False, True):
        f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda", pdl=on)
        for _ in range(4):  # first call, warm-up and capture, then graph replays
            y = f(h, kv, *ins)
        f.synchronize()
        outs[on] = torch.from_dlpack(y).clone()
        e = next(iter(f._entries.values()))
        graph = [g for _, _, g in e._bound.values() if g is not None][-1]
        assert graph.captured and e.pdl is on
        assert (sum(k.waits for k in e.kernels.values()) > 0) is True  # sm_90: all wait
    assert torch.equal(outs[False], outs[True])


def test_a_refused_programmatic_launch_falls_back_to_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def refuse(*a: Any) -> int:
        calls.append("ex")
        return 801  # CUDA_ERROR_NOT_SUPPORTED

    monkeypatch.setitem(kernel_graph._fns, "cuLaunchKernelEx", refuse)
    monkeypatch.setattr(kernel_graph, "pydll_call", lambda *a: lambda s: calls.append("plain"))
    monkeypatch.setattr(kernel_graph, "PDL_REFUSED", [])
    ln = Launch(_Kernel(True), ("ptr",), 1, 32, 0, (0,), "pdl")  # type: ignore[arg-type]
    stream = type("S", (), {"handle": 0})()
    ln.run(stream)
    ln.run(stream)
    assert calls == ["ex", "plain", "plain"] and kernel_graph.PDL_REFUSED == [801]
