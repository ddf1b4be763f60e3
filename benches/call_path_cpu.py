"""The host cost of a GPU call's Python, measured without a GPU (issue 14 item 1).

    PYTHONPATH=. python3 benches/call_path_cpu.py [--reps N] [--mlp]

``kinac.compile(workspaces/transformer, "block", target="cuda")`` is compiled for real (the
small bf16 block's lowered entry and PTX), but its :class:`~kinac.rt.cuda.entry.GpuEntry` is
built without a driver: memory from the pool over a virtual resource, the context check and
the graph launch are no-op functions, torch CPU tensors stand for CUDA ones (imported at their
own addresses). What is timed is therefore everything a call does in Python up to the driver:
argument checks, the memo, output tensors, the binding lookup. Add ~1.5-2 us of driver time
for ``cuGraphLaunch`` on the H200. CPU time of this thread (``thread_time_ns``), best of
rounds, so a loaded machine disturbs it less; the reference is one eager ``torch.add`` on the
CPU, in the same run. ``--mlp``: the MLP's host-input call instead (a numpy ``x`` staged through
the stager's graphs over a stand-in libcuda: :func:`mlp_host_input`). Same-run A/B of two
trees: run each tree's copy of this file in turn (docs/runtime.md "What a hot call costs").
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def best_us(fn: Callable[[], Any], n: int, rounds: int = 9) -> float:
    """Best over ``rounds`` of this thread's CPU time per call of ``n`` calls (us)."""
    fn()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time_ns()
        for _ in range(n):
            fn()
        best = min(best, (time.thread_time_ns() - t0) / n / 1e3)
    return best


from latency_fakes import LAUNCHED, _Graph, cpu_as_cuda_import, driverless  # noqa: E402


def install_fake_cuda(tmp: Path) -> bool:
    """Stand the runtime on the tests' fake driver and the stand-in libcuda of
    ``benches/runtime_hostcost.py`` (graph launches return at once, the copy graphs' memcpy
    nodes run as ``memmove``, device memory is host memory); GPU entries load without a
    driver, and torch CPU tensors stand for CUDA ones. False without a C compiler."""
    import types

    import torch
    from runtime_hostcost import C, install_stand_in
    from staging_fakes import compile_stand_in
    from test_pinned import HostMemory

    from kinac.rt.cuda import device, pinned
    from kinac.rt.cuda import entry as E
    from kinac.rt.cuda import graph as G
    from kinac.rt.cuda.entry_support import DL_NAMES, array_nbytes
    from kinac.rt.cuda.pinned import PinnedPool
    from kinac.rt.cuda.tensor import DTYPES, contiguous_strides

    so = compile_stand_in(C, tmp, "libfake.so")
    if so is None:
        return False
    Graph = install_stand_in(so, run_replays=False)
    G.capture = Graph  # type: ignore[assignment,misc]
    mem = HostMemory()
    pinned._pool = PinnedPool(alloc=mem.alloc, free=lambda p: None)
    res = types.SimpleNamespace(ordinal=0, allocate=lambda n, s=0: mem.alloc(n),
                                deallocate=lambda p, n=0, s=0: None)  # fmt: skip

    def load(lowered: Any, ptx: str, **_: Any) -> Any:
        e = E.GpuEntry.__new__(E.GpuEntry)
        e.lowered, e.ordinal, e.pinned, e.resource = lowered, 0, True, res
        e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                         contiguous_strides(o.shape)) for o in lowered.outputs]  # fmt: skip
        e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
        e.stream = e.capture_stream = device.Stream.wrap(0)
        e._imports, e._last_box, e._stager, e._allocs = {}, [None], None, []
        n = len(lowered.params) + len(lowered.outputs)
        e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(n)], set(), {}, OrderedDict()  # fmt: skip
        e.captures = e.replays = 0
        e._bind = lambda key: ((lambda s: None), [])
        e._ctx_get, e._ctx_cur, e._ctx_ref, e._ctx_mine = (lambda r: 0), ctypes.c_void_p(), None, None  # fmt: skip
        return e

    E.load_gpu_entry = load
    E.entry_hot.torch_import = lambda a: (  # type: ignore[assignment]
        cpu_as_cuda_import(a) if isinstance(a, torch.Tensor) else None
    )
    return True


