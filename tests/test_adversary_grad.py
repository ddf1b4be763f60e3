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
import torch
from adversary_gen import hunt_settings, seeds
from adversary_grad_gen import GradProg, grad_programs, sharded_source
from check_support import Workspace
from hypothesis import assume, event, given
from hypothesis import strategies as st

import kinac
from kinac.errors import KinaCallError, KinaCompileError, KinaUsageError

TOL = {"f64": 1e-6, "f32": 2e-3, "f16": 5e-2, "bf16": 0.3}
# the hunt may widen the dtypes: ADV_GRAD_DTYPES=f16,bf16 (kinac computes the backward in them)
DTYPES = tuple(os.environ.get("ADV_GRAD_DTYPES", "f64,f32").split(","))
DEPTH = int(os.environ.get("ADV_GRAD_DEPTH", "4"))  # the hunt may draw deeper programs
# ops the emulated-GPU hunt leaves out past a known finding (ADV_GRAD_SKIP=transpose: the
# transposed row map of tests/test_adversary_grad_findings.py)
SKIP = set(filter(None, os.environ.get("ADV_GRAD_SKIP", "").split(",")))
# the hunt may draw larger dims (ADV_GRAD_SIZES=1,3,32,33,128: the GPU's row and
# vector paths change with the row length)
SIZES = tuple(int(v) for v in os.environ.get("ADV_GRAD_SIZES", "1,2,3,4,5,17").split(","))


def _file(tmp: Path, src: str) -> Path:
    d = tmp / f"p{abs(hash(src)) % 10**12}"
    d.mkdir(exist_ok=True)
    (d / "p.kina").write_text(src)
    return d / "p.kina"


def close(got: Any, want: np.ndarray, tol: float, what: str) -> None:
    if isinstance(got, np.ndarray) and got.dtype == np.uint16:  # bf16 bit patterns
        got = torch.from_numpy(np.array(got, copy=True)).view(torch.bfloat16)
    if isinstance(got, torch.Tensor):
        got = got.to(torch.float64).numpy()
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    fin = np.abs(want[np.isfinite(want)])
    sc = max(1.0, float(fin.max()) if fin.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * sc, equal_nan=True, err_msg=what)


def tolerance(p: GradProg) -> float:
    """The program dtype's tolerance, or a narrower cast's inside it: a cast's transpose
    rounds the cotangent to the narrow dtype, after summing the cotangents of the cast's
    readers (torch rounds each reader's share, then sums: both are right to that dtype)."""
    narrow = re.findall(r":to (f16|bf16|f32)\b", p.source())
    return max([TOL[p.dtype], *(TOL[d] for d in narrow)])


def torch_grads(p: GradProg, ins: list[np.ndarray]) -> tuple[float, dict[str, np.ndarray]]:
    env = p.env(ins)
    for n in p.wrt():
        env[n].requires_grad_(True)
    ref = p.reference_env(env)
    if ref.requires_grad:  # else the loss reads none of wrt: every gradient is zeros
        ref.backward()
    out = {}
    for n in p.wrt():
        g = env[n].grad
        out[n] = np.zeros(env[n].shape) if g is None else g.numpy()
    return float(ref.detach()), out


@hunt_settings(3)
@given(grad_programs(dtypes=DTYPES, max_depth=DEPTH, sizes=SIZES), seeds)
def test_value_and_grad_equals_torch_autograd(
    tmp_path_factory: Any, p: GradProg, seed: int
) -> None:
    src = p.source()
    ins = p.inputs(seed)
    fn = kinac.value_and_grad(_file(tmp_path_factory.mktemp("g"), src), "f", wrt=p.wrt())
    val, grads = fn(*p.call_args(ins))
    w, want = torch_grads(p, ins)
    tol = tolerance(p)
    info = f"{src}ties={p.ties} seed={seed}"
    close(val, np.asarray(w), tol, "value " + info)
    if not np.isfinite(w):
        return
    for n in p.wrt():
        close(grads[n], want[n], tol, f"d/d{n} " + info)


MESHES = {"1d": "(mesh m [2])", "2d": "(mesh m [2 2] :axes [a b])"}


