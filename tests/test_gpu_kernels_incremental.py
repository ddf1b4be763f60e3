"""GPU kernels as content-addressed queries (issue 19): identical kernels compile once, an
edit recompiles exactly the kernels it changed, incremental PTX equals a clean build's byte
for byte (per kernel and linked), and the linked module passes ``ptxas``. No GPU needed
(the ``cuda`` target builds PTX); the one ``gpu`` test runs a model whose layers share
kernels on the device."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from kinac.session import Session

ROOT = Path(__file__).resolve().parent.parent
KERNEL_QUERIES = ("gpu_kernel_llvm", "gpu_kernel_ptx")
ARCH = "sm_90"


def _scaling() -> Any:
    sys.path.insert(0, str(ROOT / "benches"))
    import scaling

    return scaling


def build(ws: Path, cache: Path | None) -> tuple[Session, dict[Any, Any]]:
    """A cuda build, and per entry: its lowering, its linked PTX and each kernel's PTX."""
    from kinac import pipeline_gpu as pipeline

    sess = Session(ws, cache_dir=str(cache), target="cuda") if cache else None
    sess = sess or Session(ws, no_cache=True, target="cuda")
    report = sess.build()
    assert report.error_count == 0
    keys = [k for k in _entry_keys(sess)]
    out: dict[Any, Any] = {}
    for k in keys:
        lo = pipeline.gpu_lowered(sess.db, k)
        per = {g.symbol: pipeline.gpu_kernel_ptx(sess.db, (g, ARCH)) for g in lo.kernels}
        out[k] = (lo, pipeline.ptx(sess.db, k), per)
    sess.close()
    return sess, out


def _entry_keys(sess: Session) -> list[Any]:
    from kinac.pipeline import EntryKey, config, find_defn, target

    cfg = config(sess.db, ()).config
    kind = target(sess.db, ()).kind
    keys = []
    for e in cfg.entries:  # type: ignore[union-attr]
        (found,) = find_defn(sess.db, (e.defn, e.file))
        keys.append(EntryKey(found.file, e.defn, e.dims, e.dtypes, kind))
    return keys


def ran(sess: Session, name: str) -> list[Any]:
    return [k for n, k in sess.db.events.executed_names(None) if n == name]


def test_identical_kernels_compile_once_and_an_edit_recompiles_exactly_the_changed(
    tmp_path: Path,
) -> None:
    sc = _scaling()
    ws = sc.make_workspace(tmp_path, 3)
    cache = tmp_path / "cache"
    sess, before = build(ws, cache)
    ((lo, linked, per),) = before.values()
    launched = [s for s in lo.steps if s.launches]
    distinct = set(lo.kernels)
    assert len(distinct) < len(launched)  # three layers: the same kernels three times
    assert len({s.launches[0].function for s in launched}) == len(distinct)
    assert sorted(ran(sess, "gpu_kernel_llvm"), key=str) == sorted(distinct, key=str)
    assert sorted(ran(sess, "gpu_kernel_ptx"), key=str) == sorted(
        ((k, ARCH) for k in distinct), key=str
    )
    assert sorted(lo.functions) == sorted(set(lo.functions))
    for fn in lo.functions:  # each distinct kernel once in the linked module
        assert linked.count(f".entry {fn}(") == 1
        assert any(f".entry {fn}(" in p for p in per.values())

    # edit the middle layer's input: only kernels of that layer change
    (ws / "model.kina").write_text(sc.model_source(3, edited=False, wrap={1: "tanh"}))
    sess2, after = build(ws, cache)
    ((lo2, linked2, _),) = after.values()
    new = set(lo2.kernels) - distinct
    assert new, "the edit changes some kernel"
    assert len(new) < len(set(lo2.kernels))  # and keeps others
    assert set(ran(sess2, "gpu_kernel_llvm")) == new
    assert set(ran(sess2, "gpu_kernel_ptx")) == {(k, ARCH) for k in new}
    assert ran(sess2, "ptx") and ran(sess2, "gpu_lowered")  # the entry itself is re-assembled
    assert len(ran(sess2, "gpu_piece")) == 1  # only the edited layer goes through the passes

    _, clean = build(ws, None)
    assert clean == after  # lowering, linked PTX and every kernel's PTX, byte for byte

    # undo the edit: every kernel is in the cache, none recompiles, the PTX is the first's
    (ws / "model.kina").write_text(sc.model_source(3, edited=False))
    sess3, undone = build(ws, cache)
    assert not ran(sess3, "gpu_kernel_llvm") and not ran(sess3, "gpu_kernel_ptx")
    assert undone == before


