"""``kinac run --simulate`` on small programs: a mesh from ``kina.toml`` ``[[mesh]]``, a plain
defn run with ``--dims`` and ``--inputs``, ``--save`` of the global outputs, and the flags it
does not combine with (usage errors, never tracebacks)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kinac.cli import main

TOML = """[workspace]
name = "sim"

[[mesh]]
name = "grid"
shape = [2, 2]
axes = ["dp", "tp"]

[[entry]]
name = "mlp"
defn = "mlp"
dims = { N = 8, D = 4, F = 8 }
"""
SOURCE = """(defn mlp [(x : (tensor f32 [N D] @sharded(axis=0, mesh=grid, over=dp)))
           (w1 : (tensor f32 [D F] @sharded(axis=1, mesh=grid, over=tp)))
           (w2 : (tensor f32 [F D] @sharded(axis=0, mesh=grid, over=tp)))]
  -> (tensor f32 [N D])
  (matmul (relu (matmul x w1)) w2))
"""


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "kina.toml").write_text(TOML)
    (tmp_path / "m.kina").write_text(SOURCE)
    return tmp_path


def _inputs(path: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    arrays = {
        "x": rng.standard_normal((8, 4)).astype(np.float32),
        "w1": rng.standard_normal((4, 8)).astype(np.float32),
        "w2": rng.standard_normal((8, 4)).astype(np.float32),
    }
    np.savez(path, **arrays)  # type: ignore[arg-type]
    return arrays


def test_mesh_from_kina_toml_with_inputs_and_save(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arrays = _inputs(tmp_path / "in.npz")
    out = tmp_path / "out.npz"
    args = [
        "run",
        str(ws),
        "mlp",
        "--no-cache",
        "--repeat",
        "1",
        "--inputs",
        str(tmp_path / "in.npz"),
    ]
    assert main([*args, "--simulate", "--save", str(out)]) == 0
    printed = capsys.readouterr().out
    assert (
        "  simulated on mesh `grid` (dp=2 x tp=2): 1 collectives per device (1 all-reduce over tp); "
        "64 bytes moved per device (256 in all)"
    ) in printed
    want = np.maximum(arrays["x"] @ arrays["w1"], 0) @ arrays["w2"]
    np.testing.assert_allclose(np.load(out)["arr_0"], want, rtol=1e-5, atol=1e-5)


def test_a_plain_defn_with_dims(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (ws / "m.kina").write_text(SOURCE.replace("mlp", "f"))
    code = main(
        ["run", str(ws), "f", "--no-cache", "--repeat", "1", "--dims", "N=4,D=2,F=4", "--simulate"]
    )
    out = capsys.readouterr().out
    assert code == 0 and "out 0      f32[4, 2]" in out and "1 all-reduce over tp" in out


@pytest.mark.parametrize(
    "flag", [["--deterministic"], ["--metrics-port", "0"], ["--target", "cuda"]]
)
def test_flags_it_does_not_combine_with(
    ws: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    code = main(["run", str(ws), "mlp", "--no-cache", "--repeat", "1", "--simulate", *flag])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(
        "kinac: error: --simulate runs on host threads and does not"
    )


def test_a_rank_that_skips_a_collective_is_named_with_the_programs_span(ws: Path) -> None:
    """The compiler's program, with rank 3 running it minus its all-reduce: the report names
    the waiting rank's all-reduce by the annotation that caused it (``w2``'s, line 3)."""
    from dataclasses import replace

    import kinac
    from kinac.artifacts.sharded import Collective
    from kinac.rt.comm import simulate
    from kinac.rt.comm.execute import run_program
    from kinac.rt.comm.layout import shard_global

    arrays = _inputs(ws / "in.npz")
    fn = kinac.compile(ws, "mlp", mesh="", no_cache=True)
    (prog, segments), _ = fn._prepared(*arrays.values())
    reduce = next(s for s in prog.steps if isinstance(s, Collective) and s.kind == "all-reduce")
    assert reduce.span.startswith("m.kina:3:")
    cut = prog.steps.index(reduce)
    truncated = replace(prog, steps=prog.steps[:cut], outputs=())  # ends before the all-reduce
    glob = list(arrays.values())

    def rank(comm: object) -> object:
        r = comm.global_rank  # type: ignore[attr-defined]
        local = [
            shard_global(a, lay, prog.mesh, r)
            for a, (_, _, lay) in zip(glob, prog.params, strict=True)
        ]
        return run_program(truncated if r == 3 else prog, segments, comm, local)  # type: ignore[arg-type]

    with pytest.raises(kinac.KinaRuntimeError) as e:
        simulate(prog.mesh, rank, timeout_s=0.5)
    msg = str(e.value)
    assert msg.startswith(
        f"collective mismatch: rank 2 waits in all-reduce(sum) over tp of f32[4 4] at {reduce.span}, "
        "but rank 3 returned without calling it"
    )
    assert "  rank 3: returned (calls nothing more)" in msg


def test_n_equal_to_the_meshs_device_count_runs_on_that_mesh(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["run", str(ws), "mlp", "--no-cache", "--repeat", "1", "--simulate"]
    assert main([*base, "4"]) == 0
    assert "simulated on mesh `grid` (dp=2 x tp=2): 1 collectives" in capsys.readouterr().out
    assert main([*base, "8"]) == 2  # 8 devices: a 1-D request for a 2-D mesh
    assert "`mlp` is sharded over the 2-D mesh `grid` (2x2, axes dp tp)" in capsys.readouterr().err
    assert main([*base, "4x2"]) == 0  # resized: dp=4, tp=2 (N=8 rows split 4 ways)
    assert "simulated on mesh `grid` (dp=4 x tp=2)" in capsys.readouterr().out


def test_bf16_entry_through_the_api(ws: Path) -> None:
    """bf16 in (torch bf16 tensors), bf16 out (uint16 bit patterns), the tp partials all-reduced
    in f32 and rounded once: within a bf16 rounding of the unsharded call."""
    import torch

    import kinac
    from kinac.rt.comm.communicator import bf16_to_f32

    (ws / "kina.toml").write_text(TOML + 'dtypes = { T = "bf16" }\n')
    (ws / "m.kina").write_text(SOURCE.replace("f32", "T"))
    torch.manual_seed(0)
    xs = [torch.randn(s).to(torch.bfloat16) for s in ((8, 4), (4, 8), (8, 4))]
    plain = kinac.compile(ws, "mlp", no_cache=True)(*xs)
    fn = kinac.compile(ws, "mlp", mesh="", no_cache=True)
    got = fn(*xs)
    assert got.dtype == np.uint16 and got.shape == (8, 4)
    a, b = bf16_to_f32(plain), bf16_to_f32(got)
    np.testing.assert_allclose(b, a, rtol=2**-7, atol=2**-7)
    assert fn.last_log.bytes_per_device() == 4 * 4 * 2  # a bf16 [4 4] partial


BODY_TOML = """[workspace]
name = "body"

