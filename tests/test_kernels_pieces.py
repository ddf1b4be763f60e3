"""An entry cut into pieces at its calls lowers to exactly the kernels of the whole entry, and
its calls specialised on their own splice in exactly the nodes inlining adds (issue 19)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kinac.ir.testing import GraphBuilder, block_graph, mlp_graph
from kinac.tir.graph import Graph


def _gather_graph() -> Graph:
    g = GraphBuilder("gathers")
    table = g.param("table", "f32", (16, 8))
    idx = g.param("idx", "i32", (4, 3))
    e = g.gather(table, idx)
    h = g.unary("tanh", g.binary("mul", e, e))
    e2 = g.gather(table, idx)
    return g.build(g.binary("add", h, g.softmax(e2, 2)))


def _low_graph() -> Graph:
    """bf16: a matmul's value is a cast of an f32 matmul (``legalize-dtypes``)."""
    return block_graph(2, 8, 16, dtype="bf16")


def _views_graph() -> Graph:
    g = GraphBuilder("views")
    x = g.param("x", "f32", (8, 16))
    w = g.param("w", "f32", (16, 16))
    t = g.transpose(g.unary("exp", x), (1, 0))  # a view of arithmetic: recomputed in its reader
    m = g.matmul(g.transpose(t, (1, 0)), w)
    s = g.binary("add", m, g.unary("neg", m))
    return g.build(g.reduce("reduce_sum", s, 1))


GRAPHS = {
    "block": lambda: block_graph(2, 8, 16),
    "mlp": lambda: mlp_graph(2, 8, 16, 32),
    "low": _low_graph,
    "gather": _gather_graph,
    "views": _views_graph,
}


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_accepted_cut_keeps_the_whole_entrys_kernels(name: str) -> None:
    """With every position offered as a cut, the pieces' kernels, stitched, are the whole
    entry's: same steps, canonical kernels, buffer plan; and the entry computes the same."""
    from kinac.ir.host.kernels import lower_piece, split_graph
    from kinac.ir.host.stitch import stitch
    from kinac.ir.pieces import cut

    g = GRAPHS[name]()
    everywhere = tuple((p, p) for p in range(len(g.nodes)))
    pieces = cut(g, everywhere)
    assert len(pieces) > 1, "some cut is safe in every test graph"
    lowered = [lower_piece(p.graph) for p in pieces]
    got = stitch(g, [(p.inputs, p.outputs) for p in pieces], lowered)
    whole = split_graph(g)
    assert got.steps == whole.steps
    assert got.kernels == whole.kernels
    assert got.arena_bytes == whole.arena_bytes
    # as the pipeline stitches: the wrapper calls one function per piece
    split = stitch(g, [(p.inputs, p.outputs) for p in pieces], lowered, separate=True)
    assert split.piece_code and (split.steps, split.kernels) == (got.steps, got.kernels)
    from kinac.ir.host.wrapper_ir import flat_wrapper_ir

    assert flat_wrapper_ir(split) == got.llvm_ir  # what the profiler instruments
    if all(p.dtype not in ("bf16", "f16") for p in got.params):  # numpy has no bf16
        _runs_like_the_whole_module(g, got)
        _runs_like_the_whole_module(g, split)


def _runs_like_the_whole_module(g: Graph, lo: Any) -> None:
    from dataclasses import replace

    from kinac.codegen.llvm import compile_object, host_target
    from kinac.graph_build import compile_graph
    from kinac.ir.host.kernels import lower_kernel
    from kinac.rt.host import load_entry

    codes = {k.symbol: lower_kernel(k) for k in lo.kernels}
    calls = set(lo.library_calls).union(*(c.library_calls for c in codes.values()))
    lo = replace(lo, library_calls=tuple(sorted(calls)))
    objs = (
        compile_object(lo.llvm_ir, host_target(), 0),
        *(compile_object(text, host_target(), 0) for text in lo.piece_code),
        *(compile_object(c.llvm_ir, host_target()) for c in codes.values()),
    )
    rng = np.random.default_rng(0)
    args = []
    for p in lo.params:
        if p.dtype.startswith("i"):
            args.append(rng.integers(0, 16, p.shape).astype(p.dtype.replace("i", "int")))
        else:
            args.append(rng.standard_normal(p.shape).astype(np.float32))
    np.testing.assert_array_equal(
        np.asarray(load_entry(lo, objs)(*args)), np.asarray(compile_graph(g)(*args))
    )


def test_repeated_and_param_outputs_are_each_written() -> None:
    """An entry returning one value twice and a param: each output buffer gets its copy (the
    stitched plan once gave the first copy an arena slot and left ``out0`` unwritten)."""
    from kinac.ir.host.kernels import split_graph

    g = GraphBuilder("outs")
    y = g.param("y", "f32", (4, 8))
    t = g.unary("tanh", y)
    graph = g.build(t, t, y)
    lo = split_graph(graph)
    assert [s.writes for s in lo.steps] == ["out0", "out1", "out2"]
    _runs_like_the_whole_module(graph, lo)


