"""``reshard`` and the collective primitives written by hand (docs/sharding.md, "reshard and
the collective primitives"): kept as graph ops by specialisation, the identity on one device
(interpreter, host build, GPU PTX), pinned layouts for propagation, and redistributed into by
the per-device program. Redistribution oracle in DTensor's style: every source placement x
every target placement on meshes of 2 and 4 devices and 2x2, run on every rank against the
unsharded value, with partial inputs in unequal shares (a dropped or doubled reduction fails).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from shard_support import assemble, run_lockstep, run_simulated, shard

from kinac import pipeline, pipeline_shard
from kinac.artifacts.sharded import Collective
from kinac.pipeline_support import EntryKey
from kinac.session import Session
from kinac.tir.interp import evaluate

DIMS = (("D", 8), ("N", 8))


def _session(tmp_path: Path, src: str) -> Session:
    (tmp_path / "kina.toml").write_text('[workspace]\nname = "r"\nsources = ["*.kina"]\n')
    (tmp_path / "a.kina").write_text(src)
    return Session(tmp_path, no_cache=True)


def _key(defn: str, target: str = "cpu", dims: tuple = DIMS) -> EntryKey:
    return EntryKey("a.kina", defn, dims, (), target)


def traffic(prog) -> list[tuple[str, str]]:
    return [(s.kind, s.axis) for s in prog.steps if isinstance(s, Collective)]


def run_both(db, key: EntryKey, seed: int = 0, simulate: bool = False) -> object:
    """The program of ``key`` on every rank (reference evaluator per segment; the threaded
    simulator too when asked) against the unsharded graph; returns the program."""
    graph = pipeline.entry_graph(db, key).graph
    prog = pipeline_shard.device_program(db, key)
    assert graph is not None and prog is not None, pipeline.shard_propagate(db, key)
    rng = np.random.default_rng(seed)
    glob = [rng.uniform(-2, 2, t.shape).astype(np.float32) for _, t in graph.params]
    want = evaluate(graph, *glob)[0]
    per = [shard(a, lay, prog.mesh, rng) for a, (_, _, lay) in zip(glob, prog.params, strict=True)]
    local = [[p[r] for p in per] for r in range(prog.mesh.size)]
    segs = [lambda *a, s=s: evaluate(s, *a) for s in prog.segments]
    for runner in (run_lockstep, run_simulated) if simulate else (run_lockstep,):
        outs = runner(prog, segs, local)
        got = assemble([o[0] for o in outs], prog.outputs[0][2], prog.mesh)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return prog


def test_specialisation_keeps_them_as_reshard_nodes(tmp_path: Path) -> None:
    src = """(mesh tp [2])
(defn f [(x : (tensor f32 [N D]))] -> (tensor f32 [N D])
  (all-gather (reshard (exp x) @sharded(axis=1, mesh=tp)) @replicated))
