"""Gradients on a mesh: ``kinac.value_and_grad(..., mesh=...)`` of the MLP and the transformer
block (weights annotated Megatron-style; data parallel with the batch split; 2x2 dp x tp) on 2
and 4 simulated devices. The value and every gradient equal the single-device
``value_and_grad`` within 1e-5 relative (f32, max error over max magnitude), and the collectives
every rank executed (the communicator's log, not the program) are counted exactly:

- Megatron: the forward's 2 all-reduces, the backward's one per column-parallel group whose
  input's cotangent is needed (Megatron's ``f``: 1 when ``x`` is not differentiated, 2 when it
  is, which takes reassociating each norm's partial cotangent terms), and one small
  all-reduce of each norm weight's gradient (a [D] partial sum, kept partial to the end);
- data parallel: one all-reduce per weight gradient plus one for the loss (no bucketing);
- with a weight split on the dim the batch-split activation contracts (FSDP-like), the
  gradient comes out of its matmul as a partial sum reduce-scattered into the weight's layout:
  the transpose of the forward's all-gather.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac
from kinac.errors import KinaUsageError

ROOT = Path(__file__).resolve().parent.parent / "workspaces"
COL, ROW = "@sharded(axis=1, mesh={m}{o})", "@sharded(axis=0, mesh={m}{o})"
BLOCK_W = ["wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd"]
BLOCK_T = {
    "x": "[B S D]",
    "y": "[B S D]",
    "wn1": "[D]",
    "wn2": "[D]",
    "wq": "[D D]",
    "wk": "[D (* KV Dh)]",
    "wv": "[D (* KV Dh)]",
    "wo": "[D D]",
    "wg": "[D F]",
    "wu": "[D F]",
    "wd": "[F D]",
}
BLOCK_ARGS = ["x", "wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd", "y"]
MEGATRON = {"wq": COL, "wk": COL, "wv": COL, "wo": ROW, "wg": COL, "wu": COL, "wd": ROW}
B, S, D, F, KV = 4, 32, 64, 128, 2
DIMS = {"H": 4, "KV": KV}


def block_workspace(tmp: Path, ann: dict[str, str], mesh: str) -> Path:
    """The transformer workspace plus ``loss.kina``: mean squared error of the block, its
    parameters carrying ``ann``."""
    ws = tmp / "ws"
    shutil.copytree(ROOT / "transformer", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    ps = " ".join(
        f"({n} : (tensor T {BLOCK_T[n]}{' ' + ann[n] if n in ann else ''}))" for n in BLOCK_ARGS
    )
    (ws / "loss.kina").write_text(
        f"""(module block_loss)
(import "block.kina")
{mesh}
(defn block-loss [(H : dim) (KV : dim) {ps}] -> T
  (where (= D (* H Dh)) (= H (* KV G)))
  (mean (reshape (square (sub (block H KV x wn1 wq wk wv wo wn2 wg wu wd) y)) [(* B S D)])
        :axis 0))
