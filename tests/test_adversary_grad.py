"""Reverse mode, attacked: random loss programs (``tests/adversary_grad_gen.py``) through
``kinac.value_and_grad`` against ``torch.autograd`` in float64 on the same random data, and
the same gradients on a simulated 2-device mesh with random ``@sharded`` parameters against
the unsharded ones.

The suite runs a few examples per property; hunt with
``ADV_EXAMPLES=300 python3 -m pytest tests/test_adversary_grad.py``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from adversary_grad_gen import GradProg, grad_programs, sharded_source
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import kinac
from kinac.errors import KinaCallError, KinaCompileError

TOL = {"f64": 1e-6, "f32": 2e-3}


def _settings(n: int) -> Any:
    return settings(
        max_examples=int(os.environ.get("ADV_EXAMPLES", n)),
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


seeds = st.integers(0, 2**31)


def _file(tmp: Path, src: str) -> Path:
    d = tmp / f"p{abs(hash(src)) % 10**12}"
    d.mkdir(exist_ok=True)
    (d / "p.kina").write_text(src)
    return d / "p.kina"


def close(got: Any, want: np.ndarray, tol: float, what: str) -> None:
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    fin = np.abs(want[np.isfinite(want)])
    sc = max(1.0, float(fin.max()) if fin.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * sc, equal_nan=True, err_msg=what)


def torch_grads(p: GradProg, ins: list[np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
    env = p.env(ins)
    for n in p.wrt():
        env[n].requires_grad_(True)
    ref = p.reference_env(env)
    ref.backward()
    out = {}
    for n in p.wrt():
        g = env[n].grad
        out[n] = np.zeros(env[n].shape) if g is None else g.numpy()
    return float(ref.detach()), out


@_settings(4)
@given(grad_programs(), seeds)
def test_value_and_grad_equals_torch_autograd(
    tmp_path_factory: Any, p: GradProg, seed: int
) -> None:
    src = p.source()
    ins = p.inputs(seed)
    fn = kinac.value_and_grad(_file(tmp_path_factory.mktemp("g"), src), "f", wrt=p.wrt())
    val, grads = fn(*ins)
    w, want = torch_grads(p, ins)
    tol = TOL[p.dtype]
    info = f"{src}ties={p.ties} seed={seed}"
    close(val, np.asarray(w), tol, "value " + info)
    if not np.isfinite(w):
        return
    for n in p.wrt():
        close(grads[n], want[n], tol, f"d/d{n} " + info)


@_settings(3)
@given(grad_programs(dtypes=("f64",), max_depth=3), seeds, st.data())
def test_sharded_gradients_equal_unsharded(
    tmp_path_factory: Any, p: GradProg, seed: int, data: st.DataObject
) -> None:
    """Random ``@sharded`` parameters on a 2-device mesh: the value and every gradient equal
    the unsharded ones; a split of an odd dim is a K-coded diagnostic, never a traceback."""
    cands = [(i, a) for i, (_, s, _) in enumerate(p.params) for a, d in enumerate(s) if d.val > 1]
    assume(cands)
    chosen = data.draw(
        st.lists(st.sampled_from(cands), min_size=1, max_size=3, unique_by=lambda c: c[0])
    )
    src = sharded_source(p, chosen)
    path = _file(tmp_path_factory.mktemp("s"), src)
    ins = p.inputs(seed)
    info = f"{src}ties={p.ties} seed={seed}"
    uneven = any(p.params[i][1][a].val % 2 for i, a in chosen)
    try:
        val, grads = kinac.value_and_grad(path, "f", wrt=p.wrt(), mesh="m")(*ins)
    except (KinaCallError, KinaCompileError) as e:
        assert uneven and re.search(r"K0(413|802)", str(e)), (info, str(e))
        return
    assert not uneven, ("an uneven split ran", info)
    pval, pgrads = kinac.value_and_grad(path, "f", wrt=p.wrt())(*ins)
    close(val, np.asarray(pval, np.float64), TOL[p.dtype], "value " + info)
    for n in p.wrt():
        close(grads[n], np.asarray(pgrads[n], np.float64), TOL[p.dtype], f"d/d{n} " + info)
