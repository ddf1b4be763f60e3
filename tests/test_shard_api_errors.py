"""Bad meshes and layouts given from Python (``mesh_value_and_grad``, the trainer's hook) are
usage errors naming what is wrong, never a traceback (a size 0 was a ZeroDivisionError, a
shape without its axis names a ValueError from ``zip``, a layout of ``None`` a TypeError, a
string read as its letters, and an axis splitting two dims of one tensor ran)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import kinac
from kinac.api_grad_sharded import mesh_value_and_grad
from kinac.artifacts.sharded import MeshSpec

SRC = """(defn f [(x : (tensor f32 [N D])) (w : (tensor f32 [D D]))] -> f32
  (sum (sum (tanh (matmul x w)) :axis 1) :axis 0))
"""
DP = MeshSpec("m", (2,), ("dp",))


@pytest.mark.parametrize(
    ("mesh", "layouts", "said"),
    [
        (DP, {"x": "dp"}, "layouts['x'] = 'dp': give one entry per dim of the parameter"),
        (DP, {"x": [[], []], "w": None}, "layouts['w'] = None: give one entry per dim"),
        (DP, [("x", ())], "layouts= maps parameter names to layouts"),
        (DP, {"x": [("dp",), ("dp",)]}, "layout of `x` uses mesh axis `dp` twice"),
        (DP, {"x": [("tp",), ()]}, "layout of `x` names mesh axis `tp`; mesh `m` has axes dp"),
        (MeshSpec("m", (0,), ("dp",)), {}, "mesh `m`: every size must be an integer >= 1"),
        (MeshSpec("m", (2, 2), ("dp",)), {}, "mesh `m` has shape (2, 2): it needs 2 axis names"),
        (MeshSpec("m", (2, 2), ("a", "a")), {}, "mesh `m` names an axis twice"),
    ],
)
def test_bad_meshes_and_layouts(tmp_path: Path, mesh: Any, layouts: Any, said: str) -> None:
    (tmp_path / "l.kina").write_text(SRC)
    with pytest.raises(kinac.KinaUsageError) as e:
        fn = mesh_value_and_grad(tmp_path / "l.kina", "f", ["x", "w"], mesh, layouts, no_cache=True)
        fn(np.ones((8, 4), np.float32), np.ones((4, 4), np.float32))
    assert said in str(e.value)


def test_mesh_requests_take_numpy_integers() -> None:
    """``mesh=np.int64(4)`` (a count computed with numpy) is a count, not 'got int64'."""
    from kinac.api_mesh import parse_mesh

    assert parse_mesh(np.int64(4)) == (4,) and parse_mesh([np.int32(2), 2]) == (2, 2)
    assert parse_mesh("2x2") == (2, 2) and parse_mesh("tp") == "tp" and parse_mesh("") is None
    for bad, said in [
        (True, "got True"),
        (2.0, "got float"),
        ([2, True], "got list"),
        ((0,), "at least one device per axis"),
        (10**30, "more than 1,048,576"),
    ]:
        with pytest.raises(kinac.KinaUsageError, match=said):
            parse_mesh(bad)
