"""The pieces of a cut are remembered in-process (``kinac.ir.pieces._MADE``): an entry graph
that shares node objects with one cut before gets the same pieces back, and the result is
always the one a fresh cut computes (issue 19: a one-layer edit no longer rebuilds the other
layers' pieces)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from kinac.ir import pieces as P
from kinac.ir.testing import block_graph, mlp_graph
from kinac.rules.codec import encode
from kinac.tir.graph import Graph, Node


def _everywhere(g: Graph) -> tuple[tuple[int, int], ...]:
    return tuple((p, p) for p in range(len(g.nodes)))


def _fresh(g: Graph) -> tuple[P.Piece, ...]:
    saved = dict(P._MADE)
    P._MADE.clear()
    try:
        return P.cut(g, _everywhere(g))
    finally:
        P._MADE.clear()
        P._MADE.update(saved)


def _stitched_before_and_after_an_edit(stitched: Callable[..., Any]) -> tuple[Any, Any, Any]:
    """The block graph through ``stitched``; then, its last node's op changed, stitched again
    (with what the first stitch remembered) and fresh (``fresh=True``: nothing remembered)."""
    g = block_graph(2, 8, 16)
    first = stitched(g)
    last = g.nodes[-1]
    edited = replace(last, op="sub" if last.op != "sub" else "add")
    g2 = Graph(g.name, g.params, (*g.nodes[:-1], edited), g.outputs)
    return first, stitched(g2), stitched(g2, fresh=True)


@pytest.mark.parametrize("make", [lambda: block_graph(2, 8, 16), lambda: mlp_graph(2, 8, 16, 32)])
def test_an_edited_graph_reuses_the_unchanged_pieces_and_equals_a_fresh_cut(make) -> None:  # type: ignore[no-untyped-def]
    g = make()
    first = P.cut(g, _everywhere(g))
    assert first == _fresh(g)
    # the same node objects with the last node replaced (an edit at the end of the entry):
    # every piece before it is the remembered object, the rest equal a fresh cut's
    last = g.nodes[-1]
    edited = replace(last, op="sub" if last.op != "sub" else "add")
    g2 = Graph(g.name, g.params, (*g.nodes[:-1], edited), g.outputs)
    second = P.cut(g2, _everywhere(g2))
    assert second == _fresh(g2)
    assert second != first
    same = [a is b for a, b in zip(first, second, strict=False)]
    assert any(same) and not same[-1]
    # equal but not the same node objects: rebuilt (a hit needs the very objects), still equal
    g3 = Graph(g.name, g.params, tuple(replace(n) for n in g.nodes), g.outputs)
    third = P.cut(g3, _everywhere(g3))
    assert third == first and all(a is not b for a, b in zip(first, third, strict=True))


def test_a_piece_whose_inputs_changed_type_is_rebuilt() -> None:
    """Same body nodes, but a value read from before the piece now has another type: the
    piece's params differ, so the remembered piece must not be returned."""
    g = block_graph(2, 8, 16)
    n0 = P.cut(g, _everywhere(g))
    # retype param 0 (its node object changes; the body nodes after it stay the same objects)
    p0 = g.nodes[0]
    other = replace(p0.type, dtype="f64")
    nodes = (Node(p0.op, p0.args, p0.attrs, other), *g.nodes[1:])
    params = ((g.params[0][0], other), *g.params[1:])
    g2 = Graph(g.name, params, nodes, g.outputs)
    again = P.cut(g2, _everywhere(g2))
    assert again == _fresh(g2)
    readers = [i for i, p in enumerate(again) if 0 in p.inputs]
    assert readers and all(again[i] != n0[i] for i in readers)


