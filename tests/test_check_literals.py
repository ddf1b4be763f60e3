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


def test_literals_out_of_range_are_k0604() -> None:
    src = (
        "(defn a [(x : (tensor i32 [N]))] -> (tensor bool [N]) (lt x 3000000000))\n"
        "(defn b [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (full i32 [N] 3000000000))\n"
        "(defn c [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (add x 1e39))\n"
        "(defn d [(x : (tensor f16 [N]))] -> (tensor f16 [N]) (mul x 70000))\n"
        "(defn e [(s : i32)] -> i32 s)\n"
        "(defn f [] -> i32 (e 3000000000))\n"
        "(defn g [] -> i32 3000000000)\n"
        "(defn h [] -> i32 (cast -2147483649 :to i32))\n"
        "(defn k [(x : (tensor bool [N]))] -> (tensor bool [N]) (eq x 2))\n"
    )
    env = _env(src)
    for name in "abcdfghk":
        assert _codes(env, name) == ["K0604"], name


def test_literals_in_range_and_named_constants_are_fine() -> None:
    src = (
        "(defn a [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (add x -2147483648))\n"
        "(defn b [(x : (tensor i64 [N]))] -> (tensor bool [N]) (lt x 3000000000))\n"
        "(defn c [(x : (tensor f16 [N]))] -> (tensor f16 [N]) (mul x 65504))\n"
        "(defn d [(x : (tensor bf16 [N]))] -> (tensor bf16 [N]) (add x -inf))\n"
        "(defn e [(x : (tensor f64 [N]))] -> (tensor f64 [N]) (mul x 1e300))\n"
    )
    env = _env(src)
    for name in "abcde":
        assert _codes(env, name) == [], name


def test_a_dim_used_as_a_narrow_value_is_an_obligation() -> None:
    src = (
        "(defn a [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (add x N))\n"
        "(defn b [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (where (<= N 1000)) (add x N))\n"
        "(defn c [(x : (tensor i64 [N]))] -> (tensor i64 [N]) (add x N))\n"
        "(defn d [(x : (tensor f16 [N]))] -> (tensor f16 [N]) (mul x N))\n"
        "(defn e [(x : (tensor f32 [N]))] -> (tensor i32 [N]) (full i32 [N] N))\n"
    )
    env = _env(src)
    a = env.checked(DefnRef("p.kina", "a")).diagnostics
    assert [d.code for d in a] == ["K0605"]
    assert a[0].counterexample == (("N", 2147483648),)
    assert _codes(env, "b") == [] and _codes(env, "c") == []
    d = env.checked(DefnRef("p.kina", "d")).diagnostics
    assert [x.code for x in d] == ["K0605"] and d[0].counterexample == (("N", 65520),)
    assert _codes(env, "e") == ["K0605"]


def test_specialisation_judges_literals_that_met_a_dtype_variable() -> None:
    env = _env("(defn o [(x : (tensor T [N]))] -> (tensor T [N]) (mul x 1e39))\n")
    assert _codes(env, "o") == []
    ref = DefnRef("p.kina", "o")
    bad = specialise(ref, {"N": 3}, {"T": "f32"}, env)
    assert bad.graph is None and [d.code for d in bad.diagnostics] == ["K0604"]
    assert specialise(ref, {"N": 3}, {"T": "f64"}, env).graph is not None


def test_folded_literals_are_judged_when_materialised() -> None:
    env = _env("(defn f [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (add x (mul 65536 65536)))\n")
    spec = specialise(DefnRef("p.kina", "f"), {"N": 2}, {}, env)
    assert spec.graph is None and [d.code for d in spec.diagnostics] == ["K0604"]


def test_an_iota_that_counts_past_its_dtype_fails_at_specialisation() -> None:
    env = _env("(defn a [(x : (tensor f32 [N]))] -> (tensor f16 [N]) (iota f16 [N] :axis 0))\n")
    assert _codes(env, "a") == []  # a bound would be a burden on every causal mask
    ref = DefnRef("p.kina", "a")
    bad = specialise(ref, {"N": 70000}, {}, env)
    assert bad.graph is None and [d.code for d in bad.diagnostics] == ["K0605"]
    assert specialise(ref, {"N": 65520}, {}, env).graph is not None


def test_let_bound_literals_and_dims_are_judged_where_they_meet_a_dtype() -> None:
    src = (
        "(defn a [(x : (tensor i32 [N]))] -> (tensor i32 [N])\n"
        "  (let [(c 3000000000)] (add x c)))\n"
        "(defn b [(x : (tensor i32 [N]))] -> (tensor i32 [N]) (let [(n N)] (add x n)))\n"
        "(defn c [(x : (tensor i64 [N]))] -> (tensor i64 [N]) (let [(c 3000000000)] (add x c)))\n"
        "(defn d [(x : (tensor i32 [N]))] -> (tensor i32 [N])\n"
        "  (let [(c 3000000000) (c 7)] (add x c)))\n"
    )
    env = _env(src)
    assert _codes(env, "a") == ["K0604"]
    assert _codes(env, "b") == ["K0605"]
    assert _codes(env, "c") == [] and _codes(env, "d") == []