[[mesh]]
name = "tp"
shape = [2]

[[entry]]
name = "pin"
defn = "pin"
dims = { N = 4, D = 4 }
"""
BODY_SOURCE = """(defn pin [(x : (tensor f32 [N D])) (w : (tensor f32 [D D]))] -> (tensor f32 [N D])
  (exp (all-reduce (matmul (reshard x @sharded(axis=1, mesh=tp)) (reshard w @sharded(axis=0, mesh=tp))))))
"""


def test_a_mesh_named_only_in_the_body_is_found_as_build_finds_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No annotation in the signature: ``--simulate`` (alone, or with the mesh's device
    count) runs on the mesh the body's ``reshard`` names, as ``build --shardings`` plans it
    (one function, :func:`kinac.shard.entry.entry_mesh`); it used to be a usage error."""
    (tmp_path / "kina.toml").write_text(BODY_TOML)
    (tmp_path / "m.kina").write_text(BODY_SOURCE)
    assert main(["build", str(tmp_path), "--no-cache", "--shardings"]) == 0
    assert "all-reduce" in capsys.readouterr().out
    base = ["run", str(tmp_path), "pin", "--no-cache", "--repeat", "1", "--simulate"]
    for extra in ([], ["2"], ["tp"]):
        assert main([*base, *extra]) == 0, capsys.readouterr().err
        out = capsys.readouterr().out
        assert (
            "simulated on mesh `tp` (tp=2): 1 collectives per device (1 all-reduce over tp)" in out
        )
    assert main([*base, "3"]) == 1  # resized: 3 devices do not divide D = 4 (the reshard's)
    err = capsys.readouterr().err
    assert "on mesh `tp` resized to 3 (the source declares 2):" in err
    assert "error[K0706]: `reshard` splits dim 1 (size 4) over `tp` (3 devices)" in err
    assert "K0707" not in err  # not the all-reduce's cascade (its operand is not partial)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("mesh", "said"),
    [
        ("99999999999999999999", "has 99999999999999999999 devices, more than 1,048,576"),
        ("2000", "the simulator runs one thread per device: 2000 devices (2000) is more than"),
        ("0", "a mesh needs at least one device per axis, got [0]"),
        ("2x0", "a mesh needs at least one device per axis, got [2, 0]"),
        ("4.0", "expected a mesh name, a device count (4) or a shape (2x2)"),
    ],
)
def test_bad_mesh_sizes_are_usage_errors(
    ws: Path, capsys: pytest.CaptureFixture[str], mesh: str, said: str
) -> None:
    """A huge count was an internal error (OverflowError) before."""
    assert main(["run", str(ws), "mlp", "--no-cache", "--repeat", "1", "--simulate", mesh]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kinac: error: ") and said in err and "Traceback" not in err, err


def test_the_body_mesh_through_the_api_equals_the_plain_call(tmp_path: Path) -> None:
    import kinac

    (tmp_path / "kina.toml").write_text(BODY_TOML)
    (tmp_path / "m.kina").write_text(BODY_SOURCE)
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    fn = kinac.compile(tmp_path, "pin", mesh="", no_cache=True)
    np.testing.assert_allclose(fn(x, w), np.exp(x @ w), rtol=1e-5)
    assert fn.last_log.counts() == {("all-reduce", "tp"): 1}