def test_random_wiring_edits_match_clean_builds(tmp_path: Path) -> None:
    """Random edits to a 3-layer model: every incremental cuda build (one long-lived session
    or a fresh one, over one cache) reports the same artifacts as a clean build, and each
    kernel's PTX and the linked PTX are byte-identical to the clean build's."""
    from kinac.rules.codec import encode

    sc = _scaling()
    rng = random.Random(1919)
    ws = sc.make_workspace(tmp_path, 3)
    cache = tmp_path / "cache"
    live = Session(ws, cache_dir=str(cache), target="cuda")
    live.build()
    wrap: dict[int, str] = {}
    for step in range(4):
        layer = rng.randrange(3)
        choice = rng.choice(["neg", "tanh", "exp", "sigmoid", None])
        if choice is None:
            wrap.pop(layer, None)
        else:
            wrap[layer] = choice
        (ws / "model.kina").write_text(sc.model_source(3, edited=rng.random() < 0.3, wrap=wrap))
        live.invalidate_paths([ws / "model.kina"])
        if step % 2:
            report = live.build()
            got = _artifacts(live)
        else:
            fresh = Session(ws, cache_dir=str(cache), target="cuda")
            report = fresh.build()
            got = _artifacts(fresh)
            fresh.close()
        clean = Session(ws, no_cache=True, target="cuda")
        want = clean.build()
        assert any(kind == "ptx" for _, kind, _ in want.artifacts)
        assert encode(report) == encode(want), f"step {step}: reports differ"
        assert got == _artifacts(clean), f"step {step}: PTX differs"
        clean.close()
    live.close()


def _artifacts(sess: Session) -> dict[str, Any]:
    from kinac import pipeline_gpu as pipeline

    out: dict[str, Any] = {}
    for k in _entry_keys(sess):
        lo = pipeline.gpu_lowered(sess.db, k)
        out[str(k)] = (
            pipeline.ptx(sess.db, k),
            {g.symbol: pipeline.gpu_kernel_ptx(sess.db, (g, ARCH)) for g in lo.kernels},
        )
    return out


def test_pipeline_and_in_process_lowering_agree() -> None:
    """``gpu_lowered`` (kernels by query) and ``lower_graph_gpu`` (all in one process) give
    the same record; the linked PTX holds exactly the module's kernels, each once."""
    from kinac.codegen.ptx import compile_ptx, link_ptx
    from kinac.ir.gpu.kernel_split import kernel_module, lower_gpu_kernel
    from kinac.ir.gpu.pipeline import assemble_entry, lower_graph_gpu, split_graph_gpu
    from kinac.ir.testing import block_graph

    g = block_graph(2, 8, 16)
    whole = lower_graph_gpu(g)
    split = split_graph_gpu(g)
    codes = {k.symbol: lower_gpu_kernel(k) for k in split.kernels}
    assert assemble_entry(g, split, codes) == whole
    rows = [s for s in whole.steps if s.kind == "row"]
    assert len(rows) == 2 and rows[0].launches[0].function == rows[1].launches[0].function
    linked = link_ptx([compile_ptx(kernel_module([c])) for c in codes.values()])
    entries = [ln.split("(")[0].split()[-1] for ln in linked.splitlines() if ".entry" in ln]
    assert sorted(entries) == sorted(whole.functions)
    assert linked.count(".version") == 1 and linked.count(".target sm_90") == 1


