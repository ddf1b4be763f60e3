"""A call never fixes a callee's dim to 0 or less (issue 15): every dimension variable a call
determines, whatever it is solved from (a parameter's dim, a ``where`` equality, a ``dim``
parameter, a variadic group's dims), is proved >= 1 under the caller's assumptions, or the call
is refused with a counterexample; the same holds for concrete bindings (Python calls, kina.toml
entries), where a zero or negative dim is a diagnostic, never a silent binding."""

from __future__ import annotations

import itertools
import random

from check_support import Workspace
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinac.check import DefnRef, bind_call_types, specialise
from kinac.check import dims as D
from kinac.check.bind import CallBinding
from kinac.check.concrete import eval_all
from kinac.check.formula import holds
from kinac.check.sig import analyse
from kinac.diag.model import Diagnostic, NodeRef
from kinac.tir.graph import TType

CALLEES = """
(defn tail [(x : (tensor f32 [(+ A 1)]))] -> (tensor f32 [A])
  (slice x :axis 0 :start 1 :stop (+ A 1)))
(defn both [(x : (tensor f32 [(+ A B)])) (y : (tensor f32 [B]))] -> (tensor f32 [A])
  (slice x :axis 0 :start 0 :stop A))
(defn split [(x : (tensor f32 [D])) (y : (tensor f32 [H]))] -> (tensor f32 [Dh])
  (where (= D (+ H Dh)))
  (slice x :axis 0 :start H :stop D))
(defn heads [(x : (tensor f32 [D])) (H : dim)] -> (tensor f32 [H Dh])
  (where (= D (* H Dh)))
  (reshape x [H Dh]))
(defn id [(x : (tensor f32 [N]))] -> (tensor f32 [N]) x)
(defn dp [(H : dim) (x : (tensor f32 [N]))] -> (tensor f32 [N]) x)
(defn grp [(x : (tensor f32 [..b N]))] -> (tensor f32 [..b N]) x)
"""


def _check(body: str) -> tuple[Workspace, list[Diagnostic]]:
    ws = Workspace({"p.kina": CALLEES + body})
    diags = list(ws.env.checked(DefnRef("p.kina", "use")).diagnostics)
    return ws, diags


def _errors(diags: list[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.is_error]


def _assert_breaks_concretely(ws: Workspace, d: Diagnostic) -> None:
    """The counterexample satisfies the caller's assumptions and the program fails there."""
    assert d.counterexample is not None, d.message
    loc = d.primary.loc
    assert isinstance(loc, NodeRef)
    defn = ws.env.defn(DefnRef(loc.file, loc.defn))
    assert defn is not None
    sig = analyse(loc.file, defn.signature)
    env = dict(d.counterexample)
    for v in sig.dim_vars:
        env.setdefault(v, 1)
    assert all(holds(r, env) for r in sig.assumptions), (d.message, env)
    _out, fails = eval_all(loc.file, defn, env, {}, ws.env)
    assert fails, (d.message, env)


def test_tail_of_a_length_one_tensor_is_refused() -> None:
    ws, diags = _check(
        "(defn use [(y : (tensor f32 [1]))] -> (tensor f32 [1])\n  (let [(t (tail y))] y))\n"
    )
    errs = _errors(diags)
    assert [d.code for d in errs] == ["K0408"], ws.render(diags)
    assert "`A` of `tail`" in errs[0].message and "at least 1" in errs[0].message


def test_sum_of_dims_with_equal_lengths_is_refused_for_every_length() -> None:
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [N])) (b : (tensor f32 [N]))] -> (tensor f32 [N])\n"
        "  (let [(t (both a b))] a))\n"
    )
    errs = _errors(diags)
    assert [d.code for d in errs] == ["K0408"], ws.render(diags)
    assert "`A` of `both`" in errs[0].message
    _assert_breaks_concretely(ws, errs[0])


def test_where_equality_fixing_zero_is_refused() -> None:
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [N]))] -> (tensor f32 [N])\n  (let [(t (split a a))] a))\n"
    )
    errs = _errors(diags)
    assert [d.code for d in errs] == ["K0409"], ws.render(diags)
    assert "`Dh` of `split`" in errs[0].message and "at least 1" in errs[0].message
    _assert_breaks_concretely(ws, errs[0])


