"""The host runtime's contract: DLPack in and out, clear errors, cacheable artifacts, threads."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from host_support import compiled, from_torch

from kinac.codegen.llvm import compile_object, host_target
from kinac.ir import lower_graph
from kinac.ir.testing import GraphBuilder, mlp_graph
from kinac.rt.host import KinaRuntimeError, load_entry
from kinac.rules.codec import decode, encode, fingerprint
from kinac.tir.graph import Graph

ROOT = Path(__file__).resolve().parents[1]


def affine() -> Graph:
    g = GraphBuilder("affine")
    x = g.param("x", "f32", (3, 4))
    w = g.param("w", "f32", (4,))
    return g.build(g.binary("add", g.binary("mul", x, w), g.const(1.0)))


def test_torch_tensors_in_numpy_out_zero_copy() -> None:
    e = compiled(affine())
    x, w = torch.randn(3, 4), torch.randn(4)
    out = e(x, w)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, (x * w + 1).numpy(), rtol=1e-6, atol=1e-6)
    t = torch.from_dlpack(out)
    assert t.data_ptr() == out.ctypes.data  # DLPack: no copy
    xt = torch.randn(4, 3).t()  # non-contiguous: copied to C order, still right
    np.testing.assert_allclose(e(xt, w), (xt * w + 1).numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(e(xt.numpy(), w.numpy()), (xt * w + 1).numpy(), rtol=1e-6, atol=1e-6)


def test_bf16_torch_tensors() -> None:
    g = GraphBuilder("bf")
    x = g.param("x", "bf16", (5,))
    e = compiled(g.build(g.binary("mul", x, x)))
    xt = torch.randn(5).to(torch.bfloat16)
    out = e(xt)
    assert out.dtype == np.uint16
    assert torch.equal(torch.from_dlpack(out).view(torch.bfloat16), xt * xt)
    assert np.array_equal(e(from_torch(xt)), out)  # uint16 bit patterns work too


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (
            (np.ones((3, 4), np.float64), np.ones(4, np.float32)),
            "argument 'x': dtype float64, expected f32",
        ),
        (
            (np.ones((4, 3), np.float32), np.ones(4, np.float32)),
            r"argument 'x': shape \[4, 3\], expected \[3, 4\]",
        ),
        ((np.ones((3, 4), np.float32),), r"affine takes 2 arrays \(x, w\), got 1"),
        (([[1.0]], np.ones(4, np.float32)), "expected a numpy array or a DLPack tensor, got list"),
    ],
)
def test_bad_arguments_are_clear_errors(args: tuple[object, ...], msg: str) -> None:
    with pytest.raises(KinaRuntimeError, match=msg):
        compiled(affine())(*args)


def test_artifacts_are_cacheable_values() -> None:
    g = mlp_graph(1, 4, 8, 16)
    lw = lower_graph(g)
    assert lower_graph(g) == lw and fingerprint(lower_graph(g)) == fingerprint(lw)
    back = decode(encode(lw))
    assert back == lw
    target = host_target()
    obj = compile_object(lw.llvm_ir, target)
    assert compile_object(back.llvm_ir, decode(encode(target))) == obj
    e = load_entry(back, obj)
    x = [np.random.default_rng(0).standard_normal(t.shape).astype(np.float32) for _, t in g.params]
    np.testing.assert_array_equal(e(*x), load_entry(lw, obj)(*x))
    assert [s.impl for s in lw.steps].count("loops") == len(lw.steps)  # tiny: no BLAS call


def test_concurrent_calls_use_separate_scratch() -> None:
    e = compiled(mlp_graph(2, 8, 16, 32))
    rng = np.random.default_rng(3)
    sets = [
        [rng.standard_normal(p.shape).astype(np.float32) for p in e.lowered.params]
        for _ in range(4)
    ]
    want = [e(*s) for s in sets]
    errors: list[str] = []

    def work(i: int) -> None:
        for _ in range(20):
            if not np.array_equal(e(*sets[i]), want[i]):
                errors.append(f"thread {i}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_heavy_imports_stay_lazy_and_contained() -> None:
    code = (
        "import sys, kinac.ir, kinac.codegen, kinac.rt.host, kinac.tir.interp\n"
        "bad = [m for m in ('xdsl', 'llvmlite') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
    for path in (ROOT / "kinac").rglob("*.py"):
        text = path.read_text()
        if "import xdsl" in text or "from xdsl" in text:
            package = path.relative_to(ROOT / "kinac").parts[0]
            assert package == "ir", f"{path} imports xdsl outside kinac/ir"
        if "import llvmlite" in text:
            assert path.parent.name == "codegen", f"{path} imports llvmlite outside kinac/codegen"


@pytest.mark.parametrize("name", ["rms-norm", "λ-attn?"])
def test_entry_names_need_not_be_identifiers(name: str) -> None:
    g = GraphBuilder(name)
    x = g.param("x", "f32", (3,))
    e = compiled(g.build(g.unary("neg", x)))
    assert e.name == name and e.lowered.symbol.isascii()
    np.testing.assert_array_equal(e(np.ones(3, np.float32)), -np.ones(3, np.float32))


@pytest.mark.parametrize(("m", "n", "k"), [(300, 64, 200), (8, 600, 512), (129, 257, 65)])
def test_split_blas_products_from_many_threads(m: int, n: int, k: int) -> None:
    """Large products run in blocks on the task pool (rows or columns), also concurrently."""
    from kinac.rt.host.blas import _loaded_openblas, _thread_control

    g = GraphBuilder("split")
    a, b = g.param("a", "f32", (m, k)), g.param("bt", "f32", (n, k))
    e = compiled(g.build(g.matmul(a, g.transpose(b, (1, 0)))))
    rng = np.random.default_rng(4)
    sets = [
        (rng.standard_normal((m, k), np.float32), rng.standard_normal((n, k), np.float32))
        for _ in range(3)
    ]
    want = [x @ y.T for x, y in sets]
    lib = _loaded_openblas()
    before = _thread_control(lib)[0]() if lib is not None and _thread_control(lib) else None  # type: ignore[index]
    bad: list[int] = []

    def work(i: int) -> None:
        for _ in range(5):
            if not np.allclose(e(*sets[i]), want[i], rtol=1e-4, atol=1e-3):
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    work(0)
    for t in threads:
        t.join()
    assert not bad
    if before is not None:
        assert _thread_control(lib)[0]() == before  # type: ignore[index]  # OpenBLAS's thread count is restored
