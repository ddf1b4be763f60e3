"""Why the 45M block's ``silu(gate) * up`` map runs at ~85% of copy bandwidth (issue 14).

The same map on 8192 x 8192 bf16 runs at 98% (``benches/gpu.py``, kernel quality); in the block
it is 4096 x 5632 (138 MB: 2.7 grid waves instead of 8, and written in place over ``up``). This
A/B times, in one process, the map at the block's shape in variants that each change one
thing, so the next change to the map kernel rests on a measurement:

- today's kernel (``kinac.ir.gpu.plan.map_unroll``: one vector group of 8 bf16 a thread at
  this size since 2026-12-02, from this A/B), into a separate output and in place over its
  first input (as the block's arena plan runs it);
- 4 groups a thread (the kernel before: 38.5 us, 85% of copy bandwidth, against 33.5 us at
  one group) and 2;
- a plain ``ex2.approx`` of ``x log2 e`` for ``exp`` (no clamp, no rounding-error correction,
  no NaN select: what Triton emits; well within bf16's precision): whether the kernel is
  bound by its ALU work rather than by memory (with 4 groups: 35.1 us against 38.5).

Each variant is built by ``lower_graph_gpu`` and ``compile_ptx`` with one function of the
lowering patched for the duration of its build (this process only); each step's time is
:meth:`kinac.rt.cuda.entry.GpuEntry.profile`'s (20 back-to-back runs in a CUDA graph). Called by
``benches/gpu.py`` (no bench marker of its own).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

SHAPE = (4096, 5632)  # the 45M block's FFN hidden activations, B*S x F


@contextlib.contextmanager
def _patched(obj: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


def _fast_exp(self: Any, x: Any) -> Any:
    from kinac.ir.gpu.scalar import LOG2E

    return self.ex2(self.fbin("fmul", x, self.f(LOG2E), ""))


def _build(unroll: int | None, fast_exp: bool, in_place: bool, shape: tuple[int, int] = SHAPE) -> tuple[Any, str]:  # fmt: skip
    from kinac.codegen.ptx import compile_ptx
    from kinac.ir.gpu import kernels
    from kinac.ir.gpu.pipeline import lower_graph_gpu
    from kinac.ir.gpu.scalar import Scalars
    from kinac.ir.testing import GraphBuilder

    tag = f"u{unroll or 0}_{'fast' if fast_exp else 'exp'}_{'inplace' if in_place else 'out'}"
    g = GraphBuilder(f"swiglu_map_{tag}_{shape[0]}x{shape[1]}")
    a, b = g.param("a", "bf16", shape), g.param("b", "bf16", shape)
    graph = g.build(g.binary("mul", g.unary("silu", a), b))
    with contextlib.ExitStack() as st:
        if unroll is not None:
            st.enter_context(_patched(kernels, "map_unroll", lambda groups: unroll))
        if fast_exp:
            st.enter_context(_patched(Scalars, "exp_f32", _fast_exp))
        lo = lower_graph_gpu(graph)
        ptx = compile_ptx(lo.llvm_ir)
    if in_place:  # the launch writes over its first input, as the block's arena plan has it
        (step,) = lo.steps
        (ln,) = step.launches
        args = tuple(ln.args[1] if i == 0 else x for i, x in enumerate(ln.args))
        lo = replace(lo, steps=(replace(step, launches=(replace(ln, args=args),)),))
    return lo, ptx


def map_variants(emit: Callable[[str], None], results: dict[str, Any], bw: float) -> None:
    """Emit the A/B table (see the module docstring); ``bw``: copy bandwidth, TB/s."""
    import torch

    from kinac.rt.cuda.entry import load_gpu_entry

    big = (8192, 8192)
    variants: list[tuple[Any, ...]] = [
        ("8192x8192: today, separate output", None, False, False, big),
        ("8192x8192: today, in place", None, False, True, big),
        ("8192x8192: unroll 4, in place", 4, False, True, big),
        ("today, separate output", None, False, False),
        ("today, in place (as in the block)", None, False, True),
        ("unroll 4, in place (before 2026-12-02)", 4, False, True),
        ("unroll 2, in place", 2, False, True),
        ("plain ex2 exp, today, in place", None, True, True),
    ]
    emit(f"\n## silu(a) * b bf16 at the 45M block's shape {SHAPE[0]}x{SHAPE[1]} (unless named): variants\n")  # fmt: skip
    emit("| variant | launch | time (us) | GB/s | % of copy |")
    emit("|---|---|---|---|---|")
    rows = []
    for name, unroll, fast, in_place, *at in variants:
        shape = at[0] if at else SHAPE
        try:
            lo, ptx = _build(unroll, fast, in_place, shape)
            ent = load_gpu_entry(lo, ptx)
            ins = [torch.randn(*shape, device="cuda").to(torch.bfloat16) for _ in range(2)]
            ((s, t),) = ent.profile(*ins)
        except Exception as e:  # noqa: BLE001 - one variant failing leaves the others' rows
            emit(f"| {name} | failed: {type(e).__name__}: {str(e)[:120]} | | | |")
            continue
        gbs = s.bytes_moved / (t * 1e-3) / 1e9
        how = "; ".join(f"{ln.grid}x{ln.block} {ln.note}" for ln in s.launches)
        rows.append(dict(variant=name, us=t * 1000, gbs=gbs, frac=gbs / (bw * 1000)))
        emit(f"| {name} | {how} | {t * 1000:.1f} | {gbs:.0f} | {100 * gbs / (bw * 1000):.0f}% |")
        del ent
    results["map_variants"] = rows
