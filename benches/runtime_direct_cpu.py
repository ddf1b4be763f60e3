"""A caller's pinned ``x`` on the CPU: the host work before and after its DMA (issue 17, 2026-12-02e).

    PYTHONPATH=. python3 benches/runtime_direct_cpu.py [--reps N] [--rounds R]

Why: the MLP fed a 0.5 MiB ``pinned_empty`` ``x`` ran at 1.28x of device input on a slow H200
host: such a call waits for its own DMA, so the loop's period is the DMA plus the host work that
does not overlap it (what the call does before it queues the DMA, and after its wait). This
times kinac's side of that without a GPU, over ``benches/call_path_cpu.py``'s stand-in driver
(graph launches and event waits return at once; GPU entries load without a driver): per call
through ``kinac.compile``'s callable, the host time before the copy graph's launch, after it,
and the stand-in driver calls, for ``x`` in a ``pinned_empty`` array and in a torch CPU tensor
taken as pinned (``is_pinned`` patched: a CPU build cannot pin; its calls counted), with the
early DMA (``stager.early_dma``, here as the copy graph, whose launch is stamped) and the
pinnedness cache (``stager.pin_cache``) on and off,
rounds interleaved in one process. Wall time (``perf_counter_ns``) of this thread, median of
the rounds' medians; a loaded machine inflates every row alike.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benches")]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    import ctypes

    import numpy as np
    import torch
    from call_path_cpu import install_fake_cuda

    import kinac
    from kinac.rt.cuda.pinned import pinned_empty

    tmpd = tempfile.TemporaryDirectory()
    tmp = Path(tmpd.name)
    if not install_fake_cuda(tmp):
        print("no C compiler for the stand-in libcuda")
        return 1
    so = ctypes.PyDLL(str(tmp / "libfake.so"))
    so.fake_calls.restype = ctypes.c_longlong
    b, s, d, f = 2, 4, 8, 16
    g = torch.Generator().manual_seed(0)
    ws = [torch.randn(sh, generator=g) for sh in ((d, f), (f,), (f, d), (d,))]
    src = tmp / "mlp.kina"
    src.write_text((ROOT / "workspaces/mlp/mlp.kina").read_text(encoding="utf-8"))
    fn = kinac.compile(src, "mlp", target="cuda", cache_dir=str(tmp / "cache"))
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    buf = pinned_empty(x.shape, x.dtype)
    buf[...] = x
    tx = torch.from_numpy(pinned_empty(x.shape, x.dtype))
    tx.copy_(torch.from_numpy(x))
    asked = [0]

    def is_pinned(self: Any, device: Any = None) -> bool:  # (CPU torch cannot pin: stand-in)
        asked[0] += 1
        return True

    torch.Tensor.is_pinned = is_pinned  # type: ignore[method-assign,assignment]
    for _ in range(8):
        fn(x, *ws)
    entry = next(iter(fn._entries.values()))
    st = entry._stager
    st.direct_by_calls = False  # (the early DMA as the copy graph: its launch is stamped)
    stamp = [0]
    clock = time.perf_counter_ns

    def timed(launch: Any) -> Any:
        def run(ex: Any, stream: Any) -> int:
            stamp[0] = clock()
            return int(launch(ex, stream))

        return run

    cases = [
        ("pinned_empty x, DMA first (staging_direct)", buf, True, True),
        ("pinned_empty x, before (staging_hot.steady_call)", buf, False, True),
        ("pin_memory() torch x, DMA first, pinnedness cached", tx, True, True),
        ("pin_memory() torch x, DMA first, is_pinned() each call", tx, True, False),
        ("pin_memory() torch x, before (steady_call, is_pinned() each call)", tx, False, False),
    ]
    for _, xx, early, cache in cases:  # warm: both turns recorded, direct graphs built
        st.early_dma, st.pin_cache = early, cache
        for _ in range(8):
            fn(xx, *ws)
    for bl in st._direct_built.values():  # every direct copy graph's launch stamped
        if bl is not None and not hasattr(bl.launch, "__wrapped__"):
            bl.launch = timed(bl.launch)
            bl.launch.__wrapped__ = True
    res: dict[str, list[tuple[float, float, float]]] = {c[0]: [] for c in cases}
    calls: dict[str, float] = {}
    pins: dict[str, float] = {}
    for _ in range(a.rounds):
        for name, xx, early, cache in cases:
            st.early_dma, st.pin_cache = early, cache
            args = (xx, *ws)
            fn(*args)
            pre, post, tot = [], [], []
            so.fake_calls()
            asked[0] = 0
            for _ in range(a.reps):
                t0 = clock()
                fn(*args)
                t2 = clock()
                pre.append(stamp[0] - t0)
                post.append(t2 - stamp[0])
                tot.append(t2 - t0)
            calls[name] = so.fake_calls() / a.reps
            pins[name] = asked[0] / a.reps
            res[name].append(
                (statistics.median(pre), statistics.median(post), statistics.median(tot))
            )
    print(
        "| x (MLP [2,4,8] f32, through kinac.compile) | before the DMA's launch us | "
        "after it us | per call us | stand-in driver calls | is_pinned() per call |"
    )
    print("|---|---|---|---|---|---|")
    for name, *_ in cases:
        med = [statistics.median(r[k] for r in res[name]) / 1e3 for k in range(3)]
        print(
            f"| {name} | {med[0]:.2f} | {med[1]:.2f} | {med[2]:.2f} | {calls[name]:.1f} | "
            f"{pins[name]:.2f} |"
        )
    print(f"\nhot calls: callable {fn.hot_calls}, stager {st.hot_calls}, direct {st.direct}")
    st.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
