"""The per-primitive registry: one definition reaches every stage, and no stage lists names.

Each elementwise definition in ``kinac.prims.defs`` must show up, without any other file naming
it, as a checker primitive, a graph op the interpreter evaluates, a folder entry, a ``kina``
dialect op, and code on the host and the GPU; and the neutral package must stay neutral (the
checker imports it, so it may import no stage and nothing heavy).
"""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from kinac.check import fold
from kinac.check.prims import PRIMS
from kinac.ir.dialects.kina_struct import OPS
from kinac.ir.gpu.pipeline import lower_graph_gpu
from kinac.ir.testing import GraphBuilder
from kinac.prims.elementwise import ELEMENTWISE, apply, names
from kinac.tir.interp import evaluate
from kinac.tir.np_algebra import NumpyAlgebra

FLOAT_UNARY = names("float")
POINTS = (-3.5, -1.25, -0.3, 0.0, 0.7, 1.5, 2.75)


def test_every_definition_reaches_every_stage() -> None:
    for name, d in ELEMENTWISE.items():
        checker = [p for p in PRIMS[name] if p.definition is d]
        assert len(checker) == 1, name
        assert "elementwise" in checker[0].traits and d.traits <= checker[0].traits
        assert OPS[d.graph_op].DEF is d, name  # type: ignore[attr-defined]
        if d.arity == 1:
            assert name in fold.UNARY
        assert d.vjp is not None and d.shard_factors is None  # vjp: derived or given (issue 12)


def test_expensive_is_a_trait_not_a_list() -> None:
    assert {"exp", "log", "tanh", "sigmoid", "gelu", "silu", "pow"} <= {
        n for n, d in ELEMENTWISE.items() if "expensive" in d.traits
    }
    assert not {"add", "neg", "relu", "square"} & {
        n for n, d in ELEMENTWISE.items() if "expensive" in d.traits
    }


@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_folder_and_interpreter_agree(name: str) -> None:
    """The Python-number and numpy algebras give one meaning (float64, to rounding)."""
    g = GraphBuilder(name)
    x = g.param("x", "f64", (len(POINTS),))
    got = evaluate(g.build(g.unary(name, x)), np.array(POINTS))[0]
    want = np.array([fold.UNARY[name](p) for p in POINTS])
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300, equal_nan=True)


@pytest.mark.parametrize("name", FLOAT_UNARY)
def test_every_float_primitive_lowers_for_the_gpu(name: str) -> None:
    g = GraphBuilder(name)
    x = g.param("x", "f32", (4, 8))
    lw = lower_graph_gpu(g.build(g.unary(name, x)))
    assert "define" in lw.llvm_ir and lw.functions


def test_folder_ieee_edges() -> None:
    """Domain errors and overflow give IEEE values, as the interpreter does (never raise)."""
    assert fold.UNARY["log"](0.0) == -math.inf and math.isnan(fold.UNARY["log"](-1.0))
    assert fold.UNARY["exp"](1e4) == math.inf and math.isnan(fold.UNARY["sqrt"](-4.0))
    assert math.isnan(fold.binary("max", math.nan, 1.0, True))  # NaN wins, as in the graph
    assert fold.binary("div", 7, 2, False) == 3.5 and fold.binary("add", 7, 2, False) == 9


def test_numpy_algebra_integer_semantics() -> None:
    alg = NumpyAlgebra()
    a, b = np.array([7, -7, 3], np.int32), np.array([2, 2, 0], np.int32)
    assert apply(ELEMENTWISE["div"], alg, [a, b]).tolist() == [3, -4, 0]
    assert apply(ELEMENTWISE["pow"], alg, [a, np.array([2, -1, 3], np.int32)]).tolist() == [
        49,
        0,
        27,
    ]


def test_neutral_package_imports_no_stage() -> None:
    code = (
        "import sys, kinac.prims; "
        "print(sorted(m for m in sys.modules if m.startswith(('kinac.', 'numpy', 'xdsl'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)  # a printed list of module names
    assert all(m.startswith("kinac.prims") or m == "kinac.errors" for m in loaded), loaded


@pytest.mark.parametrize("name", ["gelu", "sigmoid", "sin", "softplus"])
def test_gpu_f64_transcendentals_lower(name: str) -> None:
    """f64 transcendentals are generated code on the GPU (issue 18; accuracy:
    tests/test_gpu_f64.py), no longer refused."""
    g = GraphBuilder(name)
    x = g.param("x", "f64", (4,))
    assert "fma.f64" in lower_graph_gpu(g.build(g.unary(name, x))).llvm_ir


def test_no_module_copies_a_list_of_primitives() -> None:
    """A literal tuple/list/set/dict naming three or more elementwise primitives outside
    ``kinac/prims`` is a copy that drifts when a primitive is added. (The comparison names
    double as predicate and relation names elsewhere, so they are not counted.)"""
    import ast
    from pathlib import Path

    import kinac

    root = Path(kinac.__file__).parent
    names = set(ELEMENTWISE) - {"lt", "le", "gt", "ge", "eq"}
    copies = []
    for path in sorted(root.rglob("*.py")):
        if path.parent.name == "prims" and path.parent.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            elts = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if not isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict) or not elts:
                continue
            hits = [e.value for e in elts if isinstance(e, ast.Constant) and e.value in names]
            if len(hits) >= 3:
                copies.append(f"{path.relative_to(root)}:{node.lineno}: {hits}")
    assert not copies, "\n".join(copies)


def test_every_primitive_has_traits_and_empty_slots() -> None:
    """Later passes (sharding, autodiff, fusion) ask traits, never lists of names."""
    traits = {n: ps[0].traits for n, ps in PRIMS.items()}
    assert {"transpose", "reshape", "broadcast-to", "slice"} <= {
        n for n, t in traits.items() if "view" in t
    }
    assert "view" not in traits["gather"] and "view" not in traits["concat"]
    assert {"contraction", "expensive"} <= traits["matmul"]
    assert "reduction" in traits["sum"] and "reduction" in traits["softmax"]
    for ps in PRIMS.values():
        for p in ps:
            # the sharding issue filled every shard_rule (kinac/check/shard_factors.py), the
            # differentiation issue every vjp_rule (kinac/check/vjp_rules.py)
            assert p.family in p.traits and p.vjp_rule is not None and p.shard_rule is not None


def test_rank_zero_values_keep_their_shape() -> None:
    """bf16 rounding and reshape/broadcast-to in the reference interpreter keep a rank-0 value
    rank 0 (numpy's ascontiguousarray makes it rank 1; the GPU entry then refused [1] for [])."""
    import numpy as np

    from kinac.tir.interp import f32_to_bf16

    for x in (np.array(1.5, dtype=np.float32), np.float32(1.5), 1.5):
        assert f32_to_bf16(x).shape == ()  # type: ignore[arg-type]
    assert f32_to_bf16(np.ones((2, 3), np.float32)).shape == (2, 3)


def test_reshape_to_rank_zero_is_rank_zero_in_the_interpreter() -> None:
    import numpy as np
    from check_support import Workspace

    from kinac.check.sig import DefnRef
    from kinac.check.specialise import specialise
    from kinac.tir.interp import evaluate

    src = "(defn f [(x : (tensor bf16 [1 1]))] -> bf16 (reshape x []))\n"
    ws = Workspace({"p.kina": src})
    sp = specialise(DefnRef("p.kina", "f"), {}, {}, ws.env)
    assert sp.graph is not None
    (out,) = evaluate(sp.graph, np.array([[0x3FC0]], dtype=np.uint16))
    assert out.shape == ()