def test_a_restitched_entry_reuses_the_unchanged_steps_and_equals_a_fresh_stitch() -> None:
    """``kinac.ir.host.stitch._MADE``: a stitch after an edit at the end of the entry gives
    back the steps (and param specs) the previous stitch made, the very objects (so the codec
    reuses their text), and the same entry a stitch with nothing remembered makes."""
    from kinac.ir.host import stitch as S
    from kinac.ir.host.kernels import lower_piece
    from kinac.rules.codec import encode

    def stitched(g: Graph, fresh: bool = False):  # type: ignore[no-untyped-def]
        saved = dict(S._MADE)
        if fresh:
            S._MADE.clear()
        try:
            ps = P.cut(g, _everywhere(g))
            return S.stitch(g, [(p.inputs, p.outputs) for p in ps],
                            [lower_piece(p.graph) for p in ps], separate=True)  # fmt: skip
        finally:
            if fresh:
                S._MADE.clear()
                S._MADE.update(saved)

    first, second, fresh = _stitched_before_and_after_an_edit(stitched)
    assert second == fresh and encode(second) == encode(fresh) and second != first
    # a step names its kernel by index, not text: here every step equals the previous one,
    # and each equal step is the previous object
    assert all(a is b for a, b in zip(first.steps, second.steps, strict=True))
    assert first.kernel_set != second.kernel_set
    assert all(a is b for a, b in zip(first.params, second.params, strict=True))
    assert all(a is not b for a, b in zip(second.steps, fresh.steps, strict=True))


def test_a_restitched_gpu_entry_reuses_the_unchanged_steps_and_equals_a_fresh_stitch() -> None:
    """``kinac.ir.gpu.stitch._STEPS`` / ``_LINKED``: the GPU steps (launches bound) of pieces
    lowered before (the same piece kernels and kernel code, as the engine's memos give them)
    are the previous stitch's objects; the entry equals one stitched with nothing remembered."""
    from kinac.ir.gpu import stitch as G
    from kinac.ir.gpu.kernel_split import lower_gpu_kernel
    from kinac.ir.gpu.pipeline import lower_gpu_piece

    pieces_of: dict[Graph, object] = {}  # as the gpu_piece and gpu_kernel_llvm memos
    codes_of: dict[object, object] = {}

    def stitched(g: Graph, fresh: bool = False):  # type: ignore[no-untyped-def]
        saved = dict(G._STEPS), dict(G._LINKED)
        if fresh:
            G._STEPS.clear()
            G._LINKED.clear()
        try:
            ps = G.gpu_cut(g, _everywhere(g))
            low = []
            for p in ps:
                if p.graph not in pieces_of:
                    pieces_of[p.graph] = lower_gpu_piece(p.graph)
                low.append(pieces_of[p.graph])
            split = G.stitch_gpu(len(g.params), [(p.inputs, p.outputs) for p in ps], low)  # type: ignore[arg-type]
            for k in split.kernels:
                if k not in codes_of:
                    codes_of[k] = lower_gpu_kernel(k)
            return G.assemble_entry(g, split, {k.symbol: codes_of[k] for k in split.kernels})  # type: ignore[misc]
        finally:
            if fresh:
                G._STEPS.clear()
                G._LINKED.clear()
                G._STEPS.update(saved[0])
                G._LINKED.update(saved[1])

    first, second, fresh = _stitched_before_and_after_an_edit(stitched)
    assert second == fresh and second != first
    # every step before the edited kernel's equals the previous stitch's, and is its object
    equal = 0
    while first.steps[equal] == second.steps[equal]:
        equal += 1
    assert equal >= len(second.steps) // 2
    assert all(a is b for a, b in zip(first.steps[:equal], second.steps, strict=False))
    assert all(a is not b for a, b in zip(second.steps, fresh.steps, strict=True))


