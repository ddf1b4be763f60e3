"""f64 on the GPU back end: transcendentals generated as code, one declaration per intrinsic.

PTX has no f64 ``exp``/``log``/``sin``..., so :mod:`kinac.ir.gpu.scalar_f64` generates them;
each is checked here against numpy's float64 (the reference), in f64 ulps, through the
emulated GPU path (the same LLVM IR as the GPU's, compiled for the host), and its PTX through
``ptxas -arch=sm_90`` where installed. The prelude's ``causal-attention`` over ``rope`` in f64
(issue 18: ``invalid redefinition of function 'llvm.fma.f32'``) lowers, compiles and matches
the reference interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from check_support import Workspace
from gpu_support import run_emulated

from kinac.check import DefnRef, specialise
from kinac.codegen.ptx import compile_ptx, ptx_resources
from kinac.ir.gpu.emit import Builder, module_text
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph
from kinac.tir.interp import evaluate

N = 4096
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _mix(*parts: tuple[float, float]) -> Callable[[np.random.Generator], np.ndarray]:
    def draw(rng: np.random.Generator) -> np.ndarray:
        k = N // len(parts)
        xs = [rng.uniform(lo, hi, k) for lo, hi in parts]
        return np.concatenate(xs + [np.zeros(N - k * len(parts))])

    return draw


def _near_pio2(hi: float) -> Callable[[np.random.Generator], np.ndarray]:
    def draw(rng: np.random.Generator) -> np.ndarray:
        k = rng.integers(-int(hi / 1.5708), int(hi / 1.5708) + 1, N // 2)
        return np.concatenate([rng.uniform(-hi, hi, N - N // 2), k * (np.pi / 2)])

    return draw


# primitive: (float64 reference, points, bound in f64 ulps of the reference, specials)
UNARY: dict[str, tuple[Callable[..., np.ndarray], Callable[..., np.ndarray], float, dict]] = {
    "exp": (np.exp, _mix((-745, 709.7), (-3, 3), (-1e-9, 1e-9)), 1.0,
            {0.0: 1.0, -math.inf: 0.0, math.inf: math.inf, 710.0: math.inf, -800.0: 0.0}),
    "log": (np.log, lambda r: np.exp(r.uniform(-740, 709, N)), 1.0,
            {1.0: 0.0, 0.0: -math.inf, -1.0: math.nan, math.inf: math.inf, 5e-324: -744.4400719213812}),
    "log1p": (np.log1p, _mix((-0.999, 1), (-1e-3, 1e-3), (-1e-30, 1e-30), (1, 1e6)), 1.0,
              {-1.0: -math.inf, 0.0: 0.0, math.inf: math.inf, 1e-300: 1e-300}),
    "tanh": (np.tanh, _mix((-25, 25), (-1, 1), (-1e-5, 1e-5)), 2.0,
             {0.0: 0.0, math.inf: 1.0, -math.inf: -1.0, 30.0: 1.0}),
    "erf": (_erf, _mix((-7, 7), (-1.5, 1.5), (-1e-3, 1e-3)), 1.0,
            {0.0: 0.0, math.inf: 1.0, -math.inf: -1.0, 7.0: 1.0}),
    "sin": (np.sin, _near_pio2(1e6), 1.5, {0.0: 0.0, math.inf: math.nan}),
    "cos": (np.cos, _near_pio2(1e6), 1.5, {0.0: 1.0, -math.inf: math.nan}),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), _mix((-700, 700), (-5, 5)), 2.0, {}),
    "softplus": (lambda x: np.logaddexp(0.0, x), _mix((-700, 700), (-5, 5)), 2.0, {}),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), _mix((-9, 9)), 2.0, {}),
    "rsqrt": (lambda x: 1 / np.sqrt(x), lambda r: np.exp(r.uniform(-700, 700, N)), 1.0, {}),
}  # fmt: skip


def _unary(name: str, n: int) -> Graph:
    g = GraphBuilder(f"{name}_f64")
    return g.build(g.unary(name, g.param("x", "f64", (n,))))


# gelu's ``1 + erf(x / sqrt 2)`` cancels for x < -1 (on the host as well): its error is in
# ulps of max(|gelu(x)|, 1), as the f32 test's absolute bound.
ABSOLUTE = ("gelu",)


def ulp_errors(got: np.ndarray, want: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """Errors in f64 ulps of the reference (or of ``floor`` where larger); equal values, and
    NaN against NaN, count 0."""
    same = (np.isnan(want) & np.isnan(got)) | (want == got)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - want) / np.spacing(np.maximum(np.abs(want), floor))
    return np.where(same, 0.0, np.nan_to_num(err, nan=np.inf))


def ulp_error(got: np.ndarray, want: np.ndarray, floor: float = 0.0) -> float:
    return float(np.max(ulp_errors(got, want, floor)))


def on_gpu(graph: Graph, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Run ``graph`` on the real GPU (skips without one)."""
    from kinac.rt import cuda
    from kinac.rt.cuda.entry import load_gpu_entry

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    lw = lower_graph_gpu(graph)
    out = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    return tuple(o if isinstance(o, np.ndarray) else o.numpy() for o in outs)