def test_a_gather_kernel_is_keyed_by_its_step() -> None:
    """Two identical gathers at different steps write different step numbers into the status
    buffer: two kernels (other kernels' keys hold no step)."""
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import GraphBuilder

    g = GraphBuilder("gathers")
    t = g.param("t", "f32", (50, 8))
    i = g.param("i", "i32", (3, 5))
    j = g.param("j", "i32", (3, 5))
    outs = [g.gather(t, i), g.gather(t, j), g.unary("exp", t), g.unary("exp", g.unary("neg", t))]
    lw = lower_graph_gpu(g.build(*outs))
    gathers = [s for s in lw.steps if s.kind == "gather"]
    assert len(gathers) == 2
    assert gathers[0].launches[0].function != gathers[1].launches[0].function
    steps = [i for i, s in enumerate(lw.steps) if s.kind == "gather"]
    assert sorted(k.status_step for k in lw.kernels if "kina.gather" in k.text) == steps
    maps = [s.launches[0].function for s in lw.steps if s.kind == "map"]
    assert len(maps) == 2 and len(set(maps)) == 2  # exp(t) and exp(neg(t)) differ


def _gpu_graphs() -> dict[str, Any]:
    from kinac.ir.testing import GraphBuilder, block_graph, mlp_graph

    g = GraphBuilder("gathers")
    table = g.param("table", "f32", (16, 8))
    idx = g.param("idx", "i32", (4, 3))
    e = g.gather(table, idx)
    h = g.unary("tanh", g.binary("mul", e, e))
    gathers = g.build(g.binary("add", h, g.softmax(g.gather(table, idx), 2)))
    v = GraphBuilder("views")
    x = v.param("x", "f32", (8, 16))
    w = v.param("w", "f32", (16, 16))
    t = v.transpose(v.unary("exp", x), (1, 0))
    m = v.matmul(v.transpose(t, (1, 0)), w)
    views = v.build(v.reduce("reduce_sum", v.binary("add", m, v.unary("neg", m)), 1))
    r = GraphBuilder("norm_read_twice")  # the norm's row kernel merges into y*y + y
    x = r.param("x", "f32", (8, 64))
    y = r.binary(
        "mul", x, r.unary("rsqrt", r.reduce("reduce_mean", r.unary("square", x), -1, True))
    )
    norm_read_twice = r.build(r.binary("add", r.binary("mul", y, y), y))
    return {
        "norm_read_twice": norm_read_twice,
        "block": block_graph(2, 8, 16),
        "block_bf16": block_graph(2, 64, 256, 4, 2, 64, dtype="bf16"),  # fused attention
        "mlp": mlp_graph(2, 8, 16, 32),
        "gathers": gathers,
        "views": views,
    }


def test_every_accepted_gpu_cut_keeps_the_whole_entrys_lowering() -> None:
    """With every position offered as a cut, the pieces through the GPU passes, stitched,
    give exactly the whole entry's lowering (steps, buffers, cuBLAS calls, kernels, module):
    no GPU fusion crosses an accepted cut."""
    from kinac.ir.gpu.kernel_split import lower_gpu_kernel
    from kinac.ir.gpu.pipeline import lower_gpu_piece, lower_graph_gpu
    from kinac.ir.gpu.stitch import assemble_entry, gpu_cut, stitch_gpu

    cuts = 0
    for name, g in _gpu_graphs().items():
        pieces = gpu_cut(g, tuple((p, p) for p in range(len(g.nodes))))
        cuts += len(pieces) - 1
        lowered = [lower_gpu_piece(p.graph) for p in pieces]
        split = stitch_gpu(len(g.params), [(p.inputs, p.outputs) for p in pieces], lowered)
        codes = {k.symbol: lower_gpu_kernel(k) for k in split.kernels}
        assert assemble_entry(g, split, codes) == lower_graph_gpu(g), name
    assert cuts >= 4  # the rule leaves cuts to take