def test_a_cut_that_would_change_fusion_is_not_taken() -> None:
    """A value read once by elementwise code is recomputed in its reader, so no cut may
    separate them; read twice (or by a matmul) it has its own buffer, and the cut is safe.
    In bf16 a matmul's value is a cast, fused into its reader: not a cut."""
    from kinac.ir.pieces import cut_points

    g = GraphBuilder("chain")
    x = g.param("x", "f32", (8, 16))
    a = g.unary("tanh", x)  # read once, by exp: recomputed inside exp's kernel
    b = g.unary("exp", a)  # read twice: a buffer
    c = g.binary("add", b, g.unary("neg", b))
    graph = g.build(c)
    assert cut_points(graph, ((a, a), (b, b))) == []
    assert cut_points(graph, ((b + 1, b + 1),)) == [b + 1]

    for dtype, safe in (("f32", True), ("bf16", False)):
        h = GraphBuilder("mm")
        u = h.param("u", dtype, (8, 16))
        w = h.param("w", dtype, (16, 16))
        m = h.matmul(u, w)
        out = h.build(h.unary("tanh", m))
        assert cut_points(out, ((m + 1, m + 1),)) == ([m + 1] if safe else [])


def test_the_cut_rules_agree_with_the_fuser() -> None:
    """The Graph-level rules (:mod:`kinac.ir.pieces`) claim no more than the fuser does: every
    NOT_FUSED op is one it never fuses, every ARITH op elementwise arithmetic (cost >= 1), and
    every op it never fuses is NOT_FUSED, but for ops added since (taken as free: safe)."""
    from kinac.ir.dialects import kina_struct as st
    from kinac.ir.fuse_kernels import ELEMENTWISE
    from kinac.ir.pieces import ARITH, NOT_FUSED
    from kinac.ir.views import VIEWS

    for op, cls in st.OPS.items():
        fused = issubclass(cls, ELEMENTWISE + VIEWS)
        if op in NOT_FUSED:
            assert not fused, op
        if op in ARITH:
            assert fused and not issubclass(cls, VIEWS + (st.CreationOp,)), op
    assert NOT_FUSED <= set(st.OPS) and ARITH <= set(st.OPS)
    assert {"matmul", "reduce_sum", "softmax", "gather", "concat"} <= NOT_FUSED
    assert {"add", "mul", "exp", "tanh", "cast", "where"} <= ARITH


CALLS_SRC = """(module calls)

(defn twice [(x : (tensor T [n d]))] -> (tensor T [n d]) (add x x))
(defn same [(x : (tensor T [n d]))] -> (tensor T [n d]) x)
(defn scale [(x : (tensor T [n d])) (s : T)] -> (tensor T [n d]) (mul x s))
(defn mix [(x : (tensor T [n d])) (w : (tensor T [d d]))] -> (tensor T [n d])
  (tanh (matmul x w)))

(defn net [(x : (tensor T [n d])) (w : (tensor T [d d]))] -> (tensor T [n d])
  (let [(a (mix x w)) (b (twice a)) (c (same b)) (e (scale c 2.0)) (f (mix e w))]
    (add (twice f) (same a))))
"""


def test_calls_specialised_on_their_own_splice_the_inlined_nodes(tmp_path: Path) -> None:
    """``specialise_call`` fragments (a call returning its argument, a weak scalar argument
    inlined, identical calls specialised once) give the graph inlining gives, node for node."""
    from kinac.check import DefnRef, specialise
    from kinac.pipeline import EntryKey, entry_graph
    from kinac.pipeline_support import CheckEnv
    from kinac.session import Session

    (tmp_path / "calls.kina").write_text(CALLS_SRC)
    (tmp_path / "kina.toml").write_text(
        '[workspace]\nname = "c"\n\n[[entry]]\nname = "net"\ndefn = "net"\n'
        'dims = { n = 4, d = 8 }\ndtypes = { T = "f32" }\n'
    )
    sess = Session(tmp_path, no_cache=True)
    assert sess.build().error_count == 0
    key = next(k for n, k in sess.db.events.executed_names(None) if n == "entry_graph")
    assert isinstance(key, EntryKey)
    spec = entry_graph(sess.db, key)
    ran = [k.callee.name for n, k in sess.db.events.executed_names(None) if n == "specialise_call"]
    assert sorted(ran) == ["mix", "same", "twice"]  # scale has a weak argument: inlined
    env = CheckEnv(sess.db)
    inlined = specialise(
        DefnRef(key.file, key.defn), dict(key.dims), dict(key.dtypes), _NoCalls(env)
    )
    assert spec.graph == inlined.graph and spec.calls == inlined.calls
    assert len(spec.calls) == 6  # all 7 calls but scale's
    sess.close()


