"""Pictures of 1-D and 2-D layouts over a mesh (``kinac build --visualize``), like JAX's
``visualize_array_sharding``: goldens for a dp x tp MLP's tensors, and the block labels for
replicas, splits over two axes (major first) and partial sums.

Set ``KINAC_UPDATE_GOLDEN=1`` to rewrite the golden after a deliberate change.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rich.console import Console

from kinac.cli import main
from kinac.shard.report import layout_picture

GOLDEN = Path(__file__).resolve().parent / "golden" / "simulate"
GRID = (("dp", 2), ("tp", 2))

TOML = """[workspace]
name = "vis"

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


def _text(renderable: object) -> str:
    console = Console(width=100, record=True, color_system=None, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(renderable)
    return console.export_text()


def _cells(text: str) -> list[list[str]]:
    """The grid's labels, row by row."""
    rows = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("│")[1:-1]]
        if any(parts):
            rows.append(parts)
    return rows


def _golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("KINAC_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert text == path.read_text()


def test_build_visualize_draws_every_2d_tensor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "kina.toml").write_text(TOML)
    (tmp_path / "m.kina").write_text(SOURCE)
    assert main(["build", str(tmp_path), "--no-cache", "--visualize", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "mlp: layouts over mesh `grid`" in out  # --visualize implies --shardings
    pictures = out[out.index("mlp: 1-D and 2-D tensors") :]
    _golden("mlp_grid.txt", pictures)


def test_labels_name_replicas_splits_and_partial_sums() -> None:
    # dim 0 over dp, dim 1 over tp: one device per block, rows by dp
    assert _cells(_text(layout_picture("t", (4, 4), (("dp",), ("tp",)), (), GRID))) == [
        ["dev 0", "dev 1"],
        ["dev 2", "dev 3"],
    ]
    # dim 0 over tp only: replicated over dp (ranks 0 and 2 share tp = 0)
    assert _cells(_text(layout_picture("t", (4, 4), (("tp",), ()), (), GRID))) == [
        ["dev 0,2"],
        ["dev 1,3"],
    ]
    # dim 1 over both axes, tp major: rank (dp, tp) holds chunk tp * 2 + dp
    assert _cells(_text(layout_picture("t", (2, 8), ((), ("tp", "dp")), (), GRID))) == [
        ["dev 0", "dev 2", "dev 1", "dev 3"]
    ]
    # partial over tp, split over dp: each block is the sum of two devices' shares
    assert _cells(_text(layout_picture("t", (4, 4), (("dp",), ()), ("tp",), GRID))) == [
        ["Σ 0+1"],
        ["Σ 2+3"],
    ]
    # partial over dp, replicated over tp: each replica is a sum over dp
    assert _cells(_text(layout_picture("t", (4,), ((),), ("dp",), GRID))) == [["Σ 0+2, Σ 1+3"]]
    # a 1-D tensor split over a 1-D mesh of 4
    assert _cells(_text(layout_picture("t", (8,), (("tp",),), (), (("tp", 4),)))) == [
        ["dev 0", "dev 1", "dev 2", "dev 3"]
    ]