"""
    )
    return ws


def megatron(mesh: str, over: str = "") -> dict[str, str]:
    return {k: v.format(m=mesh, o=over) for k, v in MEGATRON.items()}


def block_args(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shape = {
        "x": (B, S, D),
        "y": (B, S, D),
        "wn1": (D,),
        "wn2": (D,),
        "wq": (D, D),
        "wk": (D, KV * 16),
        "wv": (D, KV * 16),
        "wo": (D, D),
        "wg": (D, F),
        "wu": (D, F),
        "wd": (F, D),
    }
    out = []
    for n in BLOCK_ARGS:
        scale = 1.0 if n in ("x", "y") else D**-0.5
        base = 1.0 if n in ("wn1", "wn2") else 0.0
        out.append((base + rng.standard_normal(shape[n]) * scale).astype(np.float32))
    return out


def rel_err(got: Any, want: Any) -> float:
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(np.asarray(got, np.float64) - want)) / np.max(np.abs(want)))


def assert_same(got: tuple[Any, dict[str, Any]], want: tuple[Any, dict[str, Any]]) -> None:
    assert np.shape(got[0]) == () and rel_err(got[0], want[0]) < 1e-5
    assert list(got[1]) == list(want[1])
    for name, g in want[1].items():
        assert got[1][name].shape == g.shape and got[1][name].dtype == g.dtype, name
        assert rel_err(got[1][name], g) < 1e-5, name


def same_on_every_rank(fn: Any) -> dict[tuple[str, str], int]:
    counts = fn.last_log.counts()
    n = fn.last_program.mesh.size
    assert all(fn.last_log.counts(r) == counts for r in range(n))
    return counts


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def block_ref(tmp_path_factory: pytest.TempPathFactory, cache: str) -> Any:
    ws = block_workspace(tmp_path_factory.mktemp("plain"), {}, "")
    return kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, cache_dir=cache)(
        *block_args(), **DIMS
    )


def _run(ws: Path, cache: str, mesh: Any = "") -> tuple[Any, Any]:
    fn = kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, mesh=mesh, cache_dir=cache)
    return fn, fn(*block_args(), **DIMS)


def test_block_megatron_on_two_devices(tmp_path: Path, cache: str, block_ref: Any) -> None:
    fn, got = _run(block_workspace(tmp_path, megatron("tp"), "(mesh tp [2])"), cache)
    assert_same(got, block_ref)
    assert same_on_every_rank(fn) == {("all-reduce", "tp"): 5}
    sizes = sorted(e.nbytes for e in fn.last_log.ranks[0])
    # 2 forward; 1 backward (the residual stream's cotangent between the halves; x is not
    # differentiated, so the attention input's is not needed); the 2 norm weights' gradients
    assert sizes == [D * 4] * 2 + [B * S * D * 4] * 3
    # the gradients come back in their parameters' layouts
    lay = {
        n: layout for (_, _, layout), n in zip(fn.last_program.outputs[1:], BLOCK_W, strict=True)
    }
    assert lay["wq"].dims == ((), ("tp",)) and lay["wo"].dims == (("tp",), ())
    assert lay["wn1"].dims == ((),) and not any(v.partial for v in lay.values())
    assert all(e.span.startswith("loss.kina:") for e in fn.last_log.ranks[0])
    again = fn(*block_args(), **DIMS)  # the simulator reduces in rank order: bitwise repeatable
    assert again[0].tobytes() == got[0].tobytes()
    assert all(again[1][k].tobytes() == got[1][k].tobytes() for k in BLOCK_W)


def test_block_megatron_on_four_devices(tmp_path: Path, cache: str, block_ref: Any) -> None:
    """2 KV heads over 4 devices: k and v are gathered in the forward (as in the forward
    program), and their cotangents gathered in the backward before the head merge."""
    fn, got = _run(block_workspace(tmp_path, megatron("tp"), "(mesh tp [4])"), cache)
    assert_same(got, block_ref)
    assert same_on_every_rank(fn) == {("all-reduce", "tp"): 5, ("all-gather", "tp"): 4}


def test_block_data_parallel(tmp_path: Path, cache: str, block_ref: Any) -> None:
    batch = "@sharded(axis=0, mesh=dp)"
    fn, got = _run(block_workspace(tmp_path, {"x": batch, "y": batch}, "(mesh dp [4])"), cache)
    assert_same(got, block_ref)
    # one all-reduce per weight gradient (9) and one for the loss; nothing in the forward
    assert same_on_every_rank(fn) == {("all-reduce", "dp"): len(BLOCK_W) + 1}
    prog = fn.last_program
    assert len(prog.segments) == 1 and prog.params[0][1].shape == (B // 4, S, D)
    grads = sorted(e.nbytes for e in fn.last_log.ranks[0])
    want = sorted([4] + [int(np.prod(a.shape)) * 4 for a in block_ref[1].values()])
    assert grads == want  # each whole gradient, once


def test_block_two_d(tmp_path: Path, cache: str, block_ref: Any) -> None:
    ann = megatron("grid", ", over=tp")
    ann["x"] = ann["y"] = "@sharded(axis=0, mesh=grid, over=dp)"
    ws = block_workspace(tmp_path, ann, "(mesh grid [2 2] :axes [dp tp])")
    fn, got = _run(ws, cache)
    assert_same(got, block_ref)
    # tp: as Megatron on 2; dp: every weight gradient and the loss, once each
    assert same_on_every_rank(fn) == {("all-reduce", "tp"): 5, ("all-reduce", "dp"): 10}
    assert fn.last_program.mesh.shape == (2, 2)


# -- the MLP --------------------------------------------------------------------------------

MLP_W = ["w1", "b1", "w2", "b2"]
MLP_T = {"x": "[B S D]", "y": "[B S D]", "w1": "[D F]", "b1": "[F]", "w2": "[F D]", "b2": "[D]"}
MB, MS, MD, MF = 4, 8, 16, 32


def mlp_workspace(tmp: Path, ann: dict[str, str], mesh: str = "(mesh dp [2])") -> Path:
    ws = tmp / "mlp"
    shutil.copytree(ROOT / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-cache"))
    ps = " ".join(
        f"({n} : (tensor f32 {MLP_T[n]}{' ' + ann[n] if n in ann else ''}))"
        for n in ("x", "w1", "b1", "w2", "b2", "y")
    )
    (ws / "loss.kina").write_text(
        f"""(module mlp_loss)
