"""AdamW's fused GPU step: one kernel updating the flat parameters, ``m`` and ``v`` in place.

Why: Kina defns return one result, so ``std/optim.kina``'s AdamW is three defns
(``adamw-m``, ``adamw-v``, ``adamw-param``) and, over the flat buffers, three kernels: 10
passes over the weights' bytes (read ``g, m`` / ``g, v`` / ``p, m, v``, write ``m`` / ``v``
/ ``p``) and three graph replays a step. The training driver lowers the three defns' kernels
itself into one (:func:`kinac.ir.gpu.fused_inplace.fuse_inplace_maps`): 7 passes (read
``p, g, m, v``, write ``m, v, p``) and one launch, bit for bit the three kernels' arithmetic.

The step is a :class:`~kinac.rt.cuda.entry.GpuEntry` with no outputs whose
``updates_inputs`` are the parameters, ``m`` and ``v``: its buffers never move, so it binds
one CUDA graph per address of its staged scalars and replays it; its first call at new
addresses is the update itself (no replay on top of the warm-up).
"""

from __future__ import annotations

from typing import Any

# the fused function's buffers, in its parameter order
BUFFERS = ("p", "g", "m", "v", "b1", "b2", "lr", "eps", "wd", "t")
PARTS = (("adamw-m", "m"), ("adamw-v", "v"), ("adamw-param", "p"))
WRITTEN = (0, 2, 3)  # p, m, v
NAME = "adamw_fused"


def _graphs(n: int, dtype: str, options: dict[str, Any]) -> list[Any]:
    """The concrete graphs of the three defns over ``[n]`` of ``dtype``."""
    from kinac import pipeline
    from kinac.api import compile as compile_defn
    from kinac.train.optim import OPTIM_KINA

    out = []
    for name, _ in PARTS:
        f = compile_defn(OPTIM_KINA, name, target="cuda", **options)
        key = pipeline.EntryKey(f.key.file, name, (("..s", (n,)),), (("T", dtype),), "cuda")
        out.append(pipeline.entry_graph(f.sess.db, key).graph)
        f.sess.db.commit()
    return out


def fused_lowered(n: int, dtype: str, options: dict[str, Any]) -> tuple[Any, str]:
    """The fused step's :class:`~kinac.artifacts.gpu.GpuLoweredEntry` and its PTX."""
    from kinac.artifacts.gpu import GpuLaunch, GpuLoweredEntry, GpuStep
    from kinac.artifacts.host import BufferSpec
    from kinac.codegen.ptx import compile_ptx
    from kinac.dtypes import ITEMSIZE
    from kinac.ir.gpu.emit import module_text
    from kinac.ir.gpu.fused_inplace import fuse_inplace_maps, graph_part

    where = {b: i for i, b in enumerate(BUFFERS)}
    parts = [
        graph_part(g, [where[p] for p, _ in g.params], where[w])
        for g, (_, w) in zip(_graphs(n, dtype, options), PARTS, strict=True)
    ]
    fn = fuse_inplace_maps(parts, len(BUFFERS), NAME, "nvptx")
    llvm = module_text([fn.text], [fn.builder], "nvptx")
    params = tuple(BufferSpec(b, dtype, (n,) if i < 4 else ()) for i, b in enumerate(BUFFERS))
    args = tuple(f"param{i}" for i in range(len(BUFFERS)))
    launch = GpuLaunch(NAME, fn.grid, fn.block, args, fn.vec, fn.note)
    step = GpuStep(NAME, "map", "kernel", dtype, (n,), args, "param0", (launch,),
                   bytes_moved=7 * n * ITEMSIZE[dtype], also_writes=("param2", "param3"))  # fmt: skip
    lw = GpuLoweredEntry(NAME, llvm, params, (), ("cuda:0",) * len(BUFFERS), (), 0, 0,
                         (step,), (NAME,))  # fmt: skip
    return lw, compile_ptx(llvm)


def load(n: int, dtype: str, options: dict[str, Any]) -> Any:
    """The fused step as a GPU entry: ``entry(p, g, m, v, b1, b2, lr, eps, wd, t)`` updates
    ``p``, ``m`` and ``v`` (device buffers of ``n`` elements) in place."""
    from kinac.rt.cuda.entry import load_gpu_entry

    lw, ptx = fused_lowered(n, dtype, options)
    entry = load_gpu_entry(lw, ptx)
    entry.updates_inputs = WRITTEN
    return entry
