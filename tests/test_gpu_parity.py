"""The GPU differential suite (issue 18): the GPU back end against the host back end and the
float64 reference, primitive by primitive and dtype by dtype, and on random programs.

Every case of :mod:`gpu_parity_cases` (every elementwise primitive x every dtype it takes x
odd shapes; reductions, softmax, matmul, all casts, ``where``) and random well-typed programs (f32, f64, bf16, f16)
of the checker's generator (:mod:`check_gen`) run on two GPU back ends:

- ``emulated``: the same LLVM IR as the GPU's, compiled for the host CPU and run with one
  thread per GPU thread (:mod:`gpu_support`), in CI, on fewer shapes (the CPU part of the
  suite stays under a minute);
- ``cuda``: the real GPU (``-m gpu``; ``scripts/gpu.sh``), every shape.

Each output must be within its ulp bound of the reference (:func:`gpu_parity_cases.bound`)
and within twice that of the host back end; integers and bools exactly equal. The table
(primitive, dtype, max errors, pass) is written to ``$OUT/gpu_parity.md`` (``cuda``) or
``$OUT/gpu_parity_emulated.md`` when ``OUT`` is set.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from check_gen import Gen
from check_support import Workspace
from gpu_parity_cases import (
    ALL,
    Case,
    bound,
    elementwise_cases,
    floor_of,
    structural_cases,
    table,
    to_f64,
    ulp_error,
    values_finite,
)
from gpu_support import run_emulated
from host_support import run as host_run

from kinac.check import DefnRef, specialise
from kinac.tir.interp import evaluate

Runner = Callable[..., tuple[np.ndarray, ...]]
ROWS: dict[str, dict[tuple[str, str], tuple[float, float, bool]]] = {}
CPU_SHAPES = ((3, 67),)  # emulation runs a thread per GPU thread: one odd shape in CI
CPU_STRUCTURAL = ("red_f64", "red_bf16", "red_i32", "mm_f32", "mm_bf16", "cast_f32", "cast_bf16",
                  "cast_bool", "cast_i64", "where_f16", "where_bool")  # fmt: skip
BACKENDS = ["emulated", pytest.param("cuda", marks=pytest.mark.gpu)]


def _cuda() -> Runner:
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.rt import cuda
    from kinac.rt.cuda.entry import load_gpu_entry

    if not cuda.available():
        pytest.skip("no CUDA GPU")

    def run(graph: Any, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
        lw = lower_graph_gpu(graph)
        out = load_gpu_entry(lw, compile_ptx(lw.llvm_ir))(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        return tuple(o if isinstance(o, np.ndarray) else o.numpy() for o in outs)

    return run


def runner(backend: str) -> Runner:
    return run_emulated if backend == "emulated" else _cuda()


@pytest.fixture(scope="module", autouse=True)
def _write_tables() -> Iterator[None]:
    yield
    out = os.environ.get("OUT")
    if not out:
        return
    for backend, rows in ROWS.items():
        name = "gpu_parity.md" if backend == "cuda" else f"gpu_parity_{backend}.md"
        title = f"GPU parity ({backend}): {sum(ok for *_, ok in rows.values())}/{len(rows)} pass"
        Path(out).mkdir(parents=True, exist_ok=True)
        Path(out, name).write_text(table(rows, title))


def check_case(backend: str, case: Case, run: Runner) -> list[str]:
    """Run ``case``; record a row per output; return the failures."""
    got = run(case.graph, *case.inputs)
    ref = evaluate(case.graph, *case.inputs)
    # the host back end (tested against the same reference by its own suite) is compared on the
    # GPU run only, and on the larger shapes: its compile costs twice the GPU's
    with_host = backend == "cuda" and math.prod(case.graph.params[0][1].shape) >= 21
    host = host_run(case.graph, *case.inputs) if with_host else None
    bad = []
    rows = ROWS.setdefault(backend, {})
    for j, (prim, col, dt) in enumerate(case.outputs):
        b, fl = bound(prim, dt), floor_of(prim, ref[j], dt)
        eref = ulp_error(got[j], ref[j], dt, fl)
        ehost = ulp_error(got[j], host[j], dt, fl) if host is not None else float("nan")
        ok = eref <= b and (host is None or ehost <= 2 * b)
        old = rows.get((prim, col), (0.0, ehost, True))
        rows[(prim, col)] = (max(old[0], eref), max(old[1], ehost), old[2] and ok)
        if not ok:
            shape = case.graph.nodes[case.graph.outputs[j]].type.shape
            bad.append(f"{prim} {col}{list(shape)}: {eref:.3g} ulp vs ref, {ehost:.3g} vs host")
    return bad


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ALL)
def test_elementwise_parity(backend: str, dtype: str) -> None:
    run = runner(backend)
    shapes = CPU_SHAPES if backend == "emulated" else None
    cases = elementwise_cases(shapes) if shapes else elementwise_cases()
    mine = [c for c in cases if c.graph.params[0][1].dtype == dtype]
    bad = [m for c in mine for m in check_case(backend, c, run)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("backend", BACKENDS)
def test_structural_parity(backend: str) -> None:
    run = runner(backend)
    cases = [c for c in structural_cases() if backend == "cuda" or c.graph.name in CPU_STRUCTURAL]
    bad = [m for c in cases for m in check_case(backend, c, run)]
    assert not bad, "\n".join(bad)


PROGRAM_DTYPES = ("f32", "f64", "bf16", "f16")
# relative to the output's scale: bf16/f16 programs keep fused intermediates in f32 on the GPU
# while the reference rounds after every op (PyTorch eager), so they differ by a few ulps
PROGRAM_TOL = {"f32": 1e-5, "f64": 1e-12, "bf16": 2**-5, "f16": 2**-8}


def _program(seed: int) -> tuple[Any, list[np.ndarray], str] | None:
    """A random well-typed program (its f32 types turned to one of PROGRAM_DTYPES)."""
    dt = PROGRAM_DTYPES[seed % len(PROGRAM_DTYPES)]
    prog = Gen(seed).run(1 + seed % 6)
    ws = Workspace({"p.kina": prog.text.replace("f32", dt)})
    ref = DefnRef("p.kina", "f")
    c = ws.env.checked(ref)
    if not c.ok:
        return None
    rng = random.Random(seed)
    env = {v: rng.choice((1, 3, 7, 5)) for v in c.sig.dim_vars}
    if "P" in env:
        env["P"] = env.get("A", 1) * env.get("B", 1)
    sp = specialise(ref, env, {}, ws.env)
    if sp.graph is None:
        return None
    nrng = np.random.default_rng(seed)
    ins = [values_finite(nrng, t.shape, t.dtype) for _, t in sp.graph.params]
    return sp.graph, ins, dt


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_programs(backend: str) -> None:
    """The checker's generator of well-typed programs, in f32, f64, bf16 and f16, run on the
    GPU back end: each output close (PROGRAM_TOL of the output's scale) to the reference and
    the host back end."""
    run = runner(backend)
    n = 8 if backend == "emulated" else 32
    done, bad = 0, []
    for seed in range(1000):
        made = _program(seed)
        if made is None:
            continue
        graph, ins, dt = made
        got, ref = run(graph, *ins), evaluate(graph, *ins)
        host = host_run(graph, *ins) if backend == "cuda" else ref
        for j, (g, r, h) in enumerate(zip(got, ref, host, strict=True)):
            odt = graph.nodes[graph.outputs[j]].type.dtype
            g, r, h = to_f64(g, odt), to_f64(r, odt), to_f64(h, odt)
            scale = max(1.0, float(np.max(np.abs(np.nan_to_num(r)))))
            for other, what in ((r, "reference"), (h, "host")):
                err = float(np.max(np.abs(g - other)))
                if not err <= PROGRAM_TOL[dt] * scale:
                    bad.append(f"seed {seed} ({dt}): {err:.3g} from the {what}")
        done += 1
        if done == n:
            break
    assert done == n and not bad, "\n".join(bad)