def _random_graph(rng: random.Random) -> Any:
    """Chains of arithmetic, norms, reductions, softmaxes, matmuls (plain and with a bias),
    views, read again at random: what the GPU fusions merge."""
    from kinac.ir.testing import GraphBuilder

    g = GraphBuilder("fuzz")
    dt = rng.choice(["f32", "f32", "bf16"])
    x, w, b = g.param("x", dt, (8, 16)), g.param("w", dt, (16, 16)), g.param("b", dt, (16,))
    vals = [x]
    for _ in range(rng.randint(3, 12)):
        a = rng.choice(vals[-4:])
        k = rng.choice(["unary", "binary", "reduce", "softmax", "matmul", "view", "bias", "norm"])
        if k == "unary":
            v = g.unary(rng.choice(["exp", "tanh", "neg", "square"]), a)
        elif k == "binary":
            v = g.binary(rng.choice(["add", "mul", "sub"]), a, rng.choice(vals))
        elif k == "reduce":
            op = rng.choice(["reduce_sum", "reduce_mean", "reduce_max"])
            v = g.binary("mul", a, g.reduce(op, a, -1, True))
        elif k == "softmax":
            v = g.softmax(a, 1)
        elif k == "matmul":
            v = g.matmul(a, w)
        elif k == "view":
            v = g.transpose(g.transpose(a, (1, 0)), (1, 0))
        elif k == "bias":
            v = g.binary("add", g.matmul(a, w), b)
        else:
            r = g.reduce("reduce_mean", g.unary("square", a), -1, True)
            v = g.binary("mul", a, g.unary("rsqrt", r))
        vals.append(v)
    extra = [rng.choice(vals[1:])] if rng.random() < 0.3 else []
    return g.build(vals[-1], *extra)


def test_random_graphs_cut_everywhere_keep_the_whole_entrys_lowering() -> None:
    """Random graphs with every position offered as a cut: the stitched pieces equal the whole
    entry's lowering (this finds the row-kernel case of ``gpu_cut`` when its rule is dropped)."""
    from kinac.ir.gpu.kernel_split import lower_gpu_kernel
    from kinac.ir.gpu.pipeline import lower_gpu_piece, lower_graph_gpu
    from kinac.ir.gpu.stitch import assemble_entry, gpu_cut, stitch_gpu

    rng = random.Random(1901)
    cuts = 0
    for i in range(30):
        g = _random_graph(rng)
        pieces = gpu_cut(g, tuple((p, p) for p in range(len(g.nodes))))
        cuts += len(pieces) - 1
        lowered = [lower_gpu_piece(p.graph) for p in pieces]
        split = stitch_gpu(len(g.params), [(p.inputs, p.outputs) for p in pieces], lowered)
        codes = {k.symbol: lower_gpu_kernel(k) for k in split.kernels}
        assert assemble_entry(g, split, codes) == lower_graph_gpu(g), (i, [n.op for n in g.nodes])
    assert cuts >= 15


def test_a_layered_model_lowers_each_distinct_layer_once(tmp_path: Path) -> None:
    """The 3-layer model is three identical pieces: ``gpu_piece`` runs once, and the stitched
    entry equals the whole entry lowered in one process."""
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.gpu.stitch import gpu_cut
    from kinac.pipeline import entry_graph

    ws = _scaling().make_workspace(tmp_path, 3)
    sess = Session(ws, no_cache=True, target="cuda")
    assert sess.build().error_count == 0
    assert len(ran(sess, "gpu_piece")) == 1
    (key,) = _entry_keys(sess)
    spec = entry_graph(sess.db, key)
    assert len(gpu_cut(spec.graph, spec.calls)) == 3
    from kinac import pipeline_gpu

    assert pipeline_gpu.gpu_lowered(sess.db, key) == lower_graph_gpu(spec.graph)


