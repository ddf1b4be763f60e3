"""Each float elementwise primitive through every stage, against a float64 reference.

One row of :data:`CASES` per primitive: a float64 reference written independently of kinac
(numpy / ``math``), the f32 test points, and the accuracy bound in f32 ulps of the reference
(or an absolute bound where the reference crosses zero in the middle of the range, as ``erf``).
For each row: the checker accepts ``(name x)`` on a float tensor and refuses it on an integer
one (K0602); specialisation folds ``(name 0.5)``; the interpreter, the host back end (f32, f64
and bf16) and the GPU lowering (PTX checked by ``ptxas -arch=sm_90`` where installed, the
kernels run emulated on the CPU, and on a real GPU under ``-m gpu``) meet the bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from check_support import Workspace
from gpu_support import run_emulated
from host_support import run

from kinac.check import DefnRef, specialise
from kinac.codegen.ptx import compile_ptx, ptx_resources
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph
from kinac.tir.interp import bf16_to_f32, evaluate, f32_to_bf16

N = 8192
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _mix(*parts: tuple[float, float]) -> Callable[[np.random.Generator], np.ndarray]:
    """Test points: equal shares uniform on each ``(lo, hi)``, as f32."""

    def draw(rng: np.random.Generator) -> np.ndarray:
        k = N // len(parts)
        xs = [rng.uniform(lo, hi, k) for lo, hi in parts]
        return np.concatenate(xs + [np.zeros(N - k * len(parts))]).astype(np.float32)

    return draw


def _near_pio2(hi: float) -> Callable[[np.random.Generator], np.ndarray]:
    """Half the points uniform on ``(-hi, hi)``, half the f32 nearest to multiples of pi/2
    (where sin or cos is tiny, the hard case of a range reduction)."""

    def draw(rng: np.random.Generator) -> np.ndarray:
        k = rng.integers(-int(hi / 1.5708), int(hi / 1.5708) + 1, N // 2)
        return np.concatenate([rng.uniform(-hi, hi, N - N // 2), k * (np.pi / 2)]).astype(
            np.float32
        )

    return draw


@dataclass(frozen=True)
class Case:
    """``ref``: float64 reference; ``ulp``: bound in f32 ulps; ``atol``: or an absolute bound;
    ``gpu_ulp``: the GPU's bound (its ``exp`` is the 2-ulp ``ex2.approx``); ``specials``: exact
    results at special inputs."""

    ref: Callable[[np.ndarray], np.ndarray]
    points: Callable[[np.random.Generator], np.ndarray]
    ulp: float
    atol: float = 0.0
    gpu_ulp: float | None = None
    specials: dict[float, float] = field(default_factory=dict)


CASES: dict[str, Case] = {
    "cos": Case(
        np.cos, _near_pio2(1e6), 2.0, specials={0.0: 1.0, -math.inf: math.nan, math.nan: math.nan}
    ),
    "sin": Case(
        np.sin,
        _near_pio2(1e6),
        2.0,
        specials={0.0: 0.0, math.inf: math.nan, math.nan: math.nan},
    ),
    "softplus": Case(
        lambda x: np.logaddexp(0.0, x),
        _mix((-80, 40), (-5, 5)),
        3.0,
        gpu_ulp=4.0,
        specials={-math.inf: 0.0, math.inf: math.inf, 100.0: 100.0},
    ),
    "log1p": Case(
        np.log1p,
        _mix((-0.999, 1), (-1e-3, 1e-3), (-1e-30, 1e-30), (1, 1e6)),
        3.0,
        specials={-1.0: -math.inf, 0.0: 0.0, math.inf: math.inf, 1e-30: 1e-30},
    ),
    "erf": Case(_erf, _mix((-5, 5), (-1, 1)), 0.0, atol=1e-6, specials={0.0: 0.0, 9.0: 1.0}),
    "exp": Case(np.exp, _mix((-86, 88.5), (-3, 3)), 2.0, gpu_ulp=3.0),
    "tanh": Case(np.tanh, _mix((-12, 12), (-1, 1)), 2.0, gpu_ulp=4.0),
    "gelu": Case(lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), _mix((-8, 8)), 0.0, atol=8e-6),
}


def _unary(name: str, dtype: str, n: int = N) -> Graph:
    g = GraphBuilder(f"{name}_{dtype}")
    return g.build(g.unary(name, g.param("x", dtype, (n,))))


def _error(case: Case, got: np.ndarray, x: np.ndarray, dtype: str = "f32") -> float:
    """Max error in ulps of ``dtype`` (or, with ``atol``, in units of ``atol``)."""
    want = case.ref(x.astype(np.float64))
    got = got.astype(np.float64)
    ok = np.isnan(want) & np.isnan(got) | (want == got)
    if case.atol:
        return float(np.max(np.where(ok, 0.0, np.abs(got - want))) / case.atol)
    np_dt = {"f32": np.float32, "f64": np.float64}[dtype]
    spacing = np.spacing(np.abs(want).astype(np_dt)).astype(np.float64)
    return float(np.max(np.where(ok, 0.0, np.abs(got - want) / spacing)))


def _within(case: Case, got: np.ndarray, x: np.ndarray, bound: float | None = None) -> None:
    err = _error(case, got, x)
    limit = 1.0 if case.atol else (bound if bound is not None else case.ulp)
    worst = int(np.argmax(np.abs(got.astype(np.float64) - case.ref(x.astype(np.float64)))))
    assert err <= limit, f"error {err:.3g} > {limit} (worst at x={x[worst]!r})"


def _close64(got: np.ndarray, want: np.ndarray) -> None:
    """f64 results: to a few f64 ulps of the result, or of the range where it cancels."""
    scale = np.max(np.abs(want[np.isfinite(want)]))
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-15 * scale)


def _points(name: str) -> np.ndarray:
    return CASES[name].points(np.random.default_rng(sorted(CASES).index(name)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_checked_and_folded(name: str) -> None:
    src = (
        "(module t)\n"
        f"(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add ({name} x) ({name} 0.5)))\n"
        f"(defn bad [(i : (tensor i32 [N]))] -> (tensor i32 [N]) ({name} i))\n"
    )
    ws = Workspace({"t.kina": src})
    diags = {c.ref.name: [d.code for d in c.diagnostics] for c in ws.env.check_file("t.kina")}
    assert diags == {"f": [], "bad": ["K0602"]}, diags
    g = specialise(DefnRef("t.kina", "f"), {"N": 4}, {}, ws.env).graph
    assert [n.op for n in g.nodes] == ["param", name, "const", "add"]  # type: ignore[union-attr]
    folded = g.nodes[2].attr("value")  # type: ignore[union-attr]
    assert folded == pytest.approx(float(CASES[name].ref(np.float64(0.5))), rel=1e-15)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(CASES))
def test_interpreted(name: str) -> None:
    case, x = CASES[name], _points(name)
    _within(case, evaluate(_unary(name, "f32"), x)[0], x, 0.5 if not case.atol else None)
    x64 = x.astype(np.float64)
    _close64(evaluate(_unary(name, "f64"), x64)[0], case.ref(x64))


@pytest.mark.parametrize("name", sorted(CASES))
def test_host(name: str) -> None:
    case, x = CASES[name], _points(name)
    _within(case, run(_unary(name, "f32"), x)[0], x)
    x64 = x.astype(np.float64)
    _close64(run(_unary(name, "f64"), x64)[0], case.ref(x64))
    got16 = bf16_to_f32(run(_unary(name, "bf16"), f32_to_bf16(x))[0]).astype(np.float64)
    want16 = case.ref(bf16_to_f32(f32_to_bf16(x)).astype(np.float64))
    finite = np.isfinite(want16)
    np.testing.assert_allclose(got16[finite], want16[finite], rtol=2**-7, atol=2 * case.atol)
    if case.specials:
        xs = np.array(list(case.specials), np.float32)
        got = run(_unary(name, "f32", len(xs)), xs)[0]
        np.testing.assert_array_equal(got, np.array(list(case.specials.values()), np.float32))


@pytest.mark.parametrize("name", sorted(CASES))
def test_gpu_lowered_and_emulated(name: str) -> None:
    case, x = CASES[name], _points(name)
    graph = _unary(name, "f32")
    ptx = compile_ptx(lower_graph_gpu(graph).llvm_ir, "sm_90")
    ptx_resources(ptx)  # ptxas -arch=sm_90 accepts it (where installed)
    _within(case, run_emulated(graph, x)[0], x, case.gpu_ulp)


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_on_the_gpu(name: str) -> None:
    torch = pytest.importorskip("torch")
    from kinac.rt import cuda
    from kinac.rt.cuda.entry import load_gpu_entry

    if not (cuda.available() and torch.cuda.is_available()):
        pytest.skip("no CUDA GPU with PyTorch")
    case, x = CASES[name], _points(name)
    lw = lower_graph_gpu(_unary(name, "f32"))
    out = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))(x)
    got = out if isinstance(out, np.ndarray) else out.numpy()  # a kinac GPU tensor
    _within(case, got, x, case.gpu_ulp)
