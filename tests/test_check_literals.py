"""Literals and their dtypes: a weak literal takes the dtype a tensor fixes (also through a
dtype variable of a callee), and a literal that does not fit its dtype is a type error."""

from __future__ import annotations

from kinac.check import DefnRef, specialise
from kinac.check.concrete import eval_defn
from kinac.check.env import InMemoryEnv

SCALE = """
(defn scale [(x : (tensor T [N])) (s : T)] -> (tensor T [N])
  (mul x s))
(defn scale-first [(s : T) (x : (tensor T [N]))] -> (tensor T [N])
  (mul x s))
(defn alone [(s : T)] -> T s)
"""


def _env(src: str) -> InMemoryEnv:
    env = InMemoryEnv.from_sources({"p.kina": src})
    pf = env.file("p.kina")
    assert pf is not None and not pf.diagnostics, pf and pf.diagnostics
    return env


def _codes(env: InMemoryEnv, name: str) -> list[str]:
    return [d.code for d in env.checked(DefnRef("p.kina", name)).diagnostics]


def test_weak_literal_does_not_fix_a_dtype_variable_a_tensor_fixes() -> None:
    src = SCALE + (
        "(defn u [(x : (tensor f64 [N]))] -> (tensor f64 [N]) (scale x 0.5))\n"
        "(defn v [(x : (tensor bf16 [N]))] -> (tensor bf16 [N]) (scale-first 2 x))\n"
    )
    env = _env(src)
    for name, dt in (("u", "f64"), ("v", "bf16")):
        assert _codes(env, name) == []
        ref = DefnRef("p.kina", name)
        d = env.defn(ref)
        assert d is not None
        assert eval_defn("p.kina", d, {"N": 3}, {}, env).dtype == dt
        spec = specialise(ref, {"N": 3}, {}, env)
        assert spec.graph is not None
        assert {n.type.dtype for n in spec.graph.nodes} == {dt}


def test_weak_literal_alone_fixes_a_dtype_variable_to_f32() -> None:
    env = _env(SCALE + "(defn w [] -> f32 (alone 0.5))\n(defn w64 [] -> f64 (alone 0.5))\n")
    assert _codes(env, "w") == []
    assert _codes(env, "w64") == ["K0411"]


def test_dtype_variable_still_rejects_integers_and_mixed_tensors() -> None:
    src = SCALE + (
        "(defn i [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (scale x 2))\n"
        "(defn m [(x : (tensor f64 [N])) (y : f32)] -> (tensor f64 [N]) (scale x y))\n"
    )
    env = _env(src)
    assert _codes(env, "i") == ["K0602"]
    assert _codes(env, "m") == ["K0601"]