def test_a_build_whose_pieces_and_kernels_are_cached_imports_neither_xdsl_nor_llvm(
    tmp_path: Path,
) -> None:
    """Undoing an edit re-assembles the entry (``gpu_lowered``, ``ptx``) from cached pieces and
    kernels: in a fresh process that imports neither xDSL nor llvmlite."""
    import os
    import subprocess

    sc = _scaling()
    ws = sc.make_workspace(tmp_path, 3)
    cache = tmp_path / "cache"
    build(ws, cache)
    (ws / "model.kina").write_text(sc.model_source(3, edited=False, wrap={1: "tanh"}))
    build(ws, cache)
    (ws / "model.kina").write_text(sc.model_source(3, edited=False))
    prog = (
        "import sys\nfrom kinac.session import Session\n"
        f"s = Session({str(ws)!r}, cache_dir={str(cache)!r}, target='cuda')\n"
        "assert s.build().error_count == 0\n"
        "print(sorted({n for n, _ in s.db.events.executed_names(None)}))\n"
        "print('xdsl' in sys.modules, 'llvmlite' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", prog], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    ran_names, imported = done.stdout.strip().splitlines()
    assert "'gpu_lowered'" in ran_names and "'ptx'" in ran_names
    assert "gpu_piece" not in ran_names and "gpu_kernel" not in ran_names
    assert imported == "False False"


def _restarting_fuse_rows(fn: Any) -> int:
    """The pass as it was: restart from the top after every merge (the reference)."""
    from kinac.ir.dialects import kina_struct as st
    from kinac.ir.gpu.fuse_rows import ROWLIKE, can_fuse, merge_kernels, only_user

    merged, changed = 0, True
    while changed:
        changed = False
        for k in list(fn.body.block.ops):
            if isinstance(k, st.KernelOp) and k.kind.data in ROWLIKE:
                user = only_user(k)
                if isinstance(user, st.KernelOp) and can_fuse(k, user):
                    merge_kernels(k, user, "row")
                    merged, changed = merged + 1, True
                    break
    return merged


def test_fuse_rows_in_one_walk_merges_as_restarting_did(tmp_path: Path) -> None:
    """``gpu-fuse-rows`` walks the entry once (it restarted after each merge: quadratic in
    the number of layers); on a 4-layer model, the block and chained norms it makes the same
    merges, giving the same IR."""
    from xdsl.context import Context
    from xdsl.dialects import func

    from kinac.ir.from_graph import graph_to_module
    from kinac.ir.fuse_kernels import FuseKernels
    from kinac.ir.gpu.fuse_rows import fuse_rows
    from kinac.ir.gpu.pipeline import GpuSelectImpl, one_device, print_ir
    from kinac.ir.testing import GraphBuilder, block_graph
    from kinac.pipeline import entry_graph

    ws = _scaling().make_workspace(tmp_path, 4)
    sess = Session(ws, no_cache=True, target="cuda")
    (key,) = _entry_keys(sess)
    g = GraphBuilder("norms")  # a norm whose output feeds the next norm's row
    x = g.param("x", "f32", (8, 64))
    for _ in range(3):
        x = g.binary(
            "mul", x, g.unary("rsqrt", g.reduce("reduce_mean", g.unary("square", x), -1, True))
        )
    graphs = [entry_graph(sess.db, key).graph, block_graph(2, 8, 16), g.build(x)]
    for graph in graphs:
        fused = []
        for fuse in (fuse_rows, _restarting_fuse_rows):
            m = graph_to_module(one_device(graph))
            for p in (GpuSelectImpl, FuseKernels):
                p().apply(Context(), m)
            fn = next(o for o in m.ops if isinstance(o, func.FuncOp))
            fused.append((fuse(fn), print_ir(m)))
        assert fused[0] == fused[1] and fused[0][0] > 0


