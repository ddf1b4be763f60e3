"""GEMM autotuning on a real GPU (issue 14): the 45M block's grouped k/v product and a
residual product are timed once (today's binding finite, the choice no slower than it), a
second database on the same store times nothing, and an entry bound with its tuned choices
computes what the same entry with today's binding computes (bf16, random data), with no
stored algorithm refused at bind, its grouped weights in either order."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kinac import pipeline_gemm_tune  # noqa: E402
from kinac.artifacts.gpu import GemmOperand, GpuGemm  # noqa: E402
from kinac.pipeline_gemm_tune import (  # noqa: E402
    GEMM_TUNE_VERSION,
    GpuGemmTimer,
    canonical,
    gemm_algo,
    gemm_autotune_mode,
)
from kinac.rt import cuda  # noqa: E402
from kinac.rules import Database  # noqa: E402
from kinac.rules.store import Store  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (cuda.available() and torch.cuda.is_available()), reason="no CUDA GPU with PyTorch"
    ),
]

ROOT = Path(__file__).resolve().parent.parent


def _kv() -> GpuGemm:
    """x [4096, 2048] times wk and wv [2048, 512]: one pointers call, as the block groups it."""
    return GpuGemm(
        "bf16", "bf16", 4096, 512, 2048, 2,
        GemmOperand("x", (0, 0), 2048),
        GemmOperand("wk", (0, 0), 512, False, ("wk", "wv")),
        GemmOperand("k", (0, 0), 512, False, ("k", "v")),
        "pointers",
    )  # fmt: skip


def _oproj() -> GpuGemm:
    return GpuGemm(
        "bf16", "bf16", 4096, 2048, 2048, 1,
        GemmOperand("o", (0,), 2048), GemmOperand("wo", (0,), 2048), GemmOperand("y", (0,), 2048),
        "single", "residual", "x",
    )  # fmt: skip


def test_tuned_on_this_gpu_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KINAC_AUTOTUNE", raising=False)
    db = Database(Store(tmp_path))
    mode = gemm_autotune_mode(db, ())
    assert mode.startswith("timed ")
    arch = mode.rsplit(" ", 1)[-1]
    got = {}
    for g in (_kv(), _oproj()):
        c = gemm_algo(db, (arch, canonical(g), GEMM_TUNE_VERSION, mode))
        print(g.mode, g.epilogue, c.algo, c.times)
        assert c.how == "timed" and c.algo is not None, c
        assert math.isfinite(c.algo.base_ms) and c.algo.ms <= c.algo.base_ms
        assert len(c.times) > 2  # today's and cuBLASLt's proposals at least
        got[g] = c
    db.commit()
    db.close()
    calls: list[int] = []
    real = GpuGemmTimer.time
    monkeypatch.setattr(GpuGemmTimer, "time", lambda self, g, a: calls.append(1) or real(self, g, a))  # type: ignore[func-returns-value]  # fmt: skip
    db2 = Database(Store(tmp_path))
    mode2 = gemm_autotune_mode(db2, ())
    for g, c in got.items():
        assert gemm_algo(db2, (arch, canonical(g), GEMM_TUNE_VERSION, mode2)) == c
    assert calls == []
    db2.close()


def test_tuned_entry_equals_todays_binding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bf16 SwiGLU MLP with a residual (grouped gate/up, plain and epilogue products) built
    with every GEMM tuned, against the same lowering with the choices stripped."""
    from kinac.ir.testing import GraphBuilder
    from kinac.pipeline_gpu import link_lowered, lower_graph
    from kinac.pipeline_support import EntryKey
    from kinac.rt.cuda.entry import load_gpu_entry
    from kinac.session import Session

    monkeypatch.delenv("KINAC_AUTOTUNE", raising=False)
    monkeypatch.setattr(pipeline_gemm_tune, "MIN_TUNE_FLOPS", 0)
    b = GraphBuilder("swiglu_res")
    x = b.param("x", "bf16", (2, 512, 1024))
    wg, wu, wd = (b.param(n, "bf16", s) for n, s in (("wg", (1024, 2048)), ("wu", (1024, 2048)), ("wd", (2048, 1024))))  # fmt: skip
    a, u = b.matmul(x, wg), b.matmul(x, wu)
    h = b.binary("mul", b.binary("mul", a, b.unary("sigmoid", a)), u)
    graph = b.build(b.binary("add", b.matmul(h, wd), x))
    db = Session(ROOT / "workspaces/transformer", no_cache=True).db
    key = EntryKey("tests/test_gemm_tune_gpu.py", graph.name, (), (), "cuda")
    lo = lower_graph(db, graph, key, "GPU lowering")
    ptx = link_lowered(db, lo, key, "PTX generation (LLVM NVPTX)")
    gemms = [s.gemm for s in lo.steps if s.gemm is not None]
    print([(g.mode, g.epilogue, g.algo.label if g.algo else None) for g in gemms])
    assert gemms and all(g.algo is not None for g in gemms)
    plain = replace(lo, steps=tuple(replace(s, gemm=replace(s.gemm, algo=None)) if s.gemm else s for s in lo.steps))  # fmt: skip
    tuned, today = load_gpu_entry(lo, ptx), load_gpu_entry(plain, ptx)
    torch.manual_seed(0)
    ins = [torch.randn(t.shape, device="cuda", dtype=torch.bfloat16) * 0.1 for _, t in graph.params]  # fmt: skip
    y1 = torch.from_dlpack(tuned(*ins)).float()
    y0 = torch.from_dlpack(today(*ins)).float()
    torch.cuda.synchronize()
    assert tuned.blas.fallbacks == [], tuned.blas.fallbacks
    err = float((y1 - y0).abs().max()) / max(1.0, float(y0.abs().max()))
    assert err < 2e-2, err
    # the gate and up weights at one stride in either order (where PyTorch's allocator puts
    # them varies): a grouped lt choice binds as such or as its stored alternative, never
    # falling back (kinac/artifacts/gemm_algo.py, alt_how)
    both = torch.randn(2, 1024, 2048, device="cuda", dtype=torch.bfloat16) * 0.1
    for gate, up in ((0, 1), (1, 0)):
        ins2 = [ins[0], both[gate], both[up], ins[3]]
        y1 = torch.from_dlpack(tuned(*ins2)).float()
        y0 = torch.from_dlpack(today(*ins2)).float()
        torch.cuda.synchronize()
        err = float((y1 - y0).abs().max()) / max(1.0, float(y0.abs().max()))
        assert err < 2e-2 and tuned.blas.fallbacks == [], (err, tuned.blas.fallbacks)
    print(tuned.blas.bound_forms)