@pytest.mark.parametrize("backend", ["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_f64_unary_within_ulps(name: str, backend: str) -> None:
    ref, points, bound, specials = UNARY[name]
    x = points(np.random.default_rng(sorted(UNARY).index(name)))
    x = np.concatenate([x, np.array(list(specials), np.float64)])
    graph = _unary(name, len(x))
    ptx_resources(compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90"))
    got = (run_emulated if backend == "emulated" else on_gpu)(graph, x)[0]
    with np.errstate(all="ignore"):
        want = ref(x)
    errs = ulp_errors(got, want, 1.0 if name in ABSOLUTE else 0.0)
    err, worst = float(np.max(errs)), int(np.argmax(errs))
    assert err <= bound, f"{name}: {err:.3g} ulp > {bound} at x={x[worst]!r}"
    tail = got[len(x) - len(specials) :]
    np.testing.assert_array_equal(tail, np.array(list(specials.values())))


@pytest.mark.parametrize("backend", ["emulated", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_f64_pow(backend: str) -> None:
    rng = np.random.default_rng(7)
    a = np.concatenate([np.exp(rng.uniform(-30, 30, N)), rng.uniform(-3, 3, 64)])
    b = np.concatenate([rng.uniform(-20, 20, N), np.round(rng.uniform(-9, 9, 64))])
    sa = [0.0, -0.0, 0.0, math.inf, -1.0, -2.0, -2.0, 1.0, math.nan, 2.0, 0.5, 4.0]
    sb = [2.0, 3.0, -1.0, -1.0, math.inf, 3.0, 0.5, math.nan, 0.0, 1024.0, -1075.0, 0.5]
    a, b = np.concatenate([a, sa]), np.concatenate([b, sb])
    g = GraphBuilder("pow_f64")
    graph = g.build(g.binary("pow", g.param("a", "f64", (len(a),)), g.param("b", "f64", (len(b),))))
    ptx_resources(compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90"))
    got = (run_emulated if backend == "emulated" else on_gpu)(graph, a, b)[0]
    with np.errstate(all="ignore"):
        want = np.power(a, b)
    assert ulp_error(got[: -len(sa)], want[: -len(sa)]) <= 2.0
    np.testing.assert_array_equal(got[-len(sa) :], want[-len(sa) :])


PRELUDE_ATTENTION = """(module t)
(import "std/nn.kina")
(defn f [(q : (tensor T [B H S (* 2 E)])) (k : (tensor T [B H S (* 2 E)]))
         (v : (tensor T [B H S (* 2 E)])) (c : (tensor T [S (* 2 E)])) (s : (tensor T [S (* 2 E)]))]
  -> (tensor T [B H S (* 2 E)])
  (causal-attention (rope q c s) (rope k c s) v))
"""


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_prelude_attention_with_rope_lowers_and_matches(dtype: str) -> None:
    """Issue 18: in f64 the softmax's exp emitted ``llvm.fma.f32`` on doubles and the module
    declared it twice (LLVM: invalid redefinition)."""
    ws = Workspace({"t.kina": PRELUDE_ATTENTION})
    dims = {"B": 1, "H": 2, "S": 5, "E": 4}
    graph = specialise(DefnRef("t.kina", "f"), dims, {"T": dtype}, ws.env).graph
    assert graph is not None
    ptx_resources(compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90"))
    rng = np.random.default_rng(0)
    np_dt = np.float64 if dtype == "f64" else np.float32
    ins = [rng.standard_normal(t.shape).astype(np_dt) for _, t in graph.params]
    got, want = run_emulated(graph, *ins)[0], evaluate(graph, *ins)[0]
    np.testing.assert_allclose(got, want, rtol=1e-12 if dtype == "f64" else 2e-5, atol=1e-12)


def test_one_declaration_per_function_in_a_mixed_module() -> None:
    """Kernels of f64 and f32 (exp, fma, casts) in one module: each intrinsic is declared once,
    and a second, different declaration of one name fails at emission, naming both."""
    g = GraphBuilder("mixed")
    x = g.param("x", "f64", (7,))
    y = g.param("y", "f32", (7,))
    a = g.unary("exp", x)
    b = g.unary("exp", y)
    graph = g.build(g.unary("softplus", g.binary("add", a, g.cast(b, "f64"))), g.unary("tanh", b))
    text = lower_graph_gpu(graph).llvm_ir
    decls = [ln for ln in text.splitlines() if ln.startswith("declare")]
    names = [ln.split("@")[1].split("(")[0] for ln in decls]
    assert len(names) == len(set(names)), decls
    assert "llvm.fma.f64" in names and "llvm.fma.f32" in names
    compile_ptx(text, "sm_90")
    b1, b2 = Builder(), Builder()
    b1.declare("declare float @llvm.fma.f32(float, float, float)")
    b2.declare("declare float @llvm.fma.f32(double, float, float)")
    with pytest.raises(ValueError, match="conflicting declarations of @llvm.fma.f32"):
        module_text([], [b1, b2], "nvptx")


@pytest.mark.gpu
def test_prelude_attention_f64_through_the_api(tmp_path: Any) -> None:
    """Issue 18's program through ``kinac.compile(..., target="cuda")`` against the host."""
    import kinac
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    path = tmp_path / "t.kina"
    path.write_text(PRELUDE_ATTENTION)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 3, 7, 8)) for _ in range(3))
    c, s = np.cos(rng.standard_normal((7, 8))), np.sin(rng.standard_normal((7, 8)))
    gpu = kinac.compile(path, "f", target="cuda")(q, k, v, c, s)
    host = kinac.compile(path, "f")(q, k, v, c, s)
    got = gpu if isinstance(gpu, np.ndarray) else gpu.numpy()
    np.testing.assert_allclose(got, np.asarray(host), rtol=1e-12, atol=1e-12)