PTX_A = """//
// Generated by LLVM NVPTX Back-End
//

.version 8.0
.target sm_90
.address_size 64

.extern .func (.param .b32 func_retval0) helper(.param .b32 x);

\t// .globl\tk_a
.visible .entry k_a(
\t.param .u64 p0
)
{
\tret;
}
"""


def test_link_ptx_one_header_declarations_once_clashes_refused() -> None:
    from kinac.codegen.ptx import link_ptx

    ptx_b = PTX_A.replace("k_a", "k_b")
    linked = link_ptx([PTX_A, ptx_b])
    assert linked.count(".version 8.0") == 1 and linked.count(".extern .func") == 1
    assert ".entry k_a(" in linked and ".entry k_b(" in linked
    assert linked.index(".entry k_a(") < linked.index(".entry k_b(")
    assert link_ptx([PTX_A, PTX_A]) == link_ptx([PTX_A])  # a repeat adds nothing
    with pytest.raises(ValueError, match="define k_a differently"):
        link_ptx([PTX_A, PTX_A.replace("ret;", "exit;")])
    with pytest.raises(ValueError, match="different targets"):
        link_ptx([PTX_A, ptx_b.replace("sm_90", "sm_80")])
    helper = ".func (.param .b32 func_retval0) k_a_helper(\n\t.param .b32 x\n)\n{\n\tret;\n}\n"
    smem = ".shared .align 16 .b8 smem_k_a[64];\n"
    with_helper = PTX_A + helper + smem
    assert link_ptx([with_helper, with_helper]) == link_ptx([with_helper])
    with pytest.raises(ValueError, match="define k_a_helper differently"):
        link_ptx([with_helper, PTX_A + helper.replace("ret;", "exit;")])
    with pytest.raises(ValueError, match="define smem_k_a differently"):
        link_ptx([with_helper, PTX_A + helper + smem.replace("64", "32")])
    empty = link_ptx([], "sm_90")
    assert ".target sm_90" in empty and ".entry" not in empty


def test_linked_ptx_of_a_layered_model_passes_ptxas(tmp_path: Path) -> None:
    """The linked module of a 2-layer model (row, softmax and map kernels, shared across
    layers) is accepted by ``ptxas -arch=sm_90``, every kernel spill-free."""
    from kinac.codegen.ptx import ptx_resources, ptxas_path

    if ptxas_path() is None:
        pytest.skip("ptxas is not installed")
    ws = _scaling().make_workspace(tmp_path, 2)
    _, out = build(ws, tmp_path / "cache")
    ((lo, linked, _),) = out.values()
    res = ptx_resources(linked, ARCH)
    assert sorted(res) == sorted(lo.functions)
    assert all(r.get("spill_stores", 0) == 0 for r in res.values()), res


