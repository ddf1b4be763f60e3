"""Kernels as content-addressed queries: an edit recompiles exactly the kernels it changed,
identical kernels compile once, and incremental objects equal a clean build's, byte for byte."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kinac.session import Session

WS = Path(__file__).resolve().parent.parent / "workspaces" / "transformer"
KERNEL_QUERIES = ("host_kernel_llvm", "host_kernel_object")


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    dst = tmp_path / "ws"
    shutil.copytree(WS, dst, ignore=shutil.ignore_patterns(".kinac-cache"))
    return dst


def build(ws: Path, cache: Path, keys: list[Any] | None = None) -> tuple[Session, dict[Any, Any]]:
    """Build, and read back each cpu entry's lowering and objects (``keys``: those of the
    first build's entries, found from its events)."""
    from kinac import pipeline
    from kinac.pipeline import EntryKey

    sess = Session(ws, cache_dir=str(cache))
    assert sess.build().error_count == 0
    if keys is None:
        keys = [k for n, k in sess.db.events.executed_names(None) if n == "lowered"]
    assert keys and all(isinstance(k, EntryKey) for k in keys)
    out = {k: (pipeline.lowered(sess.db, k), pipeline.object_code(sess.db, k)) for k in keys}
    sess.close()
    return sess, out


def kernels_run(sess: Session, name: str) -> list[Any]:
    return [k for n, k in sess.db.events.executed_names(None) if n == name]


def test_identical_kernels_compile_once_and_an_edit_recompiles_exactly_the_changed(
    ws: Path,
) -> None:
    sess, before = build(ws, ws.parent / "cache")
    distinct = {k for lo, _ in before.values() for k in lo.kernels}
    steps = [k for lo, _ in before.values() for k in lo.kernels]
    assert len(distinct) < len(steps)  # the workspace repeats kernels (shared by entries)
    for q in KERNEL_QUERIES:
        assert sorted(kernels_run(sess, q), key=str) == sorted(distinct, key=str), q

    text = (ws / "ffn.kina").read_text()
    (ws / "ffn.kina").write_text(
        text.replace(
            "(swiglu (rms-norm x wn) wg wu wd)", "(swiglu (rms-norm (neg x) wn) wg wu wd)", 1
        )
    )
    sess2, after = build(ws, ws.parent / "cache", list(before))
    new = {k for lo, _ in after.values() for k in lo.kernels} - distinct
    assert new, "the edit changes some kernel"
    for q in KERNEL_QUERIES:  # exactly the kernels whose canonical form changed
        assert set(kernels_run(sess2, q)) == new, q

    _, clean = build(ws, ws.parent / "clean-cache", list(before))
    assert clean == after  # incremental artifacts equal a clean build's, byte for byte


def test_split_entry_runs_like_the_whole_entry() -> None:
    import numpy as np

    from kinac.codegen.llvm import compile_object, host_target
    from kinac.graph_build import compile_graph
    from kinac.ir.host.kernels import lower_kernel, split_graph
    from kinac.ir.testing import block_graph
    from kinac.rt.host import load_entry

    g = block_graph(2, 8, 16)
    lo = split_graph(g)
    codes = {k.symbol: lower_kernel(k) for k in lo.kernels}
    calls = set(lo.library_calls).union(*(c.library_calls for c in codes.values()))
    from dataclasses import replace

    lo = replace(lo, library_calls=tuple(sorted(calls)))
    objs = (
        compile_object(lo.llvm_ir, host_target()),
        *(compile_object(c.llvm_ir, host_target()) for c in codes.values()),
    )
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.shape).astype(np.float32) for p in lo.params]
    np.testing.assert_array_equal(load_entry(lo, objs)(*args), compile_graph(g)(*args))