class _NoCalls:
    """The pipeline's environment without its cache of calls: every call is inlined."""

    def __init__(self, env: Any) -> None:
        self.env, self.budget_ms, self.on_unknown = env, env.budget_ms, env.on_unknown

    def __getattr__(self, name: str) -> Any:
        if name == "specialised_call":
            raise AttributeError(name)
        return getattr(self.env, name)


def _two_layers() -> tuple[Graph, tuple[tuple[int, int], ...]]:
    """A gather, then ``tanh(h @ w_i) + h`` twice (each layer's output is read twice: a cut
    is safe between them), big enough for the elementwise kernels to run on the pool."""
    g = GraphBuilder("two_layers")
    table = g.param("table", "f32", (16, 256))
    ids = g.param("ids", "i32", (128,))
    ws = [g.param(f"w{i}", "f32", (256, 256)) for i in range(2)]
    h = g.gather(table, ids)
    calls = []
    for w in ws:
        start = len(g.nodes)
        h = g.binary("add", g.unary("tanh", g.matmul(h, w)), h)
        calls.append((start, len(g.nodes)))
    return g.build(h), tuple(calls)


def test_golden_stitched_wrapper() -> None:
    """The pieces of a two-layer entry and the wrapper stitched from them: steps, buffer plan,
    calls, a pool launch and its trampoline, the gather's status argument (LLVM IR text)."""
    import goldens

    from kinac.ir.host.kernels import lower_piece
    from kinac.ir.host.stitch import stitch
    from kinac.ir.pieces import cut

    g, calls = _two_layers()
    pieces = cut(g, calls)
    assert len(pieces) == 3 and pieces[1].graph == pieces[2].graph  # the layers: one piece
    lo = stitch(g, [(p.inputs, p.outputs) for p in pieces], [lower_piece(p.graph) for p in pieces])
    text = [f"piece {p.start}..{p.stop}: inputs {list(p.inputs)}, outputs {list(p.outputs)}"
            for p in pieces]  # fmt: skip
    text += [f"{s.sym}: {s.kind}/{s.impl} {s.dtype}{list(s.shape)} {list(s.reads)} -> {s.writes}"
             for s in lo.steps]  # fmt: skip
    text += [
        f"arena {lo.arena_bytes} bytes; library calls {list(lo.library_calls)}",
        "",
        lo.llvm_ir,
    ]
    goldens.compare(Path(__file__).parent / "golden" / "pieces" / "two_layers.txt", "\n".join(text))


def test_golden_piece_functions_and_their_gather_error() -> None:
    """The same entry as the pipeline stitches it: the wrapper calls one function per piece
    with a constant table of its buffers (argument index, or arena offset as ``-off - 1``),
    the two identical layers share one function; a gather index out of range, raised inside a
    piece function, still names its step."""
    import goldens

    from kinac.ir.host.kernels import lower_piece
    from kinac.ir.host.stitch import stitch
    from kinac.ir.pieces import cut
    from kinac.rt.host import KinaRuntimeError

    g, calls = _two_layers()
    pieces = cut(g, calls)
    lo = stitch(
        g, [(p.inputs, p.outputs) for p in pieces], [lower_piece(p.graph) for p in pieces], True
    )
    assert len(lo.piece_code) == 2  # the gather's piece, and one for both layers
    text = "\n".join([lo.llvm_ir, *lo.piece_code])
    goldens.compare(Path(__file__).parent / "golden" / "pieces" / "two_layers_split.txt", text)
    _runs_like_the_whole_module(g, lo)
    entry = _loaded(lo)
    args = [np.zeros(p.shape, np.int32 if p.dtype == "i32" else np.float32) for p in lo.params]
    args[1][5] = 99  # 16 rows in the table
    with pytest.raises(KinaRuntimeError, match="k0_gather"):
        entry(*args)


def _loaded(lo: Any) -> Any:
    from dataclasses import replace

    from kinac.codegen.llvm import compile_object, host_target
    from kinac.ir.host.kernels import lower_kernel
    from kinac.rt.host import load_entry

    codes = {k.symbol: lower_kernel(k) for k in lo.kernels}
    calls = set(lo.library_calls).union(*(c.library_calls for c in codes.values()))
    objs = (
        compile_object(lo.llvm_ir, host_target(), 0),
        *(compile_object(t, host_target(), 0) for t in lo.piece_code),
        *(compile_object(c.llvm_ir, host_target()) for c in codes.values()),
    )
    return load_entry(replace(lo, library_calls=tuple(sorted(calls))), objs)