def _model_args(sc: Any, layers: int) -> list[Any]:
    """Random inputs of ``benches/scaling.py``'s model: ``x``, then each layer's weights."""
    import numpy as np

    d = sc.DIMS
    sizes = {"[D]": (d["D"],), "[D D]": (d["D"], d["D"]), "[D F]": (d["D"], d["F"])}
    sizes |= {"[F D]": (d["F"], d["D"]), "[D (* KV Dh)]": (d["D"], d["KV"] * (d["D"] // d["H"]))}
    rng = np.random.default_rng(19)
    args = [rng.standard_normal((d["B"], d["S"], d["D"])).astype(np.float32)]
    for _ in range(layers):
        args += [(rng.standard_normal(sizes[t]) * 0.1).astype(np.float32) for _, t in sc.WEIGHTS]
    return args


def test_layers_sharing_kernels_run_like_the_host_emulated(tmp_path: Path) -> None:
    """The GPU lowering of a 3-layer model (its layers launch the same kernels on different
    buffers), run by the host emulation of the GPU, computes what the host build computes."""
    import numpy as np
    from gpu_support import run_emulated

    import kinac
    from kinac import pipeline_gpu

    sc = _scaling()
    ws = sc.make_workspace(tmp_path, 3)
    args = _model_args(sc, 3)
    cpu = kinac.compile(str(ws), "model", target="cpu", no_cache=True)
    want = np.asarray(cpu(sc.DIMS["H"], sc.DIMS["KV"], *args))
    sess = Session(ws, no_cache=True, target="cuda")
    assert sess.build().error_count == 0
    (key,) = _entry_keys(sess)
    from kinac.pipeline import entry_graph

    lo = pipeline_gpu.gpu_lowered(sess.db, key)
    assert len(lo.kernels) < sum(len(s.launches) for s in lo.steps)
    (got,) = run_emulated(entry_graph(sess.db, key).graph, *args)
    assert float(np.linalg.norm(got - want) / np.linalg.norm(want)) < 1e-6


def test_linked_ptx_of_every_kernel_kind_passes_ptxas() -> None:
    """Each kernel kind (long rows with shared memory, a column softmax, a gather with its
    status buffer, a concat's parts, an integer matmul) compiled alone and linked: ``ptxas``
    accepts the module, with one ``.entry`` per function of the entry."""
    from kinac.codegen.ptx import compile_ptx, link_ptx, ptx_resources, ptxas_path
    from kinac.ir.gpu.kernel_split import kernel_module, lower_gpu_kernel
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.testing import GraphBuilder

    g = GraphBuilder("kinds")
    x = g.param("x", "f32", (6, 2000))
    t = g.param("t", "f32", (50, 8))
    i = g.param("i", "i32", (3, 5))
    a = g.param("a", "i32", (4, 6))
    long = g.reduce("reduce_sum", g.unary("exp", x), -1)
    cat = g.concat([g.slice(x, 1, 0, 3), g.slice(x, 1, 5, 9)], 1)
    mm = g.matmul(a, g.transpose(a, (1, 0)))
    outs = [g.reduce("reduce_max", g.softmax(x, 0), 0), long, g.gather(t, i)]
    outs += [g.reduce("reduce_min", cat, 1), g.reduce("reduce_sum", mm, 0)]
    lw = lower_graph_gpu(g.build(*outs))
    assert {"reduce", "softmax", "gather", "concat", "matmul"} <= {s.kind for s in lw.steps}
    linked = link_ptx([compile_ptx(kernel_module([lower_gpu_kernel(k)])) for k in lw.kernels])
    assert sorted(ln.split("(")[0].split()[-1] for ln in linked.splitlines() if ".entry" in ln) == (
        sorted(lw.functions)
    )
    if ptxas_path() is None:
        pytest.skip("ptxas is not installed")
    assert sorted(ptx_resources(linked, ARCH)) == sorted(lw.functions)


@pytest.mark.gpu
def test_layers_sharing_kernels_run_like_the_host(tmp_path: Path) -> None:
    """A 3-layer model on the GPU (its layers launch the same kernels on different buffers)
    computes what the host computes."""
    from kinac.rt import cuda

    if not cuda.available():
        pytest.skip("no CUDA GPU")
    import numpy as np
    import torch

    import kinac

    sc = _scaling()
    ws = sc.make_workspace(tmp_path, 3)
    gpu = kinac.compile(str(ws), "model", target="cuda", no_cache=True)
    cpu = kinac.compile(str(ws), "model", target="cpu", no_cache=True)
    d = sc.DIMS
    args = _model_args(sc, 3)
    want = np.asarray(cpu(d["H"], d["KV"], *args))
    got = torch.from_dlpack(gpu(d["H"], d["KV"], *args)).cpu().numpy()
    assert np.all(np.isfinite(got)) and float(np.abs(want).max()) > 0.1
    assert float(np.linalg.norm(got - want) / np.linalg.norm(want)) < 1e-4