def test_repeated_kernels_share_the_canonical_form_printed_for_each() -> None:
    """The structural key that skips re-printing repeats agrees with printing every kernel."""
    from xdsl.context import Context
    from xdsl.dialects import func

    from kinac.ir.dialects import kina_struct as st
    from kinac.ir.from_graph import graph_to_module
    from kinac.ir.host.kernels import canonical_kernel, split_graph
    from kinac.ir.host.pipeline import KINA_PASSES
    from kinac.ir.testing import GraphBuilder, block_graph

    for g in (block_graph(2, 8, 16), _same_inputs(GraphBuilder), _twin_layers(GraphBuilder)):
        m = graph_to_module(g)
        for p in KINA_PASSES:
            p().apply(Context(), m)
        fn = next(o for o in m.ops if isinstance(o, func.FuncOp))
        ops = [o for o in fn.body.block.ops if isinstance(o, st.KernelOp)]
        each = [canonical_kernel(k, i) for i, k in enumerate(ops)]
        assert list(split_graph(g).kernels) == each
    assert len(set(each)) < len(each)  # the twin layers repeat their kernels


def _same_inputs(builder: Any) -> Any:
    """Kernels reading the same types but computing, or wiring, differently."""
    g = builder("same_inputs")
    x, y = g.param("x", "f32", (8, 16)), g.param("y", "f32", (8, 16))
    outs = (g.unary("tanh", x), g.unary("exp", x), g.binary("sub", x, y), g.binary("sub", y, x))
    return g.build(*outs)


def _twin_layers(builder: Any) -> Any:
    """``tanh(x * w1) * w2`` then the same again with other weights: two identical layers."""
    g = builder("twins")
    x = g.param("x", "f32", (8, 16))
    ws = [g.param(f"w{i}", "f32", (16, 16)) for i in range(2)]
    for w in ws:
        x = g.unary("tanh", g.matmul(x, w))
    return g.build(x)


def test_a_one_layer_edit_reruns_only_what_it_changed(tmp_path: Path) -> None:
    """The scaling model (4 layers, one block call each): squaring the last layer's input
    re-specialises no call, re-fuses only the one piece that changed (the layer before the
    edit, whose output the new ``mul`` now reads alone and fuses), re-lowers only the kernels
    that piece changed, and gives what a clean build gives."""
    import sys

    from kinac.pipeline import EntryKey
    from kinac.pipeline_support import DefnKey

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
    import scaling

    ws = scaling.make_workspace(tmp_path, 4)
    cache = tmp_path / "cache"
    sess, before = build(ws, cache)
    assert [k.callee.name for _, k in _ran(sess, "specialise_call")] == ["block"]  # once
    old_pieces = {k for _, k in _ran(sess, "host_piece")}
    assert len(old_pieces) == 1  # four identical layers: one piece fused
    (key,) = before
    old_kernels = set(before[key][0].kernels)

    (ws / "model.kina").write_text(scaling.model_source(4, edited=True))
    sess2, after = build(ws, cache, [key])
    lo = after[key][0]
    ran = {(n, k) for n, k in _ran(sess2, None) if n not in _READ}
    assert {k for n, k in ran if n == "check_defn"} == {DefnKey("model.kina", "model")}
    assert not [k for n, k in ran if n == "specialise_call"]
    assert {n for n, k in ran if isinstance(k, EntryKey)} == {
        "entry_graph",
        "shard_propagate",
        "lowered",
        "object_code",
    }
    new_pieces = {k for n, k in ran if n == "host_piece"}
    assert len(new_pieces) == 1 and not new_pieces & old_pieces
    new_kernels = set(lo.kernels) - old_kernels
    assert new_kernels
    for q in KERNEL_QUERIES:
        assert {k for n, k in ran if n == q} == new_kernels, q
    # the piece functions: only the changed piece's is compiled (one per distinct text)
    new_fns = set(lo.piece_code) - set(before[key][0].piece_code)
    assert len(new_fns) == 1 and {k for n, k in ran if n == "host_piece_object"} == new_fns
    assert len(lo.piece_code) == 2  # three identical layers and the edited one
    assert {n for n, _ in ran} <= {
        "check_defn", "file_report", "entry_report", "build", "callees", "host_piece",
        "host_piece_object", *KERNEL_QUERIES, "entry_graph", "shard_propagate", "lowered",
        "object_code",
    }  # fmt: skip

    _, clean = build(ws, tmp_path / "clean-cache", [key])
    assert clean == after


_READ = ("parse", "file_index", "parse_diagnostics", "defn_ast", "signature", "scope")


def _ran(sess: Session, name: str | None) -> list[tuple[str, Any]]:
    return [(n, k) for n, k in sess.db.events.executed_names(None) if name is None or n == name]