def test_product_equality_below_one_is_refused_once() -> None:
    # H = 256 > D = 128 would make Dh = 128/256: refused as a divisibility (which, D being
    # positive, implies Dh >= 1, so the bound is not reported a second time)
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [128]))] -> (tensor f32 [128])\n"
        "  (let [(t (heads a 256))] a))\n"
    )
    assert [d.code for d in _errors(diags)] == ["K0410"], ws.render(diags)
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [(+ N 1)]))] -> (tensor f32 [(+ N 1)])\n"
        "  (let [(t (heads (tail a) 2))] a))\n"
    )
    assert [d.code for d in _errors(diags)] == ["K0410"], ws.render(diags)


def test_dims_that_stay_positive_are_accepted() -> None:
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [(+ N 1)])) (b : (tensor f32 [(+ N 2)]))\n"
        "           (c : (tensor f32 [(* 4 M)]))] -> (tensor f32 [N])\n"
        "  (let [(t (split b a)) (h (heads c 4))] (tail a)))\n"
    )
    assert _errors(diags) == [], ws.render(diags)


def test_positive_under_the_callers_where_clause() -> None:
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [N])) (b : (tensor f32 [M]))] -> (tensor f32 [N])\n"
        "  (where (< M N))\n  (let [(t (split a b))] a))\n"
    )
    assert _errors(diags) == [], ws.render(diags)
    ws, diags = _check(
        "(defn use [(a : (tensor f32 [N])) (b : (tensor f32 [M]))] -> (tensor f32 [N])\n"
        "  (where (<= M N))\n  (let [(t (split a b))] a))\n"
    )
    errs = _errors(diags)
    assert [d.code for d in errs] == ["K0409"], ws.render(diags)
    assert dict(errs[0].counterexample or ()) in ({"N": 1, "M": 1}, {"M": 1, "N": 1})


# ---------------------------------------------------------------- concrete bindings


def _sig(ws: Workspace, name: str):  # noqa: ANN202 - an ast.Signature
    pf = ws.env.file("p.kina")
    assert pf is not None
    return next(d.signature for d in pf.defns if d.name == name)


def _bind(name: str, shapes: list[tuple[int, ...]], dims: dict[str, int] | None = None):  # noqa: ANN202
    ws = Workspace({"p.kina": CALLEES})
    args = tuple(TType("f32", s, "cpu") for s in shapes)
    return bind_call_types("p.kina", _sig(ws, name), args, dims)


def _refused(r: CallBinding | tuple[Diagnostic, ...], needle: str) -> None:
    assert isinstance(r, tuple), f"accepted: {r}"
    assert all(d.code == "K0801" for d in r), r
    assert any(needle in d.message for d in r), [d.message for d in r]


def test_python_call_with_an_empty_array_is_refused() -> None:
    _refused(_bind("id", [(0,)]), "`N` of `id`")
    _refused(_bind("tail", [(1,)]), "`A` of `tail`")
    _refused(_bind("grp", [(0, 3)]), "group `..b`")
    _refused(_bind("split", [(3,), (3,)]), "`Dh` of `split`")
    _refused(_bind("heads", [(0,)], {"H": 3}), "`D` of `heads`")


def test_python_call_with_a_non_positive_dim_parameter_is_refused() -> None:
    _refused(_bind("dp", [(3,)], {"H": 0}), "`H` of `dp`")
    _refused(_bind("dp", [(3,)], {"H": -2}), "`H` of `dp`")
    ok = _bind("dp", [(3,)], {"H": 2})
    assert isinstance(ok, CallBinding) and dict(ok.dims) == {"H": 2, "N": 3}


def test_entry_with_a_non_positive_group_dim_is_refused() -> None:
    ws = Workspace({"p.kina": CALLEES})
    for bad in ((0,), (-1,), (2, 0)):
        sp = specialise(DefnRef("p.kina", "grp"), {"..b": bad, "N": 2}, {}, ws.env)
        assert sp.graph is None, bad
        assert [d.code for d in sp.diagnostics] == ["K0802"], ws.render(sp.diagnostics)
        assert "`..b`" in sp.diagnostics[0].message
    sp = specialise(DefnRef("p.kina", "grp"), {"..b": (2, 3), "N": 2}, {}, ws.env)
    assert sp.graph is not None, ws.render(sp.diagnostics)


# ---------------------------------------------------------------- property: calls vs an oracle

