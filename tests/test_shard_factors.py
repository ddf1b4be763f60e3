"""Factor rules in the primitive registry and what the generic propagation makes of them:
one small program per rule (softmax, slice, concat, gather over a split axis; reductions;
contraction; reshape split/merge; reduce-scatter), each checked for its layouts and
planned collectives."""

from __future__ import annotations

from pathlib import Path

import pytest

from kinac import pipeline
from kinac.check.shard_factors import reshape_factors
from kinac.pipeline_support import EntryKey
from kinac.session import Session


def plan(
    tmp_path: Path,
    params: str,
    ret: str,
    body: str,
    dims: dict[str, int],
    mesh: str = "(mesh tp [2])",
):
    (tmp_path / "m.kina").write_text(f"{mesh}\n(defn f [{params}] -> {ret}\n  {body})\n")
    db = Session(tmp_path / "m.kina", no_cache=True).db
    key = EntryKey("m.kina", "f", tuple(sorted(dims.items())), (), "cpu")
    spec = pipeline.entry_graph(db, key)
    assert spec.graph is not None, spec.diagnostics
    p = pipeline.shard_propagate(db, key)
    assert not [d for d in p.diagnostics if d.is_error], p.diagnostics
    return spec.graph, p


def kinds(p) -> list[tuple[str, str]]:
    return [(c.kind, c.axis) for c in p.collectives]


def test_every_primitive_declares_its_factors() -> None:
    from kinac.check.prims import PRIMS

    assert [n for n, ps in PRIMS.items() for q in ps if q.shard_rule is None] == []


def test_reshape_factors_split_merge_and_refuse() -> None:
    sizes, src, dst = reshape_factors((4, 256), (4, 4, 64))  # type: ignore[misc]
    assert sizes == [4, 4, 64] and src == ((0,), (1, 2)) and dst == ((0,), (1,), (2,))
    sizes, src, dst = reshape_factors((2, 3, 4), (6, 4))  # type: ignore[misc]
    assert src == ((0,), (1,), (2,)) and dst == ((0, 1), (2,))
    assert reshape_factors((6, 4), (4, 6)) is None


X = "(x : (tensor f32 [N D] @sharded(axis={a}, mesh=tp)))"


@pytest.mark.parametrize(
    ("body", "ret", "axis", "want"),
    [
        ("(softmax x :axis 1)", "[N 8]", 1, [("all-gather", "tp")]),  # over the split axis
        ("(softmax x :axis 1)", "[N 8]", 0, []),  # over the other one: local
        ("(slice x :axis 1 :start 0 :stop 4)", "[N 4]", 0, []),
        ("(concat [x x] :axis 0)", "[(* 2 N) 8]", 1, []),
        (
            "(concat [x x] :axis 0)",
            "[(* 2 N) 8]",
            0,
            [("all-gather", "tp")],
        ),  # once, though read twice
        ("(repeat-interleave x :repeats 2 :axis 1)", "[N 16]", 1, []),  # the input is major
    ],
)
def test_whole_axis_rules(tmp_path: Path, body: str, ret: str, axis: int, want: list) -> None:
    x = f"(x : (tensor f32 [N 8] @sharded(axis={axis}, mesh=tp)))"
    _, p = plan(tmp_path, x, f"(tensor f32 {ret})", body, {"N": 4})
    assert kinds(p) == want


def test_slice_along_the_split_axis_gathers(tmp_path: Path) -> None:
    x = "(x : (tensor f32 [N 8] @sharded(axis=1, mesh=tp)))"
    _, p = plan(tmp_path, x, "(tensor f32 [N 4])", "(slice x :axis 1 :start 0 :stop 4)", {"N": 4})
    assert kinds(p) == [("all-gather", "tp")]
    assert p.collectives[0].bytes == 4 * 8 * 4  # the whole f32 [4 8] afterwards


@pytest.mark.parametrize(
    ("red", "want"), [("sum", "all-reduce"), ("mean", "all-reduce"), ("max", "all-gather")]
)
def test_reductions_over_the_split_axis(tmp_path: Path, red: str, want: str) -> None:
    g, p = plan(tmp_path, X.format(a=1), "(tensor f32 [N])", f"({red} x :axis 1)", {"N": 4, "D": 8})
    assert kinds(p) == [(want, "tp")]
    out = p.layouts[g.outputs[0]]
    assert out.spec("tp") == ("P(sum)" if want == "all-reduce" else "R")


def test_contraction_then_split_consumer_is_a_reduce_scatter(tmp_path: Path) -> None:
    params = (
        "(a : (tensor f32 [M K] @sharded(axis=1, mesh=tp))) (b : (tensor f32 [K N] @sharded(axis=0, mesh=tp)))"
        " (c : (tensor f32 [M N] @sharded(axis=0, mesh=tp)))"
    )
    g, p = plan(
        tmp_path, params, "(tensor f32 [M N])", "(add (matmul a b) c)", {"M": 4, "K": 8, "N": 6}
    )
    assert kinds(p) == [("reduce-scatter", "tp")]
    assert p.collectives[0].bytes == 4 * 6 * 4  # the local partial, whole
    assert p.layouts[g.outputs[0]].spec("tp") == "S(0)"