"""
    db = _session(tmp_path, src).db
    g = pipeline.entry_graph(db, _key("f")).graph
    ops = [(n.op, n.attr("kind"), n.attr("layout")) for n in g.nodes]
    assert ops[2:] == [
        ("reshard", "reshard", (("sharded", (("axis", 1), ("mesh", "tp"))),)),
        ("reshard", "all-gather", (("replicated", ()),)),
    ]
    assert ops[1][0] == "exp" and g.outputs == (3,)
    assert [n.attr("site")[:2] for n in g.nodes[2:]] == [("a.kina", "f")] * 2


def test_identity_on_one_device_host_build(tmp_path: Path) -> None:
    """No mesh: the host build runs it as the identity (the interpreter's meaning)."""
    import kinac

    src = """(defn f [(x : (tensor f32 [N D]))] -> (tensor f32 [N D])
  (add (reshard (exp x) @replicated) (all-reduce x)))
"""
    _session(tmp_path, src)
    f = kinac.compile(str(tmp_path / "a.kina"), "f")
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(x) + x, rtol=1e-6)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_identity_on_one_device_gpu_ptx(tmp_path: Path) -> None:
    """The GPU lowering of a graph with reshard nodes gives PTX that ptxas accepts."""
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu.pipeline import lower_graph_gpu

    src = """(defn f [(x : (tensor f32 [N D]))] -> (tensor f32 [N D])
  (mul (reshard (exp x) @replicated) (all-reduce x)))
"""
    db = _session(tmp_path, src).db
    g = pipeline.entry_graph(db, _key("f", target="cuda")).graph
    assert any(n.op == "reshard" for n in g.nodes)
    ptx = compile_ptx(lower_graph_gpu(g).llvm_ir, "sm_90")
    (tmp_path / "f.ptx").write_text(ptx)
    r = subprocess.run(
        ["ptxas", "-arch=sm_90", str(tmp_path / "f.ptx"), "-o", str(tmp_path / "f.cubin")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr


HAND = """(mesh tp [{n}])
(defn ar [(x : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))
          (w : (tensor f32 [D D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N D])
  (exp (all-reduce (matmul x w) @replicated)))
(defn rs [(x : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))
          (w : (tensor f32 [D D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N D])
  (exp (reduce-scatter (matmul x w) @sharded(axis=0, mesh=tp))))
(defn ag [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N D])
  (softmax (all-gather x) :axis 0))
(defn a2a [(x : (tensor f32 [N D] @sharded(axis=0, mesh=tp)))] -> (tensor f32 [N D])
  (softmax (all-to-all x @sharded(axis=1, mesh=tp)) :axis 0))
(defn pin [(x : (tensor f32 [N D])) (w : (tensor f32 [D D]))] -> (tensor f32 [N D])
  (matmul (reshard x @sharded(axis=1, mesh=tp)) w))
"""


@pytest.mark.parametrize("n", [2, 4])
def test_hand_written_collectives_are_the_steps(tmp_path: Path, n: int) -> None:
    """Each collective primitive is exactly its collective step, and the program equals the
    unsharded one (lockstep and the threaded simulator)."""
    db = _session(tmp_path, HAND.format(n=n)).db
    want = {
        "ar": [("all-reduce", "tp")],
        "rs": [("reduce-scatter", "tp")],
        "ag": [("all-gather", "tp")],
        "a2a": [("all-to-all", "tp")],
        # the reshard pins x split on the contraction dim (x, open, is replicated: sliced
        # locally); w, open, is inferred split on its rows (the caller's array is sliced);
        # the product is a partial sum, all-reduced at the output
        "pin": [("slice", "tp"), ("all-reduce", "tp")],
    }
    for defn, steps in want.items():
        prog = run_both(db, _key(defn), seed=n, simulate=True)
        assert sorted(traffic(prog)) == sorted(steps), defn
        plan = pipeline.shard_propagate(db, _key(defn))
        assert sorted((c.kind, c.axis) for c in plan.collectives) == sorted(steps), defn
    # the written layout wins: the reduce-scatter's result is split on dim 0
    plan = pipeline.shard_propagate(db, _key("rs"))
    rs = next(
        i
        for i, nd in enumerate(pipeline.entry_graph(db, _key("rs")).graph.nodes)
        if nd.op == "reshard"
    )
    assert plan.layouts[rs].dims == (("tp",), ()) and plan.layouts[rs].partial == ()


PLACEMENTS_1D = {
    "S0": "@sharded(axis=0, mesh=m)",
    "S1": "@sharded(axis=1, mesh=m)",
    "R": "@replicated(mesh=m)",
    "P": "@partial(sum, mesh=m)",
}
TARGETS_1D = {k: v for k, v in PLACEMENTS_1D.items() if k != "P"}


def _oracle_1d(n: int) -> tuple[str, list[tuple[str, str, str]]]:
    lines = [f"(mesh m [{n}])"]
    cases = []
    for (s, sa), (t, ta) in itertools.product(PLACEMENTS_1D.items(), TARGETS_1D.items()):
        name = f"r_{s}_{t}"
        # `exp` after: the resharded value is computed on, not only returned
        lines.append(
            f"(defn {name} [(x : (tensor f32 [N D] {sa}))] -> (tensor f32 [N D])"
            f" (exp (reshard x {ta})))"
        )
        cases.append((name, s, t))
    return "\n".join(lines) + "\n", cases


EXPECTED_1D = {
    # source -> target: the collective steps (one rule, kinac.shard.redistribute)
    ("S0", "S0"): [],
    ("S0", "S1"): ["all-to-all"],
    ("S0", "R"): ["all-gather"],
    ("S1", "S0"): ["all-to-all"],
    ("S1", "S1"): [],
    ("S1", "R"): ["all-gather"],
    ("R", "S0"): ["slice"],
    ("R", "S1"): ["slice"],
    ("R", "R"): [],
    ("P", "S0"): ["reduce-scatter"],
    ("P", "S1"): ["reduce-scatter"],
    ("P", "R"): ["all-reduce"],
}


@pytest.mark.parametrize("n", [2, 4])
def test_reshard_oracle_1d(tmp_path: Path, n: int) -> None:
    src, cases = _oracle_1d(n)
    db = _session(tmp_path, src).db
    for name, s, t in cases:
        prog = run_both(db, _key(name), seed=zlib.crc32(name.encode()) % 1000)
        assert [k for k, _ in traffic(prog)] == EXPECTED_1D[(s, t)], name


def test_reshard_oracle_2x2(tmp_path: Path) -> None:
    """On a 2x2 mesh: every per-axis placement of the source (each axis S(0), S(1), R or P,
    one axis per dim) to every target (S(0), S(1), R per axis), on every rank."""
    axes = ("dp", "tp")

    def annots(spec: dict[str, str]) -> str:
        out = []
        for ax, p in spec.items():
            if p == "P":
                out.append(f"@partial(sum, mesh=g, over={ax})")
            elif p.startswith("S"):
                out.append(f"@sharded(axis={p[1]}, mesh=g, over={ax})")
        return " ".join(out) or "@replicated(mesh=g)"

    def specs(kinds: tuple[str, ...]) -> list[dict[str, str]]:
        return [dict(zip(axes, c, strict=True)) for c in itertools.product(kinds, repeat=2)]

    lines = ["(mesh g [2 2] :axes [dp tp])"]
    names = []
    for k, (a, b) in enumerate(
        itertools.product(specs(("S0", "S1", "R", "P")), specs(("S0", "S1", "R")))
    ):
        name = f"r{k}"
        lines.append(
            f"(defn {name} [(x : (tensor f32 [N D] {annots(a)}))] -> (tensor f32 [N D])"
            f" (exp (reshard x {annots(b)})))"
        )
        names.append(name)
    db = _session(tmp_path, "\n".join(lines) + "\n").db
    kinds = set()
    for k, name in enumerate(names):
        prog = run_both(db, _key(name), seed=k, simulate=k % 37 == 0)
        kinds |= {c for c, _ in traffic(prog)}
    assert kinds == {"all-reduce", "reduce-scatter", "all-gather", "all-to-all", "slice"}


def test_reshard_pins_what_follows(tmp_path: Path) -> None:
    """Propagation takes the written layout forward (the exp after it is split, no gather),
    and a consumer's split does not flow back across it into its operand."""
    src = """(mesh tp [2])
(defn f [(x : (tensor f32 [N D])) (y : (tensor f32 [N D] @sharded(axis=1, mesh=tp)))]
  -> (tensor f32 [N D])
  (add (exp (reshard (neg x) @sharded(axis=0, mesh=tp))) (exp y)))
"""
    db = _session(tmp_path, src).db
    plan = pipeline.shard_propagate(db, _key("f"))
    g = pipeline.entry_graph(db, _key("f")).graph
    by_op = {n.op: i for i, n in enumerate(g.nodes)}
    assert plan.layouts[by_op["neg"]].dims == ((), ())  # not split by what follows
    assert plan.layouts[by_op["reshard"]].dims == (("tp",), ())
    after = next(i for i, n in enumerate(g.nodes) if n.args == (by_op["reshard"],))
    assert plan.layouts[after].dims == (("tp",), ())  # the exp of the reshard follows it
    run_both(db, _key("f"), simulate=True)


@pytest.mark.gpu
def test_identity_on_one_device_gpu_runs(tmp_path: Path) -> None:
    """On the GPU (one device): the reshard and the collective are the identity, the result
    equals torch's, and the output that is a reshard of a parameter is a copy of it."""
    from kinac.rt import cuda

    if not cuda.available():  # before importing torch (seconds)
        pytest.skip("no CUDA GPU")
    import torch

    import kinac

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU with PyTorch")
    src = """(defn f [(x : (tensor f32 [N D]))] -> (tensor f32 [N D])
  (mul (reshard (exp x) @replicated) (all-reduce x)))
(defn g [(x : (tensor f32 [N D]))] -> (tensor f32 [N D])
  (reshard x @replicated))
"""
    _session(tmp_path, src)
    x = torch.randn(64, 96, device="cuda")
    f = kinac.compile(str(tmp_path / "a.kina"), "f", target="cuda")
    torch.testing.assert_close(torch.from_dlpack(f(x)), torch.exp(x) * x)
    g = kinac.compile(str(tmp_path / "a.kina"), "g", target="cuda")
    torch.testing.assert_close(torch.from_dlpack(g(x)), x)


def test_two_d_collective_keeps_the_axes_it_names(tmp_path: Path) -> None:
    """On a 2x2 mesh, an all-reduce over `tp` that also names the `dp` split it keeps moves
    nothing over `dp`; one that leaves `dp` out makes the result replicated over `dp`, which
    for an all-reduce is refused (K0707: that change is an all-gather)."""
    src = """(mesh grid [2 2] :axes [dp tp])
(defn keep [(x : (tensor f32 [N D] @sharded(axis=0, mesh=grid, over=dp)
                                   @sharded(axis=1, mesh=grid, over=tp)))
            (w : (tensor f32 [D D] @sharded(axis=0, mesh=grid, over=tp)))] -> (tensor f32 [N D])
  (exp (all-reduce (matmul x w) @replicated(mesh=grid, over=tp)
                                @sharded(axis=0, mesh=grid, over=dp))))
(defn drop [(x : (tensor f32 [N D] @sharded(axis=0, mesh=grid, over=dp)
                                   @sharded(axis=1, mesh=grid, over=tp)))
            (w : (tensor f32 [D D] @sharded(axis=0, mesh=grid, over=tp)))] -> (tensor f32 [N D])
  (exp (all-reduce (matmul x w) @replicated(mesh=grid, over=tp))))
"""
    db = _session(tmp_path, src).db
    prog = run_both(db, _key("keep"), simulate=True)
    assert traffic(prog) == [("all-reduce", "tp")]
    plan = pipeline.shard_propagate(db, _key("drop"))
    errs = [d for d in plan.diagnostics if d.is_error]
    assert [d.code for d in errs] == ["K0707"]
    assert "from S(0) into R over `dp`: that is an all-gather" in errs[0].message
