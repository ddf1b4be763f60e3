"""Static arguments of primitives (axes, permutations, shapes, slice bounds, repeats, devices):
whatever a program writes there, the checker answers with diagnostics, never an exception.

Why a property test: the bugs here were IndexErrors behind one odd value (``iota`` with an
axis past its rank); generated programs cover every primitive's static keywords at once.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kinac.check import DefnRef, specialise
from kinac.check.concrete import ConcreteError, eval_all
from kinac.check.env import InMemoryEnv

SHAPES = ("[]", "[N]", "[N M]", "[2 N 3]", "[..b N]", "[..b N M]")
INTS = st.integers(-6, 6)


def _ints(n: int) -> st.SearchStrategy[str]:
    return st.lists(INTS, min_size=0, max_size=n).map(lambda xs: "[" + " ".join(map(str, xs)) + "]")


DIMS = st.sampled_from(["N", "M", "1", "2", "0", "-1", "(* N 2)", "(+ N M)", "K"])
TARGET = st.lists(DIMS, min_size=0, max_size=4).map(lambda xs: "[" + " ".join(xs) + "]")


@st.composite
def _call(draw: st.DrawFn) -> str:
    """One primitive call over ``x`` (and ``i``, an integer index tensor) with drawn statics."""
    ax = draw(INTS)
    kind = draw(st.integers(0, 14))
    if kind == 0:
        return f"(iota f32 {draw(TARGET)} :axis {ax})"
    if kind == 1:
        return f"(concat [x x] :axis {ax})"
    if kind == 2:
        return f"(slice x :axis {ax} :start {draw(INTS)} :stop {draw(INTS)})"
    if kind == 3:
        return f"(softmax x :axis {ax})"
    if kind == 4:
        op = draw(st.sampled_from(["sum", "mean", "max", "min"]))
        return f"({op} x :axis {ax} :keepdims {draw(st.sampled_from(['true', 'false']))})"
    if kind == 5:
        return f"(transpose x :perm {draw(_ints(5))})"
    if kind == 6:
        return f"(repeat-interleave x :repeats {draw(INTS)} :axis {ax})"
    if kind == 7:
        return f"(reshape x {draw(TARGET)})"
    if kind == 8:
        return f"(broadcast-to x {draw(TARGET)})"
    if kind == 9:
        return "(gather x i)"
    if kind == 10:
        return f"(full f32 {draw(TARGET)} {draw(INTS)})"
    if kind == 11:
        return f"(to-device x @cuda({ax}))"
    if kind == 12:
        return f"(slice x :axis {ax} :start N :stop (+ N {abs(draw(INTS))}))"
    if kind == 13:
        return f"(iota i32 {draw(TARGET)} :axis {ax} @cuda({draw(INTS)}))"
    return f"(cast x :to {draw(st.sampled_from(['f32', 'i32', 'bool', 'T', 'q']))})"


@settings(max_examples=300, deadline=None)
@given(
    shape=st.sampled_from(SHAPES),
    call=_call(),
    operand=st.sampled_from(["x", "x", "x", "2.5", "N", "i", "(neg 7)"]),
)
def test_static_arguments_give_diagnostics_never_exceptions(
    shape: str, call: str, operand: str
) -> None:
    # the operand may be a literal, a dim or an integer tensor instead of `x`
    call = call.replace(" x ", f" {operand} ").replace("[x x]", f"[x {operand}]")
    src = (
        f"(defn f [(x : (tensor f32 {shape})) (i : (tensor i32 [2]))] -> (tensor f32 [N])\n"
        f"  {call})\n"
    )
    env = InMemoryEnv.from_sources({"p.kina": src})
    pf = env.file("p.kina")
    assert pf is not None
    if pf.diagnostics:
        return
    checked = env.checked(DefnRef("p.kina", "f"))
    # the concrete interpreter reads the same statics: failures are ConcreteErrors, collected
    _out, fails = eval_all("p.kina", pf.defns[0], {"N": 3, "M": 2, "..b": (2,)}, {}, env)
    assert all(isinstance(f, ConcreteError) for f in fails)
    for d in checked.diagnostics:
        assert d.code.startswith("K"), d
    if checked.body is not None and "..b" not in shape:
        dims = {"N": 3, "M": 2}
        spec = specialise(DefnRef("p.kina", "f"), dims, {}, env)
        for d in spec.diagnostics:
            assert d.code.startswith("K"), d


def _codes(src: str) -> list[str]:
    env = InMemoryEnv.from_sources({"p.kina": src})
    return [d.code for d in env.checked(DefnRef("p.kina", "f")).diagnostics]


def test_iota_axis_out_of_range_is_k0405() -> None:
    src = "(defn f [(x : (tensor f32 [N]))] -> (tensor f32 [N])\n  (iota f32 [N] :axis 3))\n"
    assert _codes(src) == ["K0405"]
