"""Random valid Kina programs (``tests/adversary_gen.py``) against an independent float64
reference: the host build (``kinac.compile``, checker to object code), the GPU lowering on the
CPU emulator, ``kinac.value_and_grad`` against ``torch.autograd``, and a run on a simulated
2-device mesh with random ``@sharded`` parameters against the reference and the unsharded run.

The suite runs a few examples per property (each test about 2 s); hunting runs many more:
``ADV_EXAMPLES=500 python3 -m pytest tests/test_adversary_programs.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import torch
from adversary_gen import TOL, Prog, compare, dot_loss, hunt_settings, programs, seeds
from check_support import Workspace
from gpu_support import run_emulated
from hypothesis import assume, given
from hypothesis import strategies as st

import kinac
from kinac.check import DefnRef, specialise
from kinac.tir.graph import Graph

ALL = ("f32", "f64", "f16", "bf16", "i32", "i64")


def _file(tmp: Path, src: str) -> Path:
    d = tmp / f"p{abs(hash(src)) % 10**12}"
    d.mkdir(exist_ok=True)
    (d / "p.kina").write_text(src)
    return d / "p.kina"


def _call(fn: Any, p: Prog, ins: list[np.ndarray]) -> np.ndarray:
    bf = p.dtype == "bf16"
    args = [
        torch.from_numpy(a).view(torch.bfloat16) if bf and a.dtype == np.uint16 else a for a in ins
    ]
    out = fn(*args)
    if isinstance(out, torch.Tensor):
        out = out.view(torch.int16).numpy().view(np.uint16)
    return np.asarray(out)


def graph_of(p: Prog) -> Graph:
    ws = Workspace({"p.kina": p.source()})
    dims = {d.expr: d.val for _, s, _ in p.params for d in s if re.fullmatch(r"N\d+", d.expr)}
    sp = specialise(DefnRef("p.kina", "f"), dims, {"T": p.dtype} if p.dtype_var else {}, ws.env)
    assert not sp.diagnostics and sp.graph is not None, (p.source(), sp.diagnostics)
    return sp.graph


@hunt_settings(2)
@given(programs(dtypes=ALL), seeds)
def test_host_build_equals_float64(tmp_path_factory: Any, p: Prog, seed: int) -> None:
    src = p.source()
    fn = kinac.compile(_file(tmp_path_factory.mktemp("h"), src), "f")
    ins = p.inputs(seed)
    compare(_call(fn, p, ins), p.reference(ins), p.dtype, src)


@hunt_settings(3)
@given(programs(dtypes=ALL, max_depth=3), seeds)
def test_gpu_lowering_emulated_equals_float64(p: Prog, seed: int) -> None:
    ins = p.inputs(seed)
    (out,) = run_emulated(graph_of(p), *ins)
    compare(out, p.reference(ins), p.dtype, p.source())


def with_loss(p: Prog) -> Prog:
    """``sum(body * w)`` over every axis, ``w`` a new parameter (a non-uniform cotangent)."""
    dot_loss(p)
    return p


@hunt_settings(3)
@given(programs(dtypes=("f32", "f64"), max_depth=3), seeds)
def test_value_and_grad_equals_torch_autograd(tmp_path_factory: Any, p: Prog, seed: int) -> None:
    p = with_loss(p)
    src = p.source()
    ins = p.inputs(seed)
    wrt = [n for n, _, dt in p.params if dt != "bool"]
    fn = kinac.value_and_grad(_file(tmp_path_factory.mktemp("g"), src), "f", wrt=wrt)
    val, grads = fn(*ins)
    env = p.env(ins)
    for n in wrt:
        env[n].requires_grad_(True)
    ref = p.reference_env(env)
    ref.backward()
    tol = TOL[p.dtype] * (10 if p.dtype == "f32" else 1e3)
    w = float(ref.detach())
    np.testing.assert_allclose(float(val), w, rtol=tol, atol=tol * max(1.0, abs(w)), err_msg=src)
    if not np.isfinite(w):
        return  # a NaN loss (a fully masked row): its gradients follow no convention (max of NaN)
    for n in wrt:
        g = env[n].grad
        want = np.zeros(env[n].shape) if g is None else g.numpy()
        got = np.asarray(grads[n], np.float64)
        assert got.shape == want.shape, (n, got.shape, want.shape, src)
        fin = np.abs(want[np.isfinite(want)])
        sc = max(1.0, float(fin.max()) if fin.size else 1.0)
        np.testing.assert_allclose(
            got, want, rtol=tol, atol=tol * sc, equal_nan=True, err_msg=n + src
        )


def sharded_source(p: Prog, chosen: list[tuple[int, int]], result_axis: int | None = None) -> str:
    """``p``'s source on a 2-device mesh ``m`` with parameter ``i`` split on axis ``a`` (and
    the result split on ``result_axis``)."""
    src = p.source()
    if result_axis is not None:
        assert p.body is not None
        dims = " ".join(d.expr for d in p.body.shape)
        rt = f"-> (tensor {p.tname} [{dims}])"
        src = src.replace(rt, rt[:-1] + f" @sharded(axis={result_axis}, mesh=m))", 1)
    for i, a in chosen:
        n, s, dt = p.params[i]
        ty = f"(tensor {p.tname if dt == 'T' else dt} [{' '.join(d.expr for d in s)}]"
        src = src.replace(f"({n} : {ty}))", f"({n} : {ty} @sharded(axis={a}, mesh=m)))", 1)
    return "(mesh m [2])\n" + src


@hunt_settings(3)
@given(programs(dtypes=("f32", "f64"), max_depth=3), seeds, st.data())
def test_sharded_run_equals_unsharded(
    tmp_path_factory: Any, p: Prog, seed: int, data: st.DataObject
) -> None:
    cands = [
        (i, a) for i, (_, s, _) in enumerate(p.params) for a, d in enumerate(s) if d.val % 2 == 0
    ]
    assume(cands)
    chosen = data.draw(
        st.lists(st.sampled_from(cands), min_size=1, max_size=3, unique_by=lambda c: c[0])
    )
    assert p.body is not None
    res = [a for a, d in enumerate(p.body.shape) if d.val % 2 == 0 and d.expr.isdigit()]
    src = sharded_source(p, chosen, data.draw(st.sampled_from([None, *res])))
    path = _file(tmp_path_factory.mktemp("s"), src)
    ins = p.inputs(seed)
    want = p.reference(ins)
    plain = np.asarray(kinac.compile(path, "f")(*ins))
    compare(plain, want, p.dtype, "unsharded " + src)
    sharded = np.asarray(kinac.compile(path, "f", mesh="m")(*ins))
    compare(sharded, want, p.dtype, "sharded " + src)
