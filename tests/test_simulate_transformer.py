"""The transformer block (``workspaces/transformer``, entry ``block_small``) sharded by weight
annotations alone and run through the user surface: ``kinac.compile(..., mesh=...)`` and
``kinac run --simulate``. Each run is compared with the unsharded compiled block on the same
random inputs (within 1e-5, f32), and the collectives the simulated ranks actually executed
are counted from the communicator's log (not from the program): Megatron on 4 devices (2
all-reduces; with 2 KV heads, also 2 all-gathers), data parallel (none), 2x2 dp x tp (2 over
tp). Errors in the mesh request are ``kinac: error:`` lines, never tracebacks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_shard_propagate import GRID, MEGATRON, WEIGHTS, annotated_block

import kinac
from kinac.cli import main

DIMS = {"H": 4, "KV": 2}  # block_small: B=4 S=128 D=256 F=704 in kina.toml
SHAPES = {"x": (4, 128, 256), "wn1": (256,), "wn2": (256,)}


def _shape(name: str) -> tuple[int, ...]:
    """``[D (* KV Dh)]`` at KV=2, Dh=64 is [256 128]; ``[F D]`` is [704 256]."""
    if name in ("x", "wn1", "wn2"):
        return SHAPES[name]
    size = {"D": 256, "F": 704, "(* KV Dh)": 128}
    first, rest = WEIGHTS[name][1:-1].split(" ", 1)
    return (size[first], size[rest])


def _inputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    names = ["x", "wn1", "wq", "wk", "wv", "wo", "wn2", "wg", "wu", "wd"]
    out = []
    for n in names:
        scale = 1.0 if n in ("x", "wn1", "wn2") else 256**-0.5
        out.append(
            (rng.standard_normal(_shape(n)) * scale + (0.1 if n == "x" else 0)).astype(np.float32)
        )
    return out


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One cache for the module: the unsharded block and shared kernels compile once."""
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def single(tmp_path_factory: pytest.TempPathFactory, cache: str) -> np.ndarray:
    ws = annotated_block(tmp_path_factory.mktemp("plain"), {})
    return kinac.compile(ws, "block_small", cache_dir=cache)(*_inputs(), **DIMS)


def _sharded(ws: Path, cache: str, mesh: Any = None) -> Any:
    return kinac.compile(ws, "block_small", mesh="" if mesh is None else mesh, cache_dir=cache)


def test_megatron_on_four_devices(tmp_path: Path, cache: str, single: np.ndarray) -> None:
    ws = annotated_block(tmp_path, MEGATRON, "(mesh tp [4])")
    fn = _sharded(ws, cache)
    got = fn(*_inputs(), **DIMS)
    assert got.shape == single.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, single, rtol=1e-5, atol=1e-5)
    counts = fn.last_log.counts()
    assert counts[("all-reduce", "tp")] == 2  # Megatron's count, executed by every rank
    assert counts == {("all-reduce", "tp"): 2, ("all-gather", "tp"): 2}  # 2 KV heads, 4 ways
    assert all(c == counts for c in (fn.last_log.counts(r) for r in range(4)))
    # every all-reduce moves the whole f32 activation [4 128 256] on each device
    sizes = [e.nbytes for e in fn.last_log.ranks[0] if e.kind == "all-reduce"]
    assert sizes == [4 * 128 * 256 * 4] * 2
    assert all(e.span.startswith("block.kina:") for e in fn.last_log.ranks[0])


def test_data_parallel_runs_without_collectives(
    tmp_path: Path, cache: str, single: np.ndarray
) -> None:
    ws = annotated_block(tmp_path, {"x": "@sharded(axis=0, mesh=tp)"}, "(mesh tp [4])")
    fn = _sharded(ws, cache)
    np.testing.assert_allclose(fn(*_inputs(), **DIMS), single, rtol=1e-5, atol=1e-5)
    assert fn.last_log.counts() == {} and fn.last_log.bytes_per_device() == 0


def test_two_d_mesh_reduces_over_tp_only(tmp_path: Path, cache: str, single: np.ndarray) -> None:
    over = {k: v.replace("mesh=tp", "mesh=grid, over=tp") for k, v in MEGATRON.items()}
    over["x"] = "@sharded(axis=0, mesh=grid, over=dp)"
    fn = _sharded(annotated_block(tmp_path, over, GRID), cache, "grid")
    np.testing.assert_allclose(fn(*_inputs(), **DIMS), single, rtol=1e-5, atol=1e-5)
    assert fn.last_log.counts() == {("all-reduce", "tp"): 2}
    assert fn.describe().startswith("simulated on mesh `grid` (dp=2 x tp=2): 2 collectives")