(import "mlp.kina")
{mesh}
(defn mlp-loss [{ps}] -> f32
  (mean (reshape (square (sub (mlp x w1 b1 w2 b2) y)) [(* B S D)]) :axis 0))
"""
    )
    return ws


def mlp_args(seed: int = 1) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    shapes = [(MB, MS, MD), (MD, MF), (MF,), (MF, MD), (MD,), (MB, MS, MD)]
    return [
        (rng.standard_normal(s) * (0.3 if len(s) < 3 else 1.0)).astype(np.float32) for s in shapes
    ]


@pytest.fixture(scope="module")
def mlp_ref(tmp_path_factory: pytest.TempPathFactory, cache: str) -> Any:
    ws = mlp_workspace(tmp_path_factory.mktemp("mlp_plain"), {}, "")
    return kinac.value_and_grad(ws, "mlp-loss", wrt=MLP_W, cache_dir=cache)(*mlp_args())


def _mlp(ws: Path, cache: str, mesh: Any = "") -> tuple[Any, Any]:
    fn = kinac.value_and_grad(ws, "mlp-loss", wrt=MLP_W, mesh=mesh, cache_dir=cache)
    return fn, fn(*mlp_args())


def test_mlp_megatron_needs_no_backward_collective(
    tmp_path: Path, cache: str, mlp_ref: Any
) -> None:
    ann = {"w1": COL, "b1": ROW, "w2": ROW}
    ws = mlp_workspace(tmp_path, {k: v.format(m="dp", o="") for k, v in ann.items()})
    fn, got = _mlp(ws, cache)
    assert_same(got, mlp_ref)
    # the forward's one all-reduce; every gradient is local (x is not differentiated)
    assert same_on_every_rank(fn) == {("all-reduce", "dp"): 1}


def test_mlp_data_parallel_and_resized(tmp_path: Path, cache: str, mlp_ref: Any) -> None:
    batch = "@sharded(axis=0, mesh=dp)"
    ws = mlp_workspace(tmp_path, {"x": batch, "y": batch})
    fn, got = _mlp(ws, cache)
    assert_same(got, mlp_ref)
    assert same_on_every_rank(fn) == {("all-reduce", "dp"): 5}
    four, got4 = _mlp(ws, cache, 4)  # annotated for 2 devices, re-planned for 4
    assert_same(got4, mlp_ref)
    assert four.last_program.mesh.shape == (4,)
    assert same_on_every_rank(four) == {("all-reduce", "dp"): 5}


def test_mlp_gradient_reduce_scattered_into_a_split_weight(
    tmp_path: Path, cache: str, mlp_ref: Any
) -> None:
    """Weights split on their contraction dim, the batch split too: each weight's gradient is a
    partial sum over the batch axis that the weight's layout wants split, so it is
    reduce-scattered (the transpose of an all-gather), not all-reduced and sliced."""
    ann = {"x": ROW, "w1": ROW, "w2": COL}
    ws = mlp_workspace(tmp_path, {k: v.format(m="dp", o="") for k, v in ann.items()})
    fn, got = _mlp(ws, cache)
    assert_same(got, mlp_ref)
    counts = same_on_every_rank(fn)
    # the forward: x moved to the contraction split (all-to-all) and two GSPMD matmuls whose
    # partial sums are reduce-scattered; the backward: the two weight gradients
    assert counts == {
        ("all-to-all", "dp"): 2,
        ("reduce-scatter", "dp"): 4,
        ("all-gather", "dp"): 1,
        ("all-reduce", "dp"): 3,  # the loss and the two biases' gradients
    }
    prog = fn.last_program
    made_by = {s.dst: s for s in prog.steps if hasattr(s, "dst")}
    lay = [layout.dims for _, _, layout in prog.outputs]
    assert lay[1] == (("dp",), ()) and lay[3] == ((), ("dp",))
    for k, dim in ((1, 0), (3, 1)):  # w1's gradient split on rows, w2's on columns
        step = made_by[prog.outputs[k][0]]
        assert (step.kind, step.dim) == ("reduce-scatter", dim)


def test_layouts_from_python_need_no_annotation(tmp_path: Path, cache: str, mlp_ref: Any) -> None:
    """The trainer's surface: the mesh and the layouts given from Python."""
    from kinac.api_grad_sharded import mesh_value_and_grad
    from kinac.artifacts.sharded import MeshSpec

    ws = mlp_workspace(tmp_path, {}, "")
    grid = MeshSpec("grid", (2, 2), ("dp", "tp"))
    lay = {"x": [("dp",), (), ()], "y": [("dp",), (), ()], "w1": [(), ("tp",)], "b1": [("tp",)]}
    lay["w2"] = [("tp",), ()]
    fn = mesh_value_and_grad(ws, "mlp-loss", MLP_W, grid, lay, cache_dir=cache)  # type: ignore[arg-type]
    assert_same(fn(*mlp_args()), mlp_ref)
    assert same_on_every_rank(fn) == {("all-reduce", "tp"): 1, ("all-reduce", "dp"): 5}
    with pytest.raises(KinaUsageError, match="mesh axis `pp`"):
        mesh_value_and_grad(ws, "mlp-loss", MLP_W, grid, {"x": [("pp",), (), ()]})
    with pytest.raises(KinaUsageError, match="not a parameter"):
        mesh_value_and_grad(ws, "mlp-loss", MLP_W, grid, {"z": [()]})


