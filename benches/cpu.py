"""kinac on the host CPU against PyTorch eager and ``torch.compile``, in one run.

    python benches/cpu.py [--reps N] [--settle S] [--no-compiled] [--torch-compile] [--root TREE]

Workloads (f32): the MLP ``[4, 128, 256]`` with hidden 1024 and GELU, and the small
transformer block (RMSNorm, GQA causal attention, SwiGLU, residuals; B=4 S=128 D=256 H=4 KV=2
F=704). PyTorch runs with 2 threads (``torch.set_num_threads(2)``), as kinac's pool does. kinac,
eager PyTorch and ``torch.compile``'s compiled function (steady state, compiled before timing;
``--no-compiled`` skips it) are timed in alternation, batch by batch, and the best batch of
each counts (this machine is shared, and load spikes only ever slow a batch down); the median
is printed too, and the load average before and after. Before each batch the bench pauses
``--settle`` seconds (default 0.05) and makes one untimed call: PyTorch's OpenMP threads spin
for milliseconds after each op, and back to back (``--settle 0``, as until 2026-12-02) the batch
after PyTorch's ran beside a spinning thread on one of the two cores (at real-time priority:
kinac's block 6.74 ms back to back, 4.63 ms with the pause; eager 6.43 / 5.87, compiled 5.52 /
4.11). Only a ratio from one run means anything. ``--root`` imports kinac from another tree (a before/after comparison runs the same
bench code on both). Cold compile: lower + LLVM + load for the first entry in a fresh process
(xDSL and llvmlite imports included), against ``torch.compile``'s first call (with
``--torch-compile``; it takes seconds).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if "--root" in sys.argv:  # before anything imports kinac
    ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve()
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from kinac.ir.testing import block_graph, mlp_graph  # noqa: E402
from kinac.tir.graph import Graph  # noqa: E402

BLOCK = {"b": 4, "s": 128, "d": 256, "h": 4, "kv": 2, "f": 704}


def torch_mlp(x: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    return F.gelu(x @ w1 + b1) @ w2 + b2


def _rms(x: Any, w: Any) -> Any:
    return x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-6) * w


def torch_block(x: Any, wn1: Any, wq: Any, wk: Any, wv: Any, wo: Any, wn2: Any, wg: Any, wu: Any, wd: Any) -> Any:  # fmt: skip
    b, s, d = x.shape
    h, kv = BLOCK["h"], BLOCK["kv"]
    dh = d // h
    n1 = _rms(x, wn1)
    q = (n1 @ wq).reshape(b, s, h, dh).transpose(1, 2)
    k = (n1 @ wk).reshape(b, s, kv, dh).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    v = (n1 @ wv).reshape(b, s, kv, dh).transpose(1, 2).repeat_interleave(h // kv, dim=1)
    mask = torch.full((s, s), float("-inf")).triu(1)
    p = torch.softmax(q @ k.transpose(-1, -2) * dh**-0.5 + mask, dim=-1)
    hid = x + (p @ v).transpose(1, 2).reshape(b, s, d) @ wo
    n2 = _rms(hid, wn2)
    return hid + (F.silu(n2 @ wg) * (n2 @ wu)) @ wd


def inputs(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for name, t in graph.params:
        scale = 1.0 / np.sqrt(t.shape[0]) if len(t.shape) == 2 else 1.0
        x = rng.standard_normal(t.shape) * scale + (1.0 if name.startswith("wn") else 0.0)
        out.append(x.astype(np.float32))
    return out


def compile_entry(graph: Graph) -> tuple[Any, float]:
    from kinac.codegen.llvm import compile_object, host_target
    from kinac.ir import lower_graph
    from kinac.rt.host import load_entry

    t = time.perf_counter()
    lw = lower_graph(graph)
    entry = load_entry(lw, compile_object(lw.llvm_ir, host_target()))
    return entry, time.perf_counter() - t


COLD = """
import sys, time
t = time.perf_counter()
sys.path.insert(0, {root!r})
from kinac.codegen.llvm import compile_object, host_target
from kinac.ir import lower_graph
from kinac.ir.testing import block_graph
from kinac.rt.host import load_entry
lw = lower_graph(block_graph(**{dims!r}))
load_entry(lw, compile_object(lw.llvm_ir, host_target()))
print(time.perf_counter() - t)
"""


def cold_compile_seconds() -> float:
    """Lower + compile + load of the block in a fresh interpreter, imports included."""
    import subprocess

    code = COLD.format(root=str(ROOT), dims=BLOCK)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def bench_pair(
    f: Callable[[], Any], g: Callable[[], Any], reps: int
) -> tuple[list[float], list[float]]:
    """Per-call seconds of batches of ``f`` and ``g``, alternating batch by batch."""
    a, b = bench_many((f, g), reps)
    return a, b


def bench_many(
    fs: tuple[Callable[[], Any], ...], reps: int, settle: float = 0.0
) -> list[list[float]]:
    """Per-call seconds of batches of each of ``fs``, in turn batch by batch.

    ``settle`` > 0: before each batch, sleep that long and make one untimed call. PyTorch's
    OpenMP threads spin for milliseconds after each op (libgomp's default), so a batch timed
    right after PyTorch's shares a core with a spinning thread; after the pause every
    contender's threads are idle, and the untimed call wakes its own."""
    for h in fs:
        for _ in range(3):
            h()
    n = 5
    out: list[list[float]] = [[] for _ in fs]
    for _ in range(reps):
        for h, acc in zip(fs, out, strict=True):
            if settle > 0:
                time.sleep(settle)
                h()
            t = time.perf_counter()
            for _ in range(n):
                h()
            acc.append((time.perf_counter() - t) / n)
    return out


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--torch-compile", action="store_true", help="also time torch.compile cold")
    ap.add_argument("--no-compiled", action="store_true", help="skip torch.compile steady state")
    ap.add_argument("--root", help="import kinac from this tree (default: this checkout)")
    ap.add_argument(
        "--settle",
        type=float,
        default=0.05,
        help="seconds of pause (then one untimed call) before each batch; 0: back to back",
    )
    args = ap.parse_args()
    torch.set_num_threads(2)
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, kinac from {ROOT}, "
          f"load average {load_average()}")  # fmt: skip
    t0 = time.perf_counter()
    block_entry, _ = compile_entry(block_graph(**BLOCK))
    cold_block = time.perf_counter() - t0
    mlp_entry, warm_mlp = compile_entry(mlp_graph(4, 128, 256, 1024))
    _, warm_block = compile_entry(block_graph(**BLOCK))
    from kinac.rt.host.blas import blas_info

    print(
        f"kinac BLAS: {blas_info()}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )
    rows = []
    for name, entry, graph, ref in (
        ("mlp [4,128,256] h1024", mlp_entry, mlp_graph(4, 128, 256, 1024), torch_mlp),
        ("block small", block_entry, block_graph(**BLOCK), torch_block),
    ):
        ins = inputs(graph)
        tins = [torch.from_numpy(a) for a in ins]
        with torch.no_grad():
            want = ref(*tins).numpy()
            err = float(np.max(np.abs(entry(*ins) - want)) / np.max(np.abs(want)))
            fs: list[Callable[[], Any]] = [
                lambda e=entry, i=ins: e(*i),
                lambda r=ref, i=tins: r(*i),
            ]
            if not args.no_compiled:
                comp = torch.compile(ref)
                comp(*tins)  # compiled here, outside the timing
                fs.append(lambda c=comp, i=tins: c(*i))
            times = bench_many(tuple(fs), args.reps, args.settle)
        best = [min(t) for t in times]
        rows.append((name, best, [statistics.median(t) for t in times], err))
    print(
        f"{'workload':24} {'kinac ms':>9} {'eager ms':>9} {'compiled':>9} {'/eager':>7} "
        f"{'/compiled':>9} {'/best':>6}   (median ms: kinac/eager/compiled)  max rel err"
    )
    for name, best, med, err in rows:
        kb, tb = best[0], best[1]
        cb = best[2] if len(best) > 2 else float("nan")
        top = min(best[1:])
        meds = "/".join(f"{m * 1e3:.3f}" for m in med)
        print(
            f"{name:24} {kb * 1e3:9.3f} {tb * 1e3:9.3f} {cb * 1e3:9.3f} {kb / tb:7.2f} "
            f"{kb / cb:9.2f} {kb / top:6.2f}   ({meds})  {err:.1e}"
        )
    print(f"load average after: {load_average()}")
    cold = cold_compile_seconds()
    print(
        f"compile: block cold {cold:.2f} s (fresh process, imports included), "
        f"first in this process {cold_block:.2f} s, block warm {warm_block:.2f} s, "
        f"mlp warm {warm_mlp:.2f} s"
    )
    if args.torch_compile:
        graph = block_graph(**BLOCK)
        tins = [torch.from_numpy(a) for a in inputs(graph)]
        t = time.perf_counter()
        with torch.no_grad():
            torch.compile(torch_block)(*tins)
        tc = time.perf_counter() - t
        print(
            f"torch.compile block cold: {tc:.2f} s; kinac cold / torch.compile cold = {cold / tc:.2f}"
        )
        ws = workspace_build_cold()
        print(
            f"kinac build workspaces/transformer, empty cache, fresh process (check 3 files + "
            f"prelude, build 2 entries): {ws:.2f} s; / torch.compile block cold = {ws / tc:.2f}"
        )


def workspace_build_cold() -> float:
    """Wall time of ``kinac build workspaces/transformer`` in a fresh process, empty cache."""
    import subprocess
    import tempfile

    root = ROOT
    with tempfile.TemporaryDirectory() as cache:
        t = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kinac",
                "build",
                str(root / "workspaces" / "transformer"),
                "--cache-dir",
                cache,
            ],
            check=True,
            capture_output=True,
            cwd=root,
        )
        return time.perf_counter() - t


if __name__ == "__main__":
    main()