@hunt_settings(3)
@given(grad_programs(dtypes=("f64",), max_depth=3), seeds, st.data())
def test_sharded_gradients_equal_unsharded(
    tmp_path_factory: Any, p: GradProg, seed: int, data: st.DataObject
) -> None:
    """Random ``@sharded`` (and ``@partial(sum)``) parameters on a 2-device mesh, a 2x2 mesh
    (one or two mesh axes per parameter) or the 2-device mesh resized to 4 by the request:
    the value and every gradient equal the unsharded ones; an uneven split is a K-coded
    diagnostic naming the dims (K0413/K0802) or, resized, a usage error, never a traceback."""
    kind = data.draw(st.sampled_from(["1d", "2d", "resized"]))
    # mostly splits the mesh divides (they run), sometimes any dim (a diagnostic or a run)
    ways = 4 if kind == "resized" else 2
    fit = data.draw(st.integers(0, 4)) > 0
    cands = [
        (i, a)
        for i, (_, s, _) in enumerate(p.params)
        for a, d in enumerate(s)
        if d.val > 1 and (not fit or d.val % ways == 0)
    ]
    assume(cands)
    picks = data.draw(st.lists(st.sampled_from(cands), min_size=1, max_size=3, unique=True))
    chosen: list[tuple[int, int | str, str]] = []
    for i, a in picks:
        used = [(c[1], c[2]) for c in chosen if c[0] == i]
        if kind != "2d":
            if not used:
                partial = p.params[i][2] == "T" and data.draw(st.integers(0, 5)) == 0
                chosen.append((i, "partial" if partial else a, ""))
            continue
        free = [o for o in ("a", "b") if all(u[1] != o for u in used)]
        how: int | str = a
        if p.params[i][2] == "T" and data.draw(st.integers(0, 5)) == 0:
            how = "partial"  # a share over one mesh axis (maybe split over the other)
        if free and all(u[0] != how for u in used):
            chosen.append((i, how, data.draw(st.sampled_from(free))))
    src = sharded_source(p, chosen, MESHES["2d" if kind == "2d" else "1d"])
    path = _file(tmp_path_factory.mktemp("s"), src)
    ins = p.inputs(seed)
    info = f"{src}ties={p.ties} seed={seed} mesh={kind}"
    splits = [c for c in chosen if c[1] != "partial"]
    uneven = any(p.params[i][1][int(a)].val % 2 for i, a, _ in splits)
    unfit = uneven or any(p.params[i][1][int(a)].val % ways for i, a, _ in splits)
    try:
        vg = kinac.value_and_grad(path, "f", wrt=p.wrt(), mesh=4 if kind == "resized" else "m")
        val, grads = vg(*p.call_args(ins))
    except (KinaCallError, KinaCompileError) as e:
        assert uneven and re.search(r"K0(413|802)", str(e)), (info, str(e))
        event("an uneven split: K0413/K0802")
        return
    except KinaUsageError as e:
        assert unfit and not uneven and "do not divide" in str(e), (info, str(e))
        event("resized to 4, unfit: a usage error")
        return
    assert not unfit, ("an uneven split ran", info)
    event(f"ran sharded ({kind})")
    pval, pgrads = kinac.value_and_grad(path, "f", wrt=p.wrt())(*p.call_args(ins))
    close(val, np.asarray(pval, np.float64), TOL[p.dtype], "value " + info)
    for n in p.wrt():
        close(grads[n], np.asarray(pgrads[n], np.float64), TOL[p.dtype], f"d/d{n} " + info)


@hunt_settings(2)
@given(grad_programs(dtypes=DTYPES, max_depth=3, sizes=SIZES), seeds)
def test_gradient_graph_gpu_lowering_emulated_equals_torch(p: GradProg, seed: int) -> None:
    """The gradient graph (the transform of the specialised forward) through the GPU
    lowering, run on the CPU emulator: value and gradients against torch autograd."""
    from gpu_support import run_emulated

    from kinac.check import DefnRef, specialise
    from kinac.grad.remat import rematerialize
    from kinac.grad.transform import value_and_grad

    assume(not SKIP.intersection(p.ops))
    ws = Workspace({"p.kina": p.source()})
    dims = {d.expr: d.val for _, s, _ in p.params for d in s if re.fullmatch(r"N\d+", d.expr)}
    sp = specialise(DefnRef("p.kina", "f"), dims, {"T": p.dtype} if p.dtype_var else {}, ws.env)
    assert not sp.diagnostics and sp.graph is not None, (p.source(), sp.diagnostics)
    ins = p.inputs(seed)
    # as grad_gpu_lowered does: recomputations in the backward, then the memory order
    val, *grads = run_emulated(rematerialize(value_and_grad(sp.graph, p.wrt())), *ins)
    w, want = torch_grads(p, ins)
    info = f"{p.source()}ties={p.ties} seed={seed} (GPU lowering, emulated)"
    close(val, np.asarray(w), tolerance(p), "value " + info)
    if np.isfinite(w):
        for n, g in zip(p.wrt(), grads, strict=True):
            close(g, want[n], tolerance(p), f"d/d{n} " + info)


@hunt_settings(3)
@given(grad_programs(dtypes=("f64", "f32"), max_depth=DEPTH, sizes=SIZES), seeds)
def test_recomputed_gradient_graph_is_bit_identical(p: GradProg, seed: int) -> None:
    """The GPU gradient's graph rewrites (``kinac.grad.remat``: every softmax cone recomputed
    whatever its size and dtype, free elementwise values recomputed, the backward reordered
    for memory) change no bit of any output (the interpreter, before and after)."""
    from kinac.check import DefnRef, specialise
    from kinac.grad.remat import rematerialize_elementwise, rematerialize_softmax
    from kinac.grad.schedule import order_for_memory
    from kinac.grad.transform import value_and_grad
    from kinac.tir.interp import evaluate

    ws = Workspace({"p.kina": p.source()})
    dims = {d.expr: d.val for _, s, _ in p.params for d in s if re.fullmatch(r"N\d+", d.expr)}
    sp = specialise(DefnRef("p.kina", "f"), dims, {"T": p.dtype} if p.dtype_var else {}, ws.env)
    assert not sp.diagnostics and sp.graph is not None, (p.source(), sp.diagnostics)
    g = value_and_grad(sp.graph, p.wrt())
    r = rematerialize_softmax(g, min_bytes=0, dtypes=("f64", "f32"))
    r = order_for_memory(rematerialize_elementwise(r))
    event("rewritten" if r.nodes != g.nodes else "unchanged")
    ins = p.inputs(seed)
    for k, (a, b) in enumerate(zip(evaluate(g, *ins), evaluate(r, *ins), strict=True)):
        np.testing.assert_array_equal(a, b, err_msg=f"output {k} {p.source()}")
