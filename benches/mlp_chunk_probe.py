"""The 45M block's MLP row-chunked so its intermediate stays in L2 (issue 14; run by hand on
the GPU machine: ``python3 benches/mlp_chunk_probe.py --out DIR``, about 40 s).

The 45M bf16 block (B4 S1024) and the S=4096 block (B1 S4096) both run their MLP on M = 4096
rows: ``x + (silu(n @ wg) * (n @ wu)) @ wd`` with ``n = rms_norm(x, wn)``, D = 2048, F = 5632.
Today that is four steps: the norm, gate and up as one grouped cuBLAS call (92 MB written),
the ``silu * mul`` map (reads the 92 MB back from HBM, writes 46 MB), the down GEMM with the
residual epilogue. The idea measured here: do it in chunks of R rows, the intermediate buffer
reused across chunks, so that the map (and the down GEMM's left operand) read it from the
H200's L2 instead of HBM.

Everything is kinac's own lowering: the MLP is built as a Graph at M = R and lowered by
``lower_graph_gpu`` (the block's own kernels and cuBLAS binding, GEMMs untuned: today's
binding for every R), loaded once, and its launch sequence bound 4096 / R times at row offsets
of the same 4096-row input and output (one entry: one arena, so every chunk's intermediate
lies at the same addresses), all captured in ONE CUDA graph; against the M = 4096 entry's
graph. Rounds interleaved (the order rotating) after a warm-up, CUDA events, medians.

A. whole MLP, M = 4096 against chunked R = 2048 / 1024 / 512 (and R = 1024 with a separate
   entry per chunk, i.e. separate arenas: whether reusing the lines matters); the chunked
   Graph (slices, chunks, a concat with the residual: ``R concat``) and ``gpu-chunk-mlp``'s
   own lowering of the whole MLP (``0 concat``);
B. each step alone at each R (``GpuEntry.profile``: the step replayed 20 times, inputs hot);
C. the map alone: M = 4096 in one launch, against 4 launches of R = 1024 at 4 row offsets
   (cold: what today's map sees) and 4 launches at the same rows (hot in L2);
D. the map kernel's own rate at the block's shape (``benches/gpu_map_ab.py``'s variants);
E. the 45M and S=4096 blocks through ``kinac.compile`` with and without ``gpu-chunk-mlp``,
   against the best PyTorch, in one process;
F. the next lever (``--parts f``): the map's blocks in reverse order (:func:`reversed_maps`),
   the whole MLP and both blocks.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benches")]

M, D, F = 4096, 2048, 5632
LINES: list[str] = []
RES: dict[str, Any] = {}
OUT = [Path(".")]
T0 = time.perf_counter()


def emit(s: str = "") -> None:
    LINES.append(s)
    print(s, flush=True)
    (OUT[0] / "probe.md").write_text("\n".join(LINES) + "\n")
    (OUT[0] / "probe.json").write_text(json.dumps(RES, indent=1, default=str))


def smi() -> str:
    q = "clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=5)  # fmt: skip
        return r.stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi: {e}"


def mlp_graph(m: int, dt: str = "bf16") -> Any:
    """``x + (silu(rms_norm(x, wn) @ wg) * (rms_norm(x, wn) @ wu)) @ wd`` at M = ``m`` rows."""
    from kinac.ir.testing import GraphBuilder, rms_norm

    g = GraphBuilder(f"mlp_res_{m}")
    x = g.param("x", dt, (m, D))
    wn = g.param("wn", dt, (D,))
    wg, wu, wd = g.param("wg", dt, (D, F)), g.param("wu", dt, (D, F)), g.param("wd", dt, (F, D))
    n = rms_norm(g, x, wn)
    ff = g.binary("mul", g.unary("silu", g.matmul(n, wg)), g.matmul(n, wu))
    return g.build(g.binary("add", x, g.matmul(ff, wd)))


def mlp_chunked_graph(r: int, dt: str = "bf16") -> Any:
    """The same MLP on M = 4096 rows as a Graph a chunking rewrite gives: per chunk of ``r``
    rows a slice of ``x``, the chunk's MLP and residual, then one concat of the chunks."""
    from kinac.ir.testing import GraphBuilder, rms_norm

    g = GraphBuilder(f"mlp_chunks_{r}")
    x = g.param("x", dt, (M, D))
    wn = g.param("wn", dt, (D,))
    wg, wu, wd = g.param("wg", dt, (D, F)), g.param("wu", dt, (D, F)), g.param("wd", dt, (F, D))
    outs = []
    for i in range(M // r):
        xc = g.slice(x, 0, i * r, (i + 1) * r)
        n = rms_norm(g, xc, wn)
        ff = g.binary("mul", g.unary("silu", g.matmul(n, wg)), g.matmul(n, wu))
        outs.append(g.binary("add", xc, g.matmul(ff, wd)))
    return g.build(g.concat(outs, 0))


def load(graph: Any) -> Any:
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.rt.cuda.entry import load_gpu_entry

    lo = lower_graph_gpu(graph)
    return load_gpu_entry(lo, compile_ptx(lo.llvm_ir))


def chunked(ents: list[Any], rows: int, ins: list[Any], out: Any, name: str, same: bool = False, rowed: int = 1) -> Any:  # fmt: skip
    """One CUDA graph running ``ents[i % len(ents)]``'s launch sequence on rows
    ``[i R, (i + 1) R)`` of the first ``rowed`` inputs and ``out`` for each chunk ``i`` (the
    other inputs whole: weights); ``same``: every chunk on rows ``[0, R)`` (the map's hot-L2
    control)."""
    from kinac.rt.cuda.graph import capture

    n = ins[0].shape[0] // rows
    seqs = []
    for i in range(n):
        e = ents[i % len(ents)]
        ptrs = [t.data_ptr() + (0 if same or j >= rowed else i * rows * t.stride(0) * t.element_size()) for j, t in enumerate(ins)]  # fmt: skip
        ooff = 0 if same else i * rows * out.shape[1] * out.element_size()
        key = (*ptrs, out.data_ptr() + ooff)
        seq, _ = e._bind(key)
        seq(e.stream)  # library initialisation outside capture
        seqs.append(seq)
    ents[0].stream.synchronize()

    def all_chunks(stream: Any) -> None:
        for s in seqs:
            s(stream)

    g = capture(all_chunks, ents[0].capture_stream, name=name)
    return lambda: g.replay(ents[0].stream), g


def interleave(fns: dict[str, Callable[[], Any]], rounds: int, calls: int, warm_s: float = 1.0) -> dict[str, dict[str, float]]:  # fmt: skip
    """Median / min ms per call of each variant (events), rounds interleaved, order rotating."""
    import torch

    names = list(fns)
    t = time.perf_counter() + warm_s
    while time.perf_counter() < t:
        for n in names:
            for _ in range(5):
                fns[n]()
        torch.cuda.synchronize()
    ts: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(calls):
                fns[n]()
            b.record()
            b.synchronize()
            ts[n].append(a.elapsed_time(b) / calls)
    return {n: {"med": statistics.median(v), "min": min(v)} for n, v in ts.items()}


def inputs() -> list[Any]:
    import torch

    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(M, D, generator=g)
    wn = 1.0 + 0.1 * torch.randn(D, generator=g)
    ws = [torch.randn(D, F, generator=g) / D**0.5 for _ in range(2)]
    wd = torch.randn(F, D, generator=g) / F**0.5
    return [t.to("cuda", torch.bfloat16) for t in (x, wn, *ws, wd)]


def part_a(ins: list[Any]) -> dict[int, Any]:
    import torch

    ents = {r: load(mlp_graph(r)) for r in (4096, 2048, 1024, 512)}
    ents_sep = [ents[1024], *(load(mlp_graph(1024)) for _ in range(3))]
    cat = {r: load(mlp_chunked_graph(r)) for r in (2048, 1024)}
    chunk_pass(True)
    cat[0] = load(mlp_graph(M))  # gpu-chunk-mlp's own lowering of the whole MLP
    chunk_pass(False)
    emit(f"Built 10 entries in {time.perf_counter() - T0:.1f} s; GPU: {smi()}")
    for r, e in ents.items():
        emit(f"- R={r}: " + "; ".join(f"{s.sym} {s.gemm.mode} b={s.gemm.batch} {s.gemm.m}x{s.gemm.n}x{s.gemm.k}" if s.gemm else f"{s.sym} {[(ln.grid, ln.note) for ln in s.launches]}" for s in e.lowered.steps) + f"; arena {e.lowered.arena_bytes / 1e6:.1f} MB")  # fmt: skip
    names = ("4096", "2048", "1024", "512", "1024 sep", "2048 concat", "1024 concat", "0 concat")
    outs = {k: torch.empty(M, D, device="cuda", dtype=torch.bfloat16) for k in names}
    fns: dict[str, Callable[[], Any]] = {}
    graphs: dict[str, Any] = {}
    for r in (4096, 2048, 1024, 512):
        fns[str(r)], graphs[str(r)] = chunked([ents[r]], r, ins, outs[str(r)], f"mlp{r}")
    fns["1024 sep"], graphs["1024 sep"] = chunked(ents_sep, 1024, ins, outs["1024 sep"], "mlp1024sep")  # fmt: skip
    for r, e in cat.items():  # the rewrite's graph as one entry: slices, chunks, concat
        fns[f"{r} concat"], graphs[f"{r} concat"] = chunked([e], M, ins, outs[f"{r} concat"], f"cat{r}")  # fmt: skip
        emit(f"- {r} concat: " + "; ".join(s.sym for s in e.lowered.steps) + f"; arena {e.lowered.arena_bytes / 1e6:.1f} MB")  # fmt: skip
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    ref = outs["4096"].double()
    t64 = None
    try:
        x, wn, wg, wu, wd = (t.double() for t in ins)
        n = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * wn
        t64 = x + (torch.nn.functional.silu(n @ wg) * (n @ wu)) @ wd
    except Exception as e:  # noqa: BLE001
        emit(f"f64 reference failed: {e}")
    for k, o in outs.items():
        same = bool(torch.equal(o, outs["4096"]))
        d = float((o.double() - ref).abs().max())
        e64 = float((o.double() - t64).norm() / t64.norm()) if t64 is not None else float("nan")
        emit(f"- {k}: bit-identical to M=4096: {same}; max |diff| {d:.3g}; rel L2 vs f64 {e64:.3g}; graph nodes {graphs[k].num_nodes}")  # fmt: skip
        RES.setdefault("check", {})[k] = dict(identical=same, maxdiff=d, rel64=e64)
    emit("\n### A. Whole MLP (M = 4096), one CUDA graph each, 12 interleaved rounds of 20 replays (ms per MLP)\n")  # fmt: skip
    for rep in range(2):
        res = interleave(fns, 12, 20)
        RES[f"a{rep}"] = res
        base = res["4096"]["med"]
        emit(f"run {rep + 1}: " + "; ".join(f"{k}: {v['med'] * 1e3:.1f} / {v['min'] * 1e3:.1f} us ({v['med'] / base:.3f}x)" for k, v in res.items()) + f"; GPU after: {smi()}")  # fmt: skip
    return ents


def part_b(ents: dict[int, Any], ins: list[Any]) -> None:
    import torch

    emit("\n### B. Each step alone (GpuEntry.profile: 20 back-to-back replays, inputs hot; us; x 4096/R = per 4096 rows)\n")  # fmt: skip
    emit("| R | step | what | us | x 4096/R |")
    emit("|---|---|---|---|---|")
    for r, e in ents.items():
        xs = [ins[0][:r].contiguous(), *ins[1:]]
        for s, t in e.profile(*xs):
            what = f"{s.gemm.mode} b={s.gemm.batch} {s.gemm.m}x{s.gemm.n}x{s.gemm.k} {s.gemm.epilogue}" if s.gemm else "; ".join(f"{ln.grid}x{ln.block} {ln.note}" for ln in s.launches)  # fmt: skip
            emit(f"| {r} | {s.sym} | {what} | {t * 1e3:.1f} | {t * 1e3 * 4096 / r:.1f} |")
            RES.setdefault("steps", []).append((r, s.sym, t * 1e3))
        torch.cuda.synchronize()


def part_c() -> None:
    import torch
    from gpu_map_ab import _build

    from kinac.rt.cuda.entry import load_gpu_entry

    emit("\n### C. The map silu(a) * b alone, in place (ms per 4096 x 5632; 12 interleaved rounds of 20)\n")  # fmt: skip
    full = load_gpu_entry(*_build(None, False, True, (4096, F)))
    part = load_gpu_entry(*_build(None, False, True, (1024, F)))
    a, b = (torch.randn(4096, F, device="cuda").to(torch.bfloat16) for _ in range(2))
    fns: dict[str, Callable[[], Any]] = {}
    fns["M=4096, one launch"], _ = chunked([full], 4096, [a, b], a, "map4096", rowed=2)
    fns["4 x R=1024, 4 row blocks (cold)"], _ = chunked([part], 1024, [a, b], a, "map1024", rowed=2)
    fns["4 x R=1024, same rows (hot L2)"], _ = chunked([part], 1024, [a, b], a, "map1024hot", same=True, rowed=2)  # fmt: skip
    res = interleave(fns, 12, 20)
    RES["map"] = res
    mb = 3 * 4096 * F * 2 / 1e6
    for k, v in res.items():
        emit(f"- {k}: {v['med'] * 1e3:.1f} / {v['min'] * 1e3:.1f} us ({mb / (v['med'] * 1e-3) / 1e6:.2f} TB/s effective for {mb:.0f} MB)")  # fmt: skip


def part_d() -> None:
    import torch
    from gpu_map_ab import map_variants

    a = torch.empty(1 << 28, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    for _ in range(10):
        b.copy_(a)
    ev1.record()
    ev1.synchronize()
    bw = 2 * a.numel() * 10 / (ev0.elapsed_time(ev1) * 1e-3) / 1e12
    emit(f"\n### D. Map variants (copy bandwidth {bw:.2f} TB/s, 256 MiB copy_)")
    del a, b
    map_variants(emit, RES, bw)


def chunk_pass(on: bool) -> None:
    """Put ``gpu-chunk-mlp`` into the GPU passes (after ``gpu-fuse-epilogues``) or take it out
    (the lowering reads the tuple at each call: this process only)."""
    from kinac.ir.gpu import pipeline as gp
    from kinac.ir.gpu.fuse_epilogues import GpuFuseEpilogues
    from kinac.ir.gpu.mlp_chunks import GpuChunkMlp

    ps = [p for p in gp.GPU_PASSES if p is not GpuChunkMlp]
    if on:
        ps.insert(ps.index(GpuFuseEpilogues) + 1, GpuChunkMlp)
    gp.GPU_PASSES = tuple(ps)


def part_e(quick: bool) -> None:
    """The 45M and S=4096 bf16 blocks through ``kinac.compile`` (no disk cache, GEMMs tuned,
    attention fixed to the H200's variant), with and without ``gpu-chunk-mlp``, and the best
    PyTorch (SDPA + reduce-overhead), pipelined, rounds interleaved."""
    import torch
    from gemm_45m_probe import FixedAttention
    from gpu_api_blocks import LONG
    from gpu_api_blocks import block_sdpa as _sdpa
    from gpu_refs import BIG, block_inputs, block_torch, causal_mask, rel_l2

    import kinac
    import kinac.pipeline_autotune as pa
    from kinac.rt.cuda.kernel_timer import device_name

    sdpa: Any = _sdpa
    pa._GPU[:] = [FixedAttention(device_name())]
    emit("\n### E. The blocks through kinac.compile: without / with gpu-chunk-mlp, best PyTorch (ms per call, pipelined: 30 calls then a sync; 8 interleaved rounds, medians)\n")  # fmt: skip
    for name, dims in (("45M B4 S1024", BIG), ("S=4096 B1 S4096", LONG)):
        ins = block_inputs(dims, torch.bfloat16)
        h, kv = dims["h"], dims["kv"]
        fns: dict[str, Callable[[], Any]] = {}
        outs = {}
        for on in (False, True):
            chunk_pass(on)
            t = time.perf_counter()
            f = kinac.compile(
                ROOT / "workspaces/transformer", "block", target="cuda", no_cache=True
            )
            outs[on] = torch.from_dlpack(f(h, kv, *ins)).clone()
            torch.cuda.synchronize()
            ent = next(iter(f._entries.values()))
            steps = [s.sym for s in ent.lowered.steps]
            emit(f"- {name} chunks {'on' if on else 'off'}: built in {time.perf_counter() - t:.1f} s, {len(steps)} steps: {' '.join(steps)}")  # fmt: skip
            fns["kinac chunked" if on else "kinac today"] = functools.partial(f, h, kv, *ins)
        chunk_pass(False)
        ref = block_torch(*(t.double() for t in ins), h, kv, causal_mask(dims["s"], torch.float64, "cuda"))  # fmt: skip
        same = bool(torch.equal(outs[False], outs[True]))
        emit(f"- {name}: rel L2 vs f64: today {rel_l2(outs[False], ref):.3g}, chunked {rel_l2(outs[True], ref):.3g}; bit-identical {same}; max |diff| {float((outs[False].double() - outs[True].double()).abs().max()):.3g}")  # fmt: skip
        del ref
        try:
            ro = torch.compile(lambda *a, h=h, kv=kv: sdpa(*a, h, kv), mode="reduce-overhead")
            for _ in range(3):
                ro(*ins)
            fns["torch reduce-overhead"] = functools.partial(ro, *ins)
        except Exception as e:  # noqa: BLE001
            emit(f"- torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
        for f_ in fns.values():
            f_()
        torch.cuda.synchronize()
        ts: dict[str, list[float]] = {k: [] for k in fns}
        names = list(fns)
        heat_end = time.perf_counter() + 1.0
        while time.perf_counter() < heat_end:
            for k in names:
                fns[k]()
            torch.cuda.synchronize()
        for r in range(8):
            for k in names[r % len(names) :] + names[: r % len(names)]:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(30):
                    fns[k]()
                torch.cuda.synchronize()
                ts[k].append((time.perf_counter() - t0) * 1e3 / 30)
        med = {k: statistics.median(v) for k, v in ts.items()}
        best = med.get("torch reduce-overhead", float("nan"))
        RES[f"api {name}"] = ts
        emit(f"- {name}: " + "; ".join(f"{k} {v:.4f} ms ({v / best:.3f}x of PyTorch)" for k, v in med.items()) + f"; GPU: {smi()}")  # fmt: skip
        del fns, outs


@contextlib.contextmanager
def reversed_maps() -> Iterator[None]:
    """Map kernels generated with their blocks in reverse order (block ``i`` takes the
    elements of block ``grid - 1 - i``): this process, while building. Why: the gate/up
    product's last tiles (the bottom rows, if cuBLAS rasters along M) are still in L2 when
    the map starts, and the map's last writes (then the top rows) when the down product
    starts reading ``h`` from its first rows."""
    from kinac.ir.gpu import kernels as kg

    orig_tid, orig_body = kg.KernelGen._tid, kg.KernelGen._map_body

    def body(self: Any, b: Any, r: Any, out: Any, shape: Any, vec: int, value: Any, out_shape: Any) -> None:  # fmt: skip
        if out_shape is not None or self.k.kind.data != "map":
            orig_body(self, b, r, out, shape, vec, value, out_shape)
            return
        groups = math.prod(shape) // vec
        grid = kg.map_grid(groups, kg.map_unroll(groups))

        def tid(self2: Any, b2: Any) -> Any:
            t, bid = orig_tid(self2, b2)
            return t, b2.iadd(b2.imul(bid, -1, self2.ix), grid - 1, self2.ix)

        setattr(kg.KernelGen, "_tid", tid)  # noqa: B010
        try:
            orig_body(self, b, r, out, shape, vec, value, out_shape)
        finally:
            setattr(kg.KernelGen, "_tid", orig_tid)  # noqa: B010

    kg.KernelGen._map_body = body  # type: ignore[method-assign]
    try:
        yield
    finally:
        kg.KernelGen._map_body = orig_body  # type: ignore[method-assign]


def part_f(ins: list[Any]) -> None:
    """The map's blocks in reverse order: the whole MLP (M = 4096), and both blocks through
    ``kinac.compile`` against the best PyTorch, rounds interleaved."""
    import torch
    from gemm_45m_probe import FixedAttention
    from gpu_api_blocks import LONG
    from gpu_api_blocks import block_sdpa as _sdpa
    from gpu_refs import BIG, block_inputs

    import kinac
    import kinac.pipeline_autotune as pa
    from kinac.rt.cuda.kernel_timer import device_name

    sdpa: Any = _sdpa
    pa._GPU[:] = [FixedAttention(device_name())]
    emit("\n### F. The map's blocks in reverse order (us per MLP; ms per block call, pipelined)\n")
    fwd = load(mlp_graph(M))
    with reversed_maps():
        rev = load(mlp_graph(M))
    o1, o2 = (torch.empty(M, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    fns = {"today": chunked([fwd], M, ins, o1, "fwd")[0], "reversed map": chunked([rev], M, ins, o2, "rev")[0]}  # fmt: skip
    for f_ in fns.values():
        f_()
    torch.cuda.synchronize()
    emit(f"- MLP outputs bit-identical: {bool(torch.equal(o1, o2))}")
    for rep in range(2):
        res = interleave(fns, 12, 20)
        RES[f"f{rep}"] = res
        emit(f"- MLP run {rep + 1}: " + "; ".join(f"{k} {v['med'] * 1e3:.1f} / {v['min'] * 1e3:.1f} us" for k, v in res.items()) + f"; GPU: {smi()}")  # fmt: skip
    for name, dims in (("45M B4 S1024", BIG), ("S=4096 B1 S4096", LONG)):
        bi = block_inputs(dims, torch.bfloat16)
        h, kv = dims["h"], dims["kv"]
        bf: dict[str, Callable[[], Any]] = {}
        outs = []
        for rv in (False, True):
            with reversed_maps() if rv else contextlib.nullcontext():
                f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda", no_cache=True)  # fmt: skip
                outs.append(torch.from_dlpack(f(h, kv, *bi)).clone())
            bf["reversed map" if rv else "today"] = functools.partial(f, h, kv, *bi)
        try:
            ro = torch.compile(lambda *a, h=h, kv=kv: sdpa(*a, h, kv), mode="reduce-overhead")
            for _ in range(3):
                ro(*bi)
            bf["torch reduce-overhead"] = functools.partial(ro, *bi)
        except Exception as e:  # noqa: BLE001
            emit(f"- torch.compile failed: {type(e).__name__}: {str(e)[:200]}")
        torch.cuda.synchronize()
        emit(f"- {name}: outputs bit-identical: {bool(torch.equal(outs[0], outs[1]))}")
        for rep in range(2):
            res = interleave(bf, 8, 30)
            RES[f"f {name} {rep}"] = res
            best = res.get("torch reduce-overhead", {"med": float("nan")})["med"]
            emit(f"- {name} run {rep + 1} (events): " + "; ".join(f"{k} {v['med']:.4f} ms ({v['med'] / best:.3f}x)" for k, v in res.items()) + f"; GPU: {smi()}")  # fmt: skip
        del bf, outs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--parts", default="acebd")
    a = ap.parse_args()
    OUT[0] = Path(a.out)
    OUT[0].mkdir(parents=True, exist_ok=True)
    import torch

    emit(f"# MLP row-chunking probe (issue 14), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {torch.cuda.get_device_name()}, torch {torch.__version__}\n")  # fmt: skip
    ins = inputs()
    ents: dict[int, Any] = {}
    for part in a.parts:
        t = time.perf_counter()
        try:
            if part == "a":
                ents = part_a(ins)
            elif part == "b" and ents:
                part_b(ents, ins)
            elif part == "c":
                part_c()
            elif part == "d":
                part_d()
            elif part == "e":
                part_e(False)
            elif part == "f":
                part_f(ins)
        except Exception:  # noqa: BLE001 - a failed part leaves the others' results
            emit(f"part {part} failed:\n```\n{traceback.format_exc()}```")
        emit(f"\n(part {part}: {time.perf_counter() - t:.1f} s; {time.perf_counter() - T0:.0f} s in all)")  # fmt: skip


if __name__ == "__main__":
    main()