def test_partial_flows_through_linear_ops(tmp_path: Path) -> None:
    params = "(a : (tensor f32 [M K] @sharded(axis=1, mesh=tp))) (b : (tensor f32 [K N] @sharded(axis=0, mesh=tp)))"
    g, p = plan(
        tmp_path,
        params,
        "(tensor f32 [N M])",
        "(neg (transpose (matmul a b) :perm [1 0]))",
        {"M": 4, "K": 8, "N": 6},
    )
    assert kinds(p) == [("all-reduce", "tp")] and p.collectives[0].consumer == -1  # at the output


def test_reshape_merge_keeps_the_major_split(tmp_path: Path) -> None:
    params = "(x : (tensor f32 [B H Dh] @sharded(axis=1, mesh=tp)))"
    g, p = plan(
        tmp_path,
        params,
        "(tensor f32 [B (* H Dh)])",
        "(reshape x [B (* H Dh)])",
        {"B": 2, "H": 4, "Dh": 8},
    )
    assert p.collectives == () and p.layouts[g.outputs[0]].spec("tp") == "S(1)"
    params = "(x : (tensor f32 [B H Dh] @sharded(axis=2, mesh=tp)))"  # the minor factor
    g, p = plan(
        tmp_path,
        params,
        "(tensor f32 [B (* H Dh)])",
        "(reshape x [B (* H Dh)])",
        {"B": 2, "H": 4, "Dh": 8},
    )
    assert kinds(p) == [("all-gather", "tp")]


def test_gather_rows_are_whole_and_width_splits(tmp_path: Path) -> None:
    params = "(t : (tensor f32 [V D] @sharded(axis={a}, mesh=tp))) (i : (tensor i32 [N]))"
    _, p = plan(
        tmp_path, params.format(a=0), "(tensor f32 [N D])", "(gather t i)", {"V": 8, "D": 4, "N": 3}
    )
    assert kinds(p) == [("all-gather", "tp")]
    g, p = plan(
        tmp_path, params.format(a=1), "(tensor f32 [N D])", "(gather t i)", {"V": 8, "D": 4, "N": 3}
    )
    assert p.collectives == () and p.layouts[g.outputs[0]].spec("tp") == "S(1)"


@pytest.mark.parametrize(
    ("body", "consumer_op"),
    [("(mul x 2.0)", None), ("(exp x)", "exp"), ("(add x x)", None), ("(sub (exp x) x)", "exp")],
)
def test_a_pinned_partial_is_reduced_where_it_stops_being_linear(
    tmp_path: Path, body: str, consumer_op: str | None
) -> None:
    x = "(x : (tensor f32 [N 8] @partial(sum, mesh=tp)))"
    g, p = plan(tmp_path, x, "(tensor f32 [N 8])", body, {"N": 4})
    assert kinds(p) == [("all-reduce", "tp")]
    c = p.collectives[0]
    assert (g.nodes[c.consumer].op if c.consumer >= 0 else None) == consumer_op


def test_a_gathered_copy_serves_every_later_use(tmp_path: Path) -> None:
    x = "(x : (tensor f32 [N 8] @sharded(axis=1, mesh=tp)))"
    body = "(add (softmax x :axis 1) (slice (concat [x x] :axis 1) :axis 1 :start 0 :stop 8))"
    _, p = plan(tmp_path, x, "(tensor f32 [N 8])", body, {"N": 4})
    assert kinds(p) == [("all-gather", "tp")]


def test_a_partial_meeting_a_split_is_reduce_scattered_not_sliced(tmp_path: Path) -> None:
    """x is partial over tp, y split over tp: x's slice would be a slice of one device's
    share, not of the sum, so x is reduce-scattered although mul is linear in it."""
    params = (
        "(x : (tensor f32 [N 8] @partial(sum, mesh=tp)))"
        " (y : (tensor f32 [N 8] @sharded(axis=0, mesh=tp)))"
    )
    g, p = plan(tmp_path, params, "(tensor f32 [N 8])", "(mul x y)", {"N": 4})
    assert kinds(p) == [("reduce-scatter", "tp")]
    out = p.layouts[g.outputs[0]]
    assert out.spec("tp") == "S(0)" and out.partial == ()


def test_a_partial_stays_partial_through_linear_ops_on_other_axes(tmp_path: Path) -> None:
    params = (
        "(x : (tensor f32 [N K] @partial(sum, mesh=grid, over=tp)))"
        " (w : (tensor f32 [K M] @sharded(axis=1, mesh=grid, over=dp)))"
    )
    body = "(mean (matmul x w) :axis 0)"
    g, p = plan(tmp_path, params, "(tensor f32 [M])", body, {"N": 4, "K": 8, "M": 6}, GRID)
    assert kinds(p) == [("all-reduce", "tp")] and p.collectives[0].consumer == -1
    assert p.layouts[g.outputs[0]].spec("dp") == "S(0)"


GRID = "(mesh grid [2 2] :axes [dp tp])"


def test_a_partial_cast_to_an_integer_is_reduced_first(tmp_path: Path) -> None:
    x = "(x : (tensor f32 [N 8] @partial(sum, mesh=tp)))"
    g, p = plan(tmp_path, x, "(tensor i32 [N 8])", "(cast x :to i32)", {"N": 4})
    (c,) = p.collectives
    assert (c.kind, c.consumer) == ("all-reduce", len(g.nodes) - 1)  # before the cast, not after
    assert p.layouts[g.outputs[0]].partial == ()