def mlp_host_input(reps: int) -> int:
    """The MLP fed a numpy ``x`` each call (issue 17's host-input call) through
    ``kinac.compile``, its four weights torch CPU tensors standing for CUDA ones, over
    :func:`install_fake_cuda`: the staged steady state's Python and ctypes per call, a tiny
    ``x`` (the staging copy ~0)."""
    import numpy as np
    import torch

    import kinac

    tmpd = tempfile.TemporaryDirectory()
    tmp = Path(tmpd.name)
    if not install_fake_cuda(tmp):
        print("no C compiler for the stand-in libcuda")
        return 1
    b, s, d, f = 2, 4, 8, 16
    g = torch.Generator().manual_seed(0)
    ws = [torch.randn(sh, generator=g) for sh in ((d, f), (f,), (f, d), (d,))]
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    src = tmp / "mlp.kina"
    src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
    fn = kinac.compile(src, "mlp", target="cuda", cache_dir=str(tmp / "cache"))
    for _ in range(8):
        fn(x, *ws)
    entry = next(iter(fn._entries.values()))
    st = entry._stager
    bound = entry.hot_path(tuple([x, *ws]))
    args = (x, *ws)
    rows = [
        ("kinac.compile callable (hot path)", lambda: fn(*args)),
        ("the bound call (staging_hot.bind)", lambda: bound(*args)),
        ("GpuEntry called directly", lambda: entry(*args)),
    ]
    print(
        "\n| call (MLP, numpy x [2,4,8] + 4 weights; Python + ctypes up to the driver) | host us |"
    )
    print("|---|---|")
    for name, fn_ in rows:
        print(f"| {name} | {best_us(fn_, reps):.2f} |")
    print(
        f"\nhot calls: callable {fn.hot_calls}, stager {st.hot_calls}, graph calls {st.graph_calls}"
    )
    st.close()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--mlp", action="store_true", help="the host-input MLP call instead")
    a = ap.parse_args()
    if a.mlp:
        return mlp_host_input(a.reps)
    import torch
    from gpu_refs import SMALL, block_inputs

    import kinac
    from kinac.rt.cuda import entry as E
    from kinac.rt.cuda import graph as G

    ins = block_inputs(SMALL, torch.bfloat16, device="cpu")
    E.load_gpu_entry = driverless(ins)
    E.entry_hot.torch_import = cpu_as_cuda_import  # type: ignore[assignment]
    G.capture = lambda seq, stream, name="": _Graph()  # type: ignore[assignment,misc]
    h, kv = SMALL["h"], SMALL["kv"]
    with tempfile.TemporaryDirectory() as tmp:
        f = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda", cache_dir=tmp)
        f(h, kv, *ins)
    entry = next(iter(f._entries.values()))
    for _ in range(4):
        f(h, kv, *ins)
        f(*ins, H=h, KV=kv)
    x0 = ins[0]

    def fresh() -> Any:  # a new tensor object at the same address (as torch's allocator reuses)
        return f(h, kv, x0.view(x0.shape), *ins[1:])

    rows = [
        ("kinac.compile callable, dims positional (hot path)", lambda: f(h, kv, *ins)),
        ("kinac.compile callable, dims by keyword (hot path)", lambda: f(*ins, H=h, KV=kv)),
        ("kinac.compile callable, a fresh x object each call (fast path; incl. its view)", fresh),
        ("(the view alone)", lambda: x0.view(x0.shape)),
        ("GpuEntry called directly", lambda: entry(*ins)),
        ("reference: one eager torch.add (CPU)", lambda: torch.add(ins[1], ins[1])),
    ]
    print("| call (small bf16 block, 10 arrays; Python up to the driver) | host us per call |")
    print("|---|---|")
    for name, fn in rows:
        print(f"| {name} | {best_us(fn, a.reps):.2f} |")
    print(f"\nhot calls: callable {f.hot_calls}, entry {entry.hot_calls}")
    order_ab(f, h, kv, ins, a.reps)
    return 0


def before_launch_us(call: Callable[[], Any], n: int) -> float:
    """Median wall time (us) from a call's start to its (fake) graph launch."""
    import statistics

    call()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        call()
        ts.append((LAUNCHED[0] - t0) / 1e3)
    return statistics.median(ts)


def order_ab(f: Any, h: int, kv: int, ins: list[Any], reps: int, rounds: int = 5) -> None:
    """The hot call with every check before the launch (``KINAC_LAUNCH_FIRST=0``, the order
    before 2026-12-02e) against launch first (addresses and versions compared after it):
    the whole call and the part before the launch, rounds interleaved, each order bound anew."""
    from kinac.rt import hot

    was = hot.LAUNCH_FIRST
    res: dict[str, dict[str, list[float]]] = {}
    try:
        for _ in range(rounds):
            for name, on in (("checks first (before)", False), ("launch first", True)):
                hot.LAUNCH_FIRST = on
                f._memo[0] = None  # bound again under this order
                for _ in range(4):
                    f(h, kv, *ins)
                assert f._memo[0] is not None and f._memo[0][9] is on
                r = res.setdefault(name, {"call": [], "before": []})
                r["call"].append(best_us(lambda: f(h, kv, *ins), reps, 3))
                r["before"].append(before_launch_us(lambda: f(h, kv, *ins), reps))
    finally:
        hot.LAUNCH_FIRST = was
        f._memo[0] = None
    print("\n| order of the hot call (dims positional) | host us per call (best) | us before the launch (median) |")  # fmt: skip
    print("|---|---|---|")
    for name, r in res.items():
        print(f"| {name} | {min(r['call']):.2f} | {min(r['before']):.2f} |")


if __name__ == "__main__":
    raise SystemExit(main())
