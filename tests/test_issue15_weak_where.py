"""Issue 15: a ``where`` of weak operands stays weak (spec §4: a literal takes the dtype of the
tensor it meets). ``(add x (where c 1 2))`` with ``x : i32`` was rejected (K0601: the
``where`` was typed f32). Checked by the checker, the concrete interpreter, specialisation
(the ``where`` is built at the dtype it meets) and a run; alone it is still f32, and a
primitive outside the elementwise family (a reduction) takes it as f32."""

from __future__ import annotations

import numpy as np
import pytest

import kinac
from kinac.check import DefnRef, specialise
from kinac.check.concrete import eval_defn
from kinac.check.env import InMemoryEnv

SRC = """
(defn meets-i32 [(x : (tensor i32 [N])) (c : (tensor bool [N]))] -> (tensor i32 [N])
  (add x (where c 1 2)))
(defn returned [(c : (tensor bool [N]))] -> (tensor i64 [N])
  (where c 1 2))
(defn alone [(c : (tensor bool [N]))] -> (tensor f32 [N])
  (add (where c 1 2) 1))
(defn nested [(x : (tensor f64 [N])) (c : (tensor bool [N]))] -> (tensor f64 [N])
  (mul x (where c 1.5 (where c 2 3))))
(defn reduced [(c : (tensor bool [N]))] -> (tensor f32 [])
  (sum (where c 1 2) :axis 0))
(defn passed [(c : (tensor bool [N]))] -> (tensor i64 [N])
  (inc (where c 1 2)))
(defn inc [(x : (tensor i64 [N]))] -> (tensor i64 [N]) (add x 1))
(defn max-of-literals [(x : (tensor i32 [N]))] -> (tensor i32 [N])
  (add x (max 1 (min 2 3))))
"""
BAD_SRC = """
(defn too-big [(x : (tensor i32 [N])) (c : (tensor bool [N]))] -> (tensor i32 [N])
  (add x (where c 3000000000 2)))
(defn float-meets-int [(x : (tensor i32 [N])) (c : (tensor bool [N]))] -> (tensor i32 [N])
  (add x (where c 1.5 2)))
(defn reduced-meets-int [(x : (tensor i32 [])) (c : (tensor bool [N]))] -> (tensor i32 [])
  (add x (sum (where c 1 2) :axis 0)))
"""
GOOD = {  # defn -> (result dtype, arguments, expected values)
    "meets-i32": ("i32", ("x", "c"), [11, 22, 31]),
    "returned": ("i64", ("c",), [1, 2, 1]),
    "alone": ("f32", ("c",), [2.0, 3.0, 2.0]),
    "nested": ("f64", ("xf", "c"), [15.0, 60.0, 45.0]),
    "reduced": ("f32", ("c",), 4.0),
    "passed": ("i64", ("c",), [2, 3, 2]),
    "max-of-literals": ("i32", ("x",), [12, 22, 32]),
}
ARGS = {
    "x": np.array([10, 20, 30], np.int32),
    "xf": np.array([10.0, 20.0, 30.0]),
    "c": np.array([True, False, True]),
}
BAD = {"too-big": "K0604", "float-meets-int": "K0603", "reduced-meets-int": "K0601"}


@pytest.fixture(scope="module")
def env() -> InMemoryEnv:
    return InMemoryEnv.from_sources({"p.kina": SRC + BAD_SRC})


@pytest.mark.parametrize("name", sorted(GOOD))
def test_weak_where_takes_the_dtype_it_meets(env: InMemoryEnv, name: str) -> None:
    dtype = GOOD[name][0]
    ref = DefnRef("p.kina", name)
    checked = env.checked(ref)
    assert checked.ok, [d.message for d in checked.diagnostics]
    d = env.defn(ref)
    assert d is not None
    assert eval_defn("p.kina", d, {"N": 3}, {}, env).dtype == dtype
    spec = specialise(ref, {"N": 3}, {}, env)
    assert spec.graph is not None, [x.message for x in spec.diagnostics]
    assert spec.graph.nodes[spec.graph.outputs[0]].type.dtype == dtype


@pytest.mark.parametrize("name", sorted(BAD))
def test_weak_where_literals_still_judged(env: InMemoryEnv, name: str) -> None:
    assert [d.code for d in env.checked(DefnRef("p.kina", name)).diagnostics] == [BAD[name]]


def test_weak_where_runs(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "p.kina"
    path.write_text(SRC)
    for name, (dtype, args, want) in GOOD.items():
        out = np.asarray(kinac.compile(path, name, no_cache=True)(*(ARGS[a] for a in args)))
        assert out.dtype == np.dtype(
            {"f32": "float32", "f64": "float64"}.get(dtype, dtype.replace("i", "int"))
        ), name
        np.testing.assert_allclose(out, want, err_msg=name)  # type: ignore[call-overload]
