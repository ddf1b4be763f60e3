"""Where a host-input call's time goes (issue 17 item 3), rows of ``benches/runtime.py``.

The H200 measured the MLP fed a numpy ``x`` (0.5 MiB) each call at 66 us per call pipelined
against 29 us with a device ``x``; the DMA alone is 18 us, so the host side was the limit. These
rows isolate it, in the same run as ``runtime_modes.bench_host_inputs``:

* the staging copy alone (``numpy.copyto`` of ``x`` into a pinned block, one thread; and the
  process's :class:`~kinac.rt.cuda.staging_copy.HostCopier`, which splits big copies);
* the stager alone, per call (``stage`` + ``before_run`` + ``after_run`` on an idle stream: the
  copy, the waits, the DMA and the events, no compute), with ``x`` and with a 4 KiB array (the
  driver calls' floor);
* the MLP fed an array from ``kinac.rt.cuda.pinned_empty`` (filled in place once: no staging
  copy; each call waits for its DMA), and a ``pin_memory()`` torch tensor, pipelined, against
  the device ``x``;
* how many host-input calls took the staged steady state (``staging_hot``).

Not a bench itself (no ``kinac-bench`` line): ``runtime.py`` imports it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from benches.runtime_modes import MLP_SIZES, _mlp_fns, _pipelined_ms, _weights
from kinac.rt.cuda.testing import Row, row


def _us(fn: Any, n: int, rounds: int = 7) -> float:
    """Median over rounds of the host time per call of ``n`` calls, in microseconds."""
    for _ in range(3):
        fn()
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t0) * 1e6 / n)
    return sorted(ts)[rounds // 2]


def _stager_us(x: Any, n: int, pool: Any = None) -> float:
    """Per call: the stager alone on ``x`` (its own stager and an idle compute stream; its
    pinned blocks from ``pool``, default the process's)."""
    from kinac.rt import cuda
    from kinac.rt.cuda.staging import HostStager

    res = cuda.default_resource()
    blocks: list[int] = []

    def alloc(nbytes: int) -> int:
        blocks.append(res.allocate(nbytes, 0))
        return blocks[-1]

    st = HostStager(alloc, pool)
    s = cuda.Stream()
    shape, dt = x.shape, x.dtype.name

    def one() -> None:
        st.stage(0, x, shape, dt)
        st.before_run(s)
        st.after_run(s)

    us = _us(one, n)
    s.synchronize()
    st.close()
    for p in blocks:
        res.deallocate(p, 0, 0)
    return us


def bench_staging(quick: bool) -> list[Row]:
    """The rows (see the module docstring)."""
    import numpy as np
    import torch

    from kinac.rt.cuda.pinned import PinnedBuffer, default_pool, pinned_empty
    from kinac.rt.cuda.staging_copy import default_copier

    rows: list[Row] = []
    sync = torch.cuda.synchronize
    with tempfile.TemporaryDirectory() as tmp:
        staged, _ = _mlp_fns(Path(tmp))
        for b, s, d, f in MLP_SIZES[:1]:  # (every size's ratios: benches/runtime_sweep.py)
            ws = _weights(torch, d, f)
            x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
            mib = f"{x.nbytes / 2**20:g} MiB"
            what = f"MLP [{b},{s},{d}] f32 hidden {f}, x {mib}"
            n = 20 if quick else 100
            x_dev = torch.from_numpy(x).cuda()
            dev_ms = _pipelined_ms(lambda x=x_dev, w=ws: staged(x, *w), n, sync)
            host_ms = _pipelined_ms(lambda x=x, w=ws: staged(x, *w), n, sync)
            entry = next(e for k, e in staged._entries.items()
                         if k[0][0].device == "cpu" and tuple(k[0][0].shape) == x.shape)  # fmt: skip
            st = entry._stager
            ref = "host-input call, pipelined (same run)"
            blk = PinnedBuffer(default_pool(), x.shape, x.dtype)
            dst = blk.array
            one = _us(lambda d=dst, x=x: np.copyto(d, x), n)
            copier = default_copier()
            split = _us(lambda d=dst, x=x, c=copier: c(d, x), n)
            del dst
            blk.free()
            rows.append(row(f"{what}: staging copy alone (numpy.copyto into a pinned block)",
                            one, "us", host_ms * 1e3, ref, "info"))  # fmt: skip
            rows.append(row(f"{what}: staging copy alone, HostCopier ({copier.workers} workers, "
                            f"split from {copier.min_bytes >> 20} MiB)",
                            split, "us", one, "one copyto", "info"))  # fmt: skip
            rows.append(row(f"{what}: the stager alone per call (copy + waits + DMA + events, "
                            "no compute)", _stager_us(x, n), "us", host_ms * 1e3, ref, "info"))  # fmt: skip
            from kinac.rt.cuda.pinned import write_combined_pool

            rows.append(row(f"{what}: the stager alone per call, write-combined pinned blocks",
                            _stager_us(x, n, write_combined_pool()), "us", host_ms * 1e3, ref,
                            "info"))  # fmt: skip
            small = np.ones(1024, np.float32)
            rows.append(row("the stager alone per call, 4 KiB array (its driver calls)",
                            _stager_us(small, n), "us", host_ms * 1e3, ref, "info"))  # fmt: skip
            calls = st.copies if st is not None else 0
            hot = st.hot_calls if st is not None else 0
            native = bool(st is not None and st.calls.native)
            rows.append(row(f"{what}: host-input calls that took the staged steady state "
                            f"({hot} of {calls}; driver calls through ctypes: {native})",
                            host_ms, "ms", dev_ms, "device x, same entry, pipelined", "info"))  # fmt: skip
            buf = pinned_empty(x.shape, x.dtype)
            buf[...] = x
            want = torch.from_dlpack(staged(x_dev, *ws)).cpu().numpy()
            same = bool(np.array_equal(torch.from_dlpack(staged(buf, *ws)).cpu().numpy(), want))
            direct0 = st.direct if st is not None else 0
            pin_ms = _pipelined_ms(lambda x=buf, w=ws: staged(x, *w), n, sync)
            direct = (st.direct if st is not None else 0) - direct0
            shorter = "<= 1.2x" if x.nbytes < 4 << 20 else "info"
            rows.append(row(f"{what} in a pinned_empty array (filled once, no staging copy; "
                            f"{direct} DMAs from it), pipelined (same result: {same})",
                            pin_ms, "ms", dev_ms, "device x, same entry, pipelined", shorter))  # fmt: skip
            del buf
            xt = torch.from_numpy(x).pin_memory()
            same = bool(np.array_equal(torch.from_dlpack(staged(xt, *ws)).cpu().numpy(), want))
            direct0 = st.direct if st is not None else 0
            pt_ms = _pipelined_ms(lambda x=xt, w=ws: staged(x, *w), n, sync)
            direct = (st.direct if st is not None else 0) - direct0
            rows.append(row(f"{what} in a pinned torch CPU tensor (pin_memory(); {direct} DMAs "
                            f"from it), pipelined (same result: {same})",
                            pt_ms, "ms", dev_ms, "device x, same entry, pipelined", shorter))  # fmt: skip
            del xt
    return rows