def test_random_wiring_edits_match_clean_builds(tmp_path: Path) -> None:
    """Random edits to a 3-layer model's wiring and to the block every layer calls: every
    incremental build (one long-lived session or a fresh one, over one cache) reports the same
    artifacts, objects included, as a clean build, byte for byte, and its lowered entry (the
    pieces' kernels stitched: steps, buffer plan, wrapper) and objects equal a clean build's."""
    import random
    import sys

    from kinac import pipeline
    from kinac.pipeline import EntryKey
    from kinac.rules.codec import encode

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))
    import scaling

    rng = random.Random(19)
    ws = scaling.make_workspace(tmp_path, 3)
    block = ws / "block.kina"
    plain, norm_of = block.read_text(), "(rms-norm x wn1)"
    assert norm_of in plain
    cache = str(tmp_path / "cache")
    live = Session(ws, cache_dir=cache)
    live.build()
    key = next(k for n, k in live.db.events.executed_names(None) if n == "lowered")
    assert isinstance(key, EntryKey)

    def entry(sess: Session) -> bytes:
        return encode((pipeline.lowered(sess.db, key), pipeline.object_code(sess.db, key)))

    wrap: dict[int, str] = {}
    for step in range(5):
        if step == 2 or rng.random() < 0.3:  # the callee every layer shares: all pieces change
            op = rng.choice(["neg", "tanh", None])
            block.write_text(
                plain if op is None else plain.replace(norm_of, f"(rms-norm ({op} x) wn1)")
            )
        else:
            layer = rng.randrange(3)
            choice = rng.choice(["neg", "tanh", "exp", None])
            if choice is None:
                wrap.pop(layer, None)
            else:
                wrap[layer] = choice
            (ws / "model.kina").write_text(scaling.model_source(3, edited=False, wrap=wrap))
        live.invalidate_paths([ws / "model.kina", block])
        if step % 2:
            got, got_entry = encode(live.build()), entry(live)
        else:
            fresh = Session(ws, cache_dir=cache)
            got, got_entry = encode(fresh.build()), entry(fresh)
            fresh.close()
        clean = Session(ws, no_cache=True)
        want = clean.build()
        assert want.error_count == 0 and any(kind == "object" for _, kind, _ in want.artifacts)
        assert got == encode(want), f"step {step}: reports differ"
        assert got_entry == entry(clean), f"step {step}: lowered entries differ"
        clean.close()
    live.close()


def test_a_kernel_lowers_from_its_printed_op_as_from_its_text(ws: Path) -> None:
    """``lower_kernel`` clones the op a canonical text was printed from in this process
    instead of parsing the text back: the same LLVM IR (every kernel of the transformer
    workspace, a gather's at two steps), and the printed op gains no use."""
    from kinac.artifacts.host import HostKernel
    from kinac.ir.host import kernels as K
    from kinac.ir.host.stitch import kernel_symbol

    (ws / "emb.kina").write_text(
        "(module emb)\n(defn emb [(t : (tensor f32 [8 4])) (w : (tensor f32 [4 4]))\n"
        "           (ids : (tensor i32 [3]))]\n"
        "  -> (tensor f32 [3 4]) (exp (gather (matmul t w) ids)))\n"
    )
    with (ws / "kina.toml").open("a") as f:
        f.write('\n[[entry]]\nname = "emb"\ndefn = "emb"\n')
    sess = Session(ws, no_cache=True)
    assert sess.build().error_count == 0
    kernels = {pk.kernel.text: pk.kernel for m in sess.db._memos.values()
               if m.name == "host_piece" for pk in m.value.kernels}  # fmt: skip
    assert len(kernels) >= 8 and any(k.status_step for k in kernels.values())
    for text, hk in kernels.items():
        printed = K._OPS[text]
        uses = [len(list(u.uses)) for u in printed.inputs]
        steps = (hk.status_step,) if hk.status_step == 0 else (hk.status_step, hk.status_step + 5)
        for step in steps:
            k = HostKernel(kernel_symbol(text, step), text, step)
            assert K.lower_kernel(k, reuse=True) == K.lower_kernel(k, reuse=False)
        assert [len(list(u.uses)) for u in printed.inputs] == uses