@pytest.mark.parametrize("target", ["host", "gpu"])
def test_a_refused_piece_prints_only_its_changed_kernels(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Canonical kernels are remembered by structure in-process (``_PRINTED`` of
    kinac.ir.host.kernels / kinac.ir.gpu.kernels_to_nvvm): lowering a piece again prints
    nothing, an edited piece prints only the kernels it changed, and each lowering equals one
    with nothing remembered."""
    if target == "host":
        from kinac.ir.host import kernels as M

        lower, name = M.lower_piece, "canonical_kernel"
    else:
        from kinac.ir.gpu import kernels_to_nvvm as M  # type: ignore[no-redef]
        from kinac.ir.gpu.pipeline import lower_gpu_piece as lower  # type: ignore[assignment]

        name = "canonical_gpu_kernel"
    printed: list[int] = []
    real = getattr(M, name)
    monkeypatch.setattr(M, name, lambda k, i: printed.append(i) or real(k, i))  # type: ignore[func-returns-value]
    monkeypatch.setattr(M, "_PRINTED", {})

    def fresh(g: Graph):  # type: ignore[no-untyped-def]
        saved = dict(M._PRINTED)
        M._PRINTED.clear()
        try:
            return lower(g)
        finally:
            M._PRINTED.clear()
            M._PRINTED.update(saved)

    g = block_graph(2, 8, 16)
    first = lower(g)
    total = len(printed)
    assert total >= 3
    printed.clear()
    assert lower(g) == first and printed == []
    last = g.nodes[-1]
    g2 = Graph(g.name, g.params, (*g.nodes[:-1], replace(last, op="max")), g.outputs)
    printed.clear()
    second = lower(g2)
    assert 1 <= len(printed) < total
    printed.clear()
    assert second == fresh(g2) and second != first


def test_a_gpu_kernel_lowered_from_its_printed_op_equals_one_parsed_from_its_text() -> None:
    """``kinac.ir.gpu.kernel_split._OPS``: a kernel printed in this process is lowered from a
    clone of the op it was printed from, not its text parsed back: the same code, for every
    kernel of a block, an MLP and gathers, both flavours, lowered twice (the op is not
    changed by a lowering)."""
    from kinac.ir.gpu import kernel_split as KS
    from kinac.ir.gpu.pipeline import split_graph_gpu
    from kinac.ir.testing import GraphBuilder

    b = GraphBuilder("gathers")
    table, idx = b.param("table", "f32", (16, 8)), b.param("idx", "i32", (4, 3))
    e = b.gather(table, idx)
    gathers = b.build(b.binary("add", b.unary("tanh", b.binary("mul", e, e)), e))
    kernels = [k for g in (block_graph(2, 8, 16), mlp_graph(2, 8, 16, 32), gathers)
               for k in split_graph_gpu(g).kernels if k.source == "kina"]  # fmt: skip
    assert len(kernels) >= 6 and all(k.text in KS._OPS for k in kernels)
    for k in kernels:
        for flavour in ("nvptx", "emu"):
            parsed = KS._lower_kina(k, flavour, reuse=False)
            assert KS._lower_kina(k, flavour) == parsed == KS._lower_kina(k, flavour)


def test_equal_pieces_share_one_graph_and_are_found_by_identity() -> None:
    """``kinac.ir.pieces._GRAPHS``: a chain of identical layers cuts into pieces whose equal
    graphs are one object; ``distinct_graphs`` then gives what deduplicating by value gives."""
    from kinac.ir.testing import GraphBuilder

    b = GraphBuilder("chain")
    h = b.param("x", "f32", (4, 8))
    calls = []
    for _ in range(4):
        start = len(b.nodes)
        h = b.binary("mul", b.unary("tanh", h), h)
        calls.append((start, len(b.nodes)))
    g = b.build(h)
    pieces = P.cut(g, tuple(calls))
    assert len(pieces) == 4
    graphs, which = P.distinct_graphs(pieces)
    by_value = list(dict.fromkeys(p.graph for p in pieces))
    assert graphs == by_value and [by_value.index(p.graph) for p in pieces] == which
    assert len(graphs) == 1 and all(p.graph is graphs[0] for p in pieces[:-1])
    # equal graphs that are not one object are still one entry
    twin = replace(pieces[0], graph=replace(pieces[0].graph))
    assert P.distinct_graphs((pieces[0], twin)) == ([pieces[0].graph], [0, 0])


def test_pieces_equal_by_value_but_not_by_text_stay_apart() -> None:
    """A constant 1 equals 1.0 (``==``) but is another program: interning and
    ``distinct_graphs`` go by canonical text, so such pieces keep their own graphs."""
    from kinac.ir.testing import GraphBuilder

    def chain(values: list[float | int]) -> Graph:
        b = GraphBuilder("consts")
        h = b.param("x", "f32", (4, 8))
        for v in values:
            h = b.binary("mul", b.unary("tanh", b.binary("add", h, b.const(v))), h)
        return b.build(h)

    g1, g2 = chain([1, 2]), chain([1.0, 2])
    assert g1 == g2 and encode(g1) != encode(g2)
    p1, p2 = P.cut(g1, ()), P.cut(g2, ())
    assert p1[0].graph is not p2[0].graph and encode(p1[0].graph) != encode(p2[0].graph)
    graphs, which = P.distinct_graphs((p1[0], p2[0]))
    assert len(graphs) == 2 and which == [0, 1]