def test_bad_requests_are_usage_errors(tmp_path: Path, cache: str) -> None:
    ws = mlp_workspace(tmp_path, {"x": "@sharded(axis=0, mesh=dp)"})
    with pytest.raises(KinaUsageError, match="target='cpu'"):
        kinac.value_and_grad(ws, "mlp-loss", wrt=MLP_W, mesh="", target="cuda")
    with pytest.raises(KinaUsageError, match="no tensor parameter `w9`"):
        kinac.value_and_grad(ws, "mlp-loss", wrt=["w9"], mesh="")
    with pytest.raises(KinaUsageError, match="no mesh named `tpp`"):
        kinac.value_and_grad(ws, "mlp-loss", wrt=MLP_W, mesh="tpp")
    fn = kinac.value_and_grad(ws, "mlp-loss", wrt=MLP_W, mesh=3, cache_dir=cache)
    with pytest.raises(KinaUsageError, match="3 devices of mesh axis dp do not divide"):
        fn(*mlp_args())


def test_block_megatron_differentiating_x(tmp_path: Path, cache: str) -> None:
    """With ``x`` in ``wrt`` the attention input's cotangent is needed too: Megatron's 2
    backward all-reduces, not 4 (each RMSNorm's cotangent is the residual's plus two partial
    terms: summed in the transform's order, ``(residual + t1) + t2``, each add would reduce one
    term; :func:`kinac.shard.grad.reassociate_partials` sums the partial terms first)."""
    ws = block_workspace(tmp_path, megatron("tp"), "(mesh tp [2])")
    wrt = ["x", *BLOCK_W]
    want = kinac.value_and_grad(ws, "block-loss", wrt=wrt, cache_dir=cache)(*block_args(), **DIMS)
    fn = kinac.value_and_grad(ws, "block-loss", wrt=wrt, mesh="", cache_dir=cache)
    assert_same(fn(*block_args(), **DIMS), want)
    sizes = sorted(e.nbytes for e in fn.last_log.ranks[0])
    assert sizes == [D * 4] * 2 + [B * S * D * 4] * 4  # 2 forward + 2 backward, 2 norm weights


def test_data_parallel_gradients_bucketed(tmp_path: Path, cache: str, block_ref: Any) -> None:
    """``bucket_mb=``: the trailing all-reduces (9 gradients and the loss) travel as one
    bucket (or as many as the cap needs), packed and unpacked by local segments; the values
    are bitwise the unbucketed run's (the same elementwise sums in rank order)."""
    batch = "@sharded(axis=0, mesh=dp)"
    ws = block_workspace(tmp_path, {"x": batch, "y": batch}, "(mesh dp [4])")
    plain = kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, mesh="", cache_dir=cache)
    want = plain(*block_args(), **DIMS)
    for mb, n in ((25, 1), (0.0625, 3)):  # 64 KiB holds 2 of the three 32 KiB FFN gradients
        fn = kinac.value_and_grad(
            ws, "block-loss", wrt=BLOCK_W, mesh="", cache_dir=cache, bucket_mb=mb
        )
        got = fn(*block_args(), **DIMS)
        assert got[0].tobytes() == want[0].tobytes()
        assert all(got[1][k].tobytes() == want[1][k].tobytes() for k in BLOCK_W)
        log = fn.last_log
        assert same_on_every_rank(fn) == {("all-reduce", "dp"): n}, mb
        assert log.bytes_per_device() == plain.last_log.bytes_per_device()
        assert max(e.nbytes for e in log.ranks[0]) <= max(mb * 2**20, 32 * 1024)
    with pytest.raises(KinaUsageError, match="bucket_mb"):
        kinac.value_and_grad(ws, "block-loss", wrt=BLOCK_W, mesh="", bucket_mb=-1)