def test_a_resized_mesh_is_replanned(tmp_path: Path, cache: str, single: np.ndarray) -> None:
    """Annotated for 2 devices, run on 4 (mesh=4) and on 1: the same global result."""
    ws = annotated_block(tmp_path, MEGATRON)  # (mesh tp [2])
    four = _sharded(ws, cache, 4)
    np.testing.assert_allclose(four(*_inputs(), **DIMS), single, rtol=1e-5, atol=1e-5)
    assert (
        four.last_program.mesh.shape == (4,) and four.last_log.counts()[("all-reduce", "tp")] == 2
    )
    one = _sharded(ws, cache, (1,))
    np.testing.assert_allclose(one(*_inputs(), **DIMS), single, rtol=1e-5, atol=1e-5)


def test_an_entry_without_annotations_runs_replicated(
    tmp_path: Path, cache: str, single: np.ndarray
) -> None:
    fn = _sharded(annotated_block(tmp_path, {}), cache, 3)
    np.testing.assert_array_equal(fn(*_inputs(), **DIMS), single)  # every device runs it whole
    assert fn.last_log.counts() == {} and fn.last_program.mesh.shape == (3,)


def test_kinac_run_simulate_prints_what_the_unsharded_run_prints(
    tmp_path: Path, cache: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = annotated_block(tmp_path, MEGATRON, "(mesh tp [4])")
    base = ["run", str(ws), "block_small", "--repeat", "1", "--cache-dir", cache]
    assert main(base) == 0
    plain = capsys.readouterr().out.splitlines()
    assert main([*base, "--simulate"]) == 0
    sim = capsys.readouterr().out.splitlines()
    assert sim[: len(plain) - 2] == plain[: len(plain) - 2]  # header and inputs
    want, got = plain[len(plain) - 2], sim[len(plain) - 2]  # the output's line
    assert got.split("mean")[0] == want.split("mean")[0]
    stats = lambda line: [float(w) for w in line.split()[5::2] if w[0] in "+-0123456789"]  # noqa: E731
    np.testing.assert_allclose(stats(got), stats(want), rtol=1e-4, atol=1e-5)
    assert sim[-1] == (
        "  simulated on mesh `tp` (tp=4): 4 collectives per device (2 all-gather over tp, "
        "2 all-reduce over tp); 1,572,864 bytes moved per device (6,291,456 in all)"
    )


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("3", "mesh `tp` resized to 3: the 3 devices of mesh axis tp do not divide dim 1"),
        ("grid", "no mesh named `grid` for `block` (meshes its file sees: `tp`)"),
        ("tpp", "no mesh named `tpp` for `block` (did you mean `tp`?)"),
        ("2x2", "`block` is sharded over the 1-D mesh `tp` (4, axes tp); a mesh of 2x2 has 2 dims"),
        ("0", "a mesh needs at least one device per axis, got [0]"),
        ("2.5", "mesh '2.5': expected a mesh name, a device count (4) or a shape (2x2)"),
    ],
)
def test_bad_meshes_are_usage_errors(
    tmp_path: Path, cache: str, capsys: pytest.CaptureFixture[str], flag: str, said: str
) -> None:
    ws = annotated_block(tmp_path, MEGATRON, "(mesh tp [4])")
    code = main(
        ["run", str(ws), "block_small", "--repeat", "1", "--cache-dir", cache, "--simulate", flag]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("kinac: error: ") and said in err, err
    assert "Traceback" not in err


def test_api_refusals(tmp_path: Path, cache: str) -> None:
    ws = annotated_block(tmp_path, {})
    with pytest.raises(  # refused at the first call: a reshard in the body could name one
        kinac.KinaUsageError, match="no reshard or collective naming a mesh, so it names no mesh"
    ):
        _sharded(ws, cache)(*_inputs(), **DIMS)
    with pytest.raises(
        kinac.KinaUsageError, match="mesh= takes a mesh name, a device count or a shape"
    ):
        _sharded(ws, cache, True)
    with pytest.raises(kinac.KinaUsageError, match="runs on the threaded simulator, on the host"):
        kinac.compile(ws, "block_small", target="cuda", mesh=2, cache_dir=cache)
    fn = _sharded(annotated_block(tmp_path / "b", MEGATRON), cache)
    with pytest.raises(kinac.KinaCallError, match="`x`"):  # the plain call's checks, by name
        fn(np.zeros((4, 128, 255), np.float32), *_inputs()[1:], **DIMS)
