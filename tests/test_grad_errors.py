"""Bad gradient requests get one clear :class:`KinaUsageError` each (golden messages), before
anything runs: a non-scalar or integer loss, an unknown, dim, integer or repeated ``wrt`` name,
a ``wrt`` that is not a list; and at a call, a variadic loss that is not rank 0 at these
shapes. (Dtype variables are float by the checker's rules, so a generic parameter is always
differentiable.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from goldens import compare

import kinac
from kinac.errors import KinaUsageError

GOLDEN = Path(__file__).parent / "golden" / "grad" / "errors.txt"

SOURCE = """(defn loss [(x : (tensor f32 [N])) (weight : (tensor f32 [N])) (k : (tensor i32 [N]))
            (M : dim)] -> f32
  (sum (mul (mul x weight) (cast k :to f32)) :axis 0))
(defn not-scalar [(x : (tensor f32 [N]))] -> (tensor f32 [N]) (exp x))
(defn int-loss [(x : (tensor i32 [N]))] -> i32 (sum x :axis 0))
(defn generic [(x : (tensor T [N]))] -> T (sum x :axis 0))
(defn variadic [(x : (tensor f32 [..b]))] -> (tensor f32 [..b]) (exp x))
"""

CONSTRUCTION = [
    ("not-scalar", ["x"]),
    ("int-loss", ["x"]),
    ("loss", ["wieght"]),
    ("loss", ["k"]),
    ("loss", ["M"]),
    ("loss", "weight"),
    ("loss", []),
    ("loss", ["x", "x"]),
]


def test_bad_requests_are_usage_errors(tmp_path: Path) -> None:
    path = tmp_path / "m.kina"
    path.write_text(SOURCE)
    out = []
    for name, wrt in CONSTRUCTION:
        with pytest.raises(KinaUsageError) as e:
            kinac.value_and_grad(path, name, wrt=wrt, no_cache=True)  # type: ignore[arg-type]
        out.append(f"## value_and_grad({name!r}, wrt={wrt!r})\n{e.value}\n")
    at_call = [("variadic", ["x"], np.ones(3, np.float32))]
    for name, wrt, arg in at_call:
        fn = kinac.value_and_grad(path, name, wrt=wrt, no_cache=True)
        with pytest.raises(KinaUsageError) as e:
            fn(arg)
        out.append(f"## value_and_grad({name!r}, wrt={wrt!r})({arg.dtype}{list(arg.shape)})\n")
        out.append(f"{e.value}\n")
    compare(GOLDEN, "".join(out), "grad request errors")


def test_the_same_defns_differentiate_when_asked_well(tmp_path: Path) -> None:
    """The error cases' neighbours work: the generic loss at f32, the variadic one at rank 0."""
    path = tmp_path / "m.kina"
    path.write_text(SOURCE)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    value, grads = kinac.value_and_grad(path, "generic", wrt=["x"], no_cache=True)(x)
    assert float(value) == 2.0 and grads["x"].tolist() == [1.0, 1.0, 1.0]
    value, grads = kinac.value_and_grad(path, "variadic", wrt=["x"], no_cache=True)(
        np.float32(0.5).reshape(())
    )
    assert float(value) == pytest.approx(np.exp(0.5)) and float(grads["x"]) == pytest.approx(
        np.exp(0.5)
    )
