"""Sharding propagation (``shard_propagate``): layouts inferred from weight annotations
alone, the collectives they imply, and the query's incrementality (docs/sharding.md)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from kinac import pipeline
from kinac.pipeline_support import EntryKey
from kinac.rules.codec import encode
from kinac.session import Session

WS = Path(__file__).resolve().parent.parent / "workspaces" / "transformer"
DIMS = {"H": 4, "KV": 2, "B": 4, "S": 128, "D": 256, "F": 704}
COL, ROW, BATCH = (
    "@sharded(axis=1, mesh=tp)",
    "@sharded(axis=0, mesh=tp)",
    "@sharded(axis=0, mesh=tp)",
)
WEIGHTS = {
    "wq": "[D D]",
    "wk": "[D (* KV Dh)]",
    "wv": "[D (* KV Dh)]",
    "wo": "[D D]",
    "wg": "[D F]",
    "wu": "[D F]",
    "wd": "[F D]",
}


def annotated_block(tmp: Path, annotations: dict[str, str], mesh: str = "(mesh tp [2])") -> Path:
    """A copy of the transformer workspace whose ``block`` parameters carry ``annotations``."""
    dst = tmp / "ws"
    shutil.copytree(WS, dst, ignore=shutil.ignore_patterns(".kinac-cache"))
    block = dst / "block.kina"
    text = block.read_text().replace('(import "ffn.kina")', f'(import "ffn.kina")\n{mesh}')
    for name, ann in annotations.items():
        shape = WEIGHTS.get(name, "[B S D]")
        old = f"({name} : (tensor T {shape}))"
        assert old in text, old
        text = text.replace(old, f"({name} : (tensor T {shape} {ann}))")
    block.write_text(text)
    return dst


def plan_of(ws: Path, defn: str = "block", dims: dict[str, int] = DIMS) -> tuple[Any, Any]:
    db = Session(ws, no_cache=True).db
    key = EntryKey("block.kina", defn, tuple(sorted(dims.items())), (("T", "f32"),), "cpu")
    spec = pipeline.entry_graph(db, key)
    assert spec.graph is not None, spec.diagnostics
    return spec.graph, pipeline.shard_propagate(db, key)


MEGATRON = {"wq": COL, "wk": COL, "wv": COL, "wo": ROW, "wg": COL, "wu": COL, "wd": ROW}


def test_megatron_from_weight_annotations_alone(tmp_path: Path) -> None:
    graph, plan = plan_of(annotated_block(tmp_path, MEGATRON))
    assert not plan.diagnostics
    kinds = [(c.kind, graph.nodes[c.node].op, graph.nodes[c.consumer].op) for c in plan.collectives]
    assert kinds == [("all-reduce", "matmul", "add")] * 2  # Megatron's count, after wo and wd
    by_op = [(graph.nodes[lay.node].op, lay.spec("tp")) for lay in plan.layouts]
    # Attention heads split: q/k/v projections on their columns, scores and softmax on heads.
    assert [s for op, s in by_op if op == "softmax"] == ["S(1)"]
    assert [s for op, s in by_op if op == "repeat_interleave"] == ["S(1)", "S(1)"]
    assert [s for op, s in by_op if op == "silu"] == ["S(2)"]
    # The two row-parallel matmuls are partial sums; the residual stream is replicated.
    assert [s for op, s in by_op if op == "matmul"].count("P(sum)") == 2
    assert [s for op, s in by_op if op == "add"][-1] == "R"
    assert all(c.cause is not None for c in plan.collectives)
    wo = next(p.nid for p in _sig(graph, tmp_path).params if p.name == "wo")
    assert plan.collectives[0].bytes == 4 * 128 * 256 * 4  # the whole f32 activation
    assert wo < plan.collectives[0].cause.loc.nid  # the annotation inside wo's type


def _sig(graph: object, tmp_path: Path) -> Any:
    db = Session(tmp_path / "ws", no_cache=True).db
    return pipeline.signature(db, pipeline.DefnKey("block.kina", "block"))


def test_data_parallel_forward_has_no_collective(tmp_path: Path) -> None:
    graph, plan = plan_of(annotated_block(tmp_path, {"x": BATCH}))
    assert not plan.diagnostics and plan.collectives == ()
    acts = [lay for lay in plan.layouts if lay.node >= len(graph.params)]
    batched = [lay for lay in acts if graph.nodes[lay.node].type.shape[:1] == (4,)]
    assert batched and all(lay.spec("tp") == "S(0)" for lay in batched)
    assert all(lay.spec("tp") == "R" for lay in plan.layouts[1 : len(graph.params)])  # weights
    assert all(plan.layout_of(graph, i) == lay for i, lay in enumerate(plan.layouts))


def test_no_annotation_no_mesh(tmp_path: Path) -> None:
    graph, plan = plan_of(annotated_block(tmp_path, {}))
    assert plan.mesh is None and plan.collectives == ()
    # compact: no layout per node is stored (issue 19: 165 KB re-encoded per edit at L=32);
    # each node's layout is derived, whole on one device
    assert plan.layouts == () and len(encode(plan)) < 200
    for i, n in enumerate(graph.nodes):
        lay = plan.layout_of(graph, i)
        assert (lay.node, lay.dims, lay.partial) == (i, tuple(() for _ in n.type.shape), ())
        assert lay.name == (graph.params[i][0] if i < len(graph.params) else f"%{i}")
        assert lay.spec("tp") == "R"


def test_editing_one_annotation_reruns_only_that_entrys_propagation(tmp_path: Path) -> None:
    ws = tmp_path / "two"
    ws.mkdir()
    (ws / "kina.toml").write_text('[workspace]\nname = "two"\nsources = ["*.kina"]\n')
    src = ws / "m.kina"
    src.write_text(
        "(mesh tp [2])\n"
        "(defn f [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N D]) (exp x))\n"
        "(defn g [(x : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))] -> (tensor f32 [N D]) (exp x))\n"
    )
    keys = {d: EntryKey("m.kina", d, (("D", 4), ("N", 4)), (), "cpu") for d in "fg"}

    def run() -> tuple[Session, dict[str, Any]]:
        sess = Session(ws, cache_dir=str(tmp_path / "cache"))
        plans = {d: pipeline.shard_propagate(sess.db, k) for d, k in keys.items()}
        sess.db.commit()  # as a build does: the next process reuses the memos
        sess.close()
        return sess, plans

    _, before = run()
    src.write_text(
        src.read_text()
        .replace("(exp x))\n(defn g", "(exp x))\n(defn g", 1)
        .replace(
            "[N D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N D]) (exp",
            "[N D] @sharded(axis=1, mesh=tp)))] -> (tensor f32 [N D]) (exp",
            1,
        )
    )
    sess, after = run()
    ran = sess.db.events.executed_names(None)
    assert {k for n, k in ran if n == "shard_propagate"} == {keys["f"]}
    assert {k for n, k in ran if n == "entry_graph"} == {keys["f"]}
    assert before["g"] == after["g"]
    assert (
        before["f"].layouts[-1].spec("tp") == "S(0)" and after["f"].layouts[-1].spec("tp") == "S(1)"
    )


def test_megatron_on_four_devices_with_two_kv_heads(tmp_path: Path) -> None:
    """KV = 2 heads cannot split 4 ways: k and v projections are gathered before their
    reshape, and repeat-interleave computes its heads whole, then keeps its own quarter."""
    graph, plan = plan_of(annotated_block(tmp_path, MEGATRON, "(mesh tp [4])"))
    assert plan.count("all-reduce") == 2 and plan.count("all-gather") == 2
    slices = [c for c in plan.collectives if c.kind == "slice"]
    assert [graph.nodes[c.node].op for c in slices] == ["repeat_interleave"] * 2
    assert all(c.node == c.consumer for c in slices)  # the result, not the 2-head input


GRID = "(mesh grid [2 2] :axes [dp tp])"


def test_two_d_mesh_data_and_tensor_parallel(tmp_path: Path) -> None:
    over = {k: v.replace("mesh=tp", "mesh=grid, over=tp") for k, v in MEGATRON.items()}
    over["x"] = "@sharded(axis=0, mesh=grid, over=dp)"
    graph, plan = plan_of(annotated_block(tmp_path, over, GRID))
    assert not plan.diagnostics and plan.axes == (("dp", 2), ("tp", 2))
    assert [(c.kind, c.axis) for c in plan.collectives] == [("all-reduce", "tp")] * 2
    out = plan.layouts[graph.outputs[0]]
    assert (out.spec("dp"), out.spec("tp")) == ("S(0)", "R")
    soft = next(lay for lay in plan.layouts if graph.nodes[lay.node].op == "softmax")
    assert (soft.spec("dp"), soft.spec("tp")) == ("S(0)", "S(1)")


def test_mesh_from_kina_toml(tmp_path: Path) -> None:
    ws = tmp_path / "toml"
    ws.mkdir()
    (ws / "kina.toml").write_text(
        '[workspace]\nname = "t"\n\n[[mesh]]\nname = "grid"\nshape = [2, 2]\naxes = ["dp", "tp"]\n'
    )
    (ws / "m.kina").write_text(
        "(defn f [(x : (tensor f32 [N D] @sharded(axis=0, mesh=grid, over=dp)))\n"
        "         (w : (tensor f32 [D F] @sharded(axis=0, mesh=grid, over=tp)))]\n"
        "  -> (tensor f32 [N F]) (matmul x w))\n"
    )
    db = Session(ws, no_cache=True).db
    key = EntryKey("m.kina", "f", (("D", 4), ("F", 6), ("N", 4)), (), "cpu")
    plan = pipeline.shard_propagate(db, key)
    assert plan.mesh == "grid"
    # x's D is sliced locally over tp to meet w's rows, the product is partial over tp
    assert [(c.kind, c.axis, c.consumer) for c in plan.collectives] == [
        ("slice", "tp", 2),
        ("all-reduce", "tp", -1),
    ]
    assert plan.layouts[-1].dims == (("dp",), ()) and plan.layouts[-1].partial == ("tp",)