# Callees whose dims a call fixes in every way the plan knows: alone, a sum with a constant,
# a multiple, a sum of two variables, a where equality.
ORACLE_CALLEES = """
(defn c-plus [(x : (tensor f32 [(+ A 2)]))] -> (tensor f32 [A])
  (slice x :axis 0 :start 2 :stop (+ A 2)))
(defn c-times [(x : (tensor f32 [(+ (* 2 A) 1)]))] -> (tensor f32 [A])
  (slice x :axis 0 :start 0 :stop A))
(defn c-sum [(x : (tensor f32 [(+ A B)])) (y : (tensor f32 [B]))] -> (tensor f32 [A])
  (slice x :axis 0 :start 0 :stop A))
(defn c-where [(x : (tensor f32 [D])) (y : (tensor f32 [H]))] -> (tensor f32 [Dh])
  (where (= D (+ H Dh)))
  (slice x :axis 0 :start H :stop D))
"""
ARG_DIMS = ["N", "M", "1", "2", "3", "(+ N 1)", "(+ N 2)", "(* 2 N)", "(+ N M)", "(+ M 1)"]
CALLER_WHERE = ["", "(where (< M N))", "(where (<= M N))", "(where (> N 2))", "(where (= M 2))"]


def _oracle_binds(ws: Workspace, callee: str, shapes: list[int]) -> bool:
    """Whether some callee dims in 1..12 give exactly ``shapes`` and meet its where clause:
    brute force over the signature, independent of the checker's plan."""
    pf = ws.env.file("p.kina")
    assert pf is not None
    sig = analyse("p.kina", next(d.signature for d in pf.defns if d.name == callee))
    dims = [p.type.shape.dims[0] for p in sig.params if p.type is not None]
    names = sig.dim_vars
    for vals in itertools.product(range(1, 13), repeat=len(names)):
        env = dict(zip(names, vals, strict=True))
        if [D.evaluate(d, env) for d in dims] == shapes and all(
            holds(r, env) for r in sig.assumptions
        ):
            return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_calls_agree_with_a_brute_force_oracle(seed: int) -> None:
    r = random.Random(seed)
    callee = r.choice(["c-plus", "c-times", "c-sum", "c-where"])
    n_args = 1 if callee in ("c-plus", "c-times") else 2
    arg_dims = [r.choice(ARG_DIMS) for _ in range(n_args)]
    where = r.choice(CALLER_WHERE)
    params = " ".join(f"(a{i} : (tensor f32 [{d}]))" for i, d in enumerate(arg_dims))
    carriers = "(n : (tensor f32 [N])) (m : (tensor f32 [M]))"  # N and M are always bound
    body = f"(let [(t ({callee} {' '.join(f'a{i}' for i in range(n_args))}))] a0)"
    src = (
        ORACLE_CALLEES
        + f"(defn use [{params} {carriers}] -> (tensor f32 [{arg_dims[0]}])\n"
        + f"  {where}\n  {body})\n"
    )
    ws = Workspace({"p.kina": src})
    c = ws.env.checked(DefnRef("p.kina", "use"))
    caller = analyse("p.kina", ws.env.defn(DefnRef("p.kina", "use")).signature)  # type: ignore[union-attr]
    arg_polys = [p.type.shape.dims[0] for p in caller.params if p.type is not None][:n_args]
    envs = [
        dict(zip(caller.dim_vars, v, strict=True))
        for v in itertools.product(range(1, 7), repeat=len(caller.dim_vars))
    ]
    envs = [e for e in envs if all(holds(a, e) for a in caller.assumptions)]
    if c.ok:
        for env in envs:
            shapes = [D.evaluate(p, env) for p in arg_polys]
            assert _oracle_binds(ws, callee, shapes), (src, env, shapes)
        return
    errs = [d for d in c.diagnostics if d.is_error]
    assert errs and all(d.code in ("K0408", "K0409", "K0410") for d in errs), (src, errs)
    for d in errs:
        if d.counterexample is None:  # a ground refutation: it fails at every env
            assert all(
                not _oracle_binds(ws, callee, [D.evaluate(p, e) for p in arg_polys]) for e in envs
            ), (src, d.message)
            continue
        cex = dict(d.counterexample)
        at = [e for e in envs if all(e[k] == v for k, v in cex.items() if k in e)]
        assert at, (src, d.message, cex)
        assert not _oracle_binds(ws, callee, [D.evaluate(p, at[0]) for p in arg_polys]), (
            src,
            d.message,
            cex,
        )
