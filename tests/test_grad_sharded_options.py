"""``kinac.value_and_grad(..., mesh=...)`` checks its options as ``kinac.compile(..., mesh=...)``
does: an unknown one is a usage error naming it and the closest valid name (it was Python's
bare ``TypeError: unexpected keyword argument``); the valid ones still work."""

from __future__ import annotations

from pathlib import Path

import pytest

import kinac
from kinac.errors import KinaUsageError

SRC = """(mesh dp [2])
(defn f [(x : (tensor f64 [4 3] @sharded(axis=0, mesh=dp))) (w : (tensor f64 [3 2]))] -> f64
  (sum (sum (matmul x w) :axis 1) :axis 0))
"""


def test_an_unknown_option_is_a_usage_error(tmp_path: Path) -> None:
    p = tmp_path / "g.kina"
    p.write_text(SRC)
    with pytest.raises(
        KinaUsageError, match=r"unknown option `bucket_md`.*did you mean `bucket_mb`"
    ):
        kinac.value_and_grad(p, "f", wrt=["w"], mesh="", bucket_md=1)
    with pytest.raises(KinaUsageError, match=r"kinac.value_and_grad\(\.\.\., mesh=\.\.\.\)"):
        kinac.value_and_grad(p, "f", wrt=["w"], mesh="", graphs=True)  # a GPU option: not here
    fn = kinac.value_and_grad(p, "f", wrt=["w"], mesh="", bucket_mb=1, timeout_s=30.0)
    assert fn.wrt == ("w",)
