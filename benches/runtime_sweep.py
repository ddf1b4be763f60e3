"""Host-input calls across sizes (issue 17's overlap goal), a section of ``benches/runtime.py``.

The goal: host-input calls within 1.2x of device-input calls *at sizes where the copy is
smaller than the compute*. One MLP shape per size of ``x`` (0.5, 1, 2, 4, 8, 16 MiB; the
hidden width grows with the model width, so the compute grows faster than the copy), each
measured in the same run:

* **compute**: the MLP fed a device ``x``, pipelined (calls queued back to back, one sync at
  the end), and synced (a sync after each call);
* **copy**: the host ``memcpy`` of ``x`` into a pinned block (the process's
  :class:`~kinac.rt.cuda.staging_copy.HostCopier`, as the stager does it) plus the DMA from
  pinned memory (CUDA events): what a call must add when nothing overlaps;
* **host x**: the same numpy ``x`` passed each call (the stager copies it every call: nothing
  is cached by identity; also 4 arrays in rotation, so the source is not always in the CPU's
  cache, as a data loader's fresh batches), pipelined and synced, through the steady state as graphs
  (:mod:`~kinac.rt.cuda.staging_graphs`; its copy with streaming stores from a third of the L2
  on, :mod:`~kinac.rt.cuda.staging_nt`), the same with the cached copy (``stream_min`` off: the
  same-run A/B of the streaming copy), and as driver calls (``use_graphs = False``, the same
  stager), and without the pinned pool and overlap (``pinned=False``), and with the staging
  blocks write-combined (``KINAC_STAGING_WC=1``: the DMA does not snoop the CPU's caches; a
  memcpy into such a block alone beside it);
* **pinned x**: ``x`` in a :func:`~kinac.rt.cuda.pinned.pinned_empty` array (filled once), DMA'd
  where it is and waited for by each call; its copy is the DMA alone, so its goal applies where
  the DMA is shorter than the compute;

each as a ratio to the device ``x`` of its kind (pipelined or synced); "copy < compute" is
``memcpy + DMA < device x pipelined``, and the goal's verdict is given only there. Printed as
one compact table (``sweep_table``) besides the bench's rows.

Not a bench itself (no ``kinac-bench`` line): ``runtime.py`` imports it.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benches.runtime_modes import _copy_ms, _mlp_fns, _pipelined_ms, _weights, median_per_call
from kinac.rt.cuda.testing import Row, row

# (B, S, D, F): x is B*S*D f32
SWEEP = (
    (4, 128, 256, 1024),  # 0.5 MiB
    (4, 128, 512, 2048),  # 1 MiB
    (4, 256, 512, 2048),  # 2 MiB
    (4, 256, 1024, 4096),  # 4 MiB
    (4, 512, 1024, 4096),  # 8 MiB
    (8, 512, 1024, 4096),  # 16 MiB
)
GOAL = 1.2


def _synced_ms(call: Callable[[], Any], n: int, sync: Callable[[], None]) -> float:
    """Median over 5 rounds of the wall time per call with a sync after each call."""

    def run(k: int) -> None:
        for _ in range(k):
            call()
            sync()

    return median_per_call(run, n)


def _host_us(fn: Callable[[], Any], n: int) -> float:
    """Median over 5 rounds of the host time per call of ``fn`` (us), no sync."""

    def run(k: int) -> None:
        for _ in range(k):
            fn()

    return median_per_call(run, n, 1e6)


def _stager(fn: Any, shape: tuple[int, ...]) -> Any:
    """The stager of ``fn``'s entry specialised for a host ``x`` of ``shape``."""
    for k, e in fn._entries.items():
        t = k[0][0]
        if t.device == "cpu" and tuple(t.shape) == shape:
            return e._stager
    return None


def measure(
    pinned: Any, plain: Any, size: tuple[int, int, int, int], quick: bool, wc: Any = None
) -> dict[str, Any]:
    """Every number of one size (see the module docstring)."""
    import numpy as np
    import torch

    from kinac.rt.cuda.pinned import PinnedBuffer, default_pool
    from kinac.rt.cuda.staging_copy import default_copier

    b, s, d, f = size
    sync = torch.cuda.synchronize
    ws = _weights(torch, d, f)
    x = np.random.default_rng(0).standard_normal((b, s, d)).astype(np.float32)
    x_dev = torch.from_numpy(x).cuda()
    want = torch.from_dlpack(pinned(x_dev, *ws)).cpu().numpy()
    same = bool(np.array_equal(torch.from_dlpack(pinned(x, *ws)).cpu().numpy(), want))
    big = x.nbytes >= 4 << 20
    n = (10 if big else 40) if quick else (20 if big else 60)  # (the whole bench: ~40 s)
    r: dict[str, Any] = {"shape": [b, s, d, f], "mib": x.nbytes / 2**20, "same": same}
    r["dev_ms"] = _pipelined_ms(lambda: pinned(x_dev, *ws), n, sync)
    r["dev_sync_ms"] = _synced_ms(lambda: pinned(x_dev, *ws), n, sync)
    st = _stager(pinned, x.shape)
    graphs = bool(st is not None and st.graphs is not None)
    g0 = st.graph_calls if st is not None else 0
    r["host_ms"] = _pipelined_ms(lambda: pinned(x, *ws), n, sync)
    r["host_sync_ms"] = _synced_ms(lambda: pinned(x, *ws), n, sync)
    rot = itertools.cycle([x, *(x + k for k in range(1, 4))])  # 4 arrays: not all in cache
    r["fresh_ms"] = _pipelined_ms(lambda: pinned(next(rot), *ws), n, sync)
    r["graph_calls"] = (st.graph_calls - g0) if st is not None else 0
    r["host_calls"] = 3 * (n * 5 + 3)
    if st is not None:  # the same-run A/B of the streaming copy: the cached copy instead
        least = r["stream_min"] = st.stream_min
        st.stream_min = 1 << 62
        st.memo[0] = None
        try:
            pinned(x, *ws)
            r["cached_ms"] = _pipelined_ms(lambda: pinned(x, *ws), n, sync)
        finally:
            st.stream_min = least
            st.memo[0] = None
    if graphs:
        st.use_graphs = False
        try:
            r["calls_ms"] = _pipelined_ms(lambda: pinned(x, *ws), n, sync)
        finally:
            st.use_graphs = True
    r["graph_error"] = st.graph_error if st is not None else "no stager"
    r["plain_ms"] = _pipelined_ms(lambda: plain(x, *ws), n, sync)
    # x in a pinned_empty array (filled once): DMA'd where it is, each call waits for its DMA
    r["pinned_same"], r["pinned_x_ms"] = False, float("nan")
    try:  # (a failure here must not cost the sweep's other numbers)
        from kinac.rt.cuda.pinned import pinned_empty

        buf = pinned_empty(x.shape, x.dtype)
        buf[...] = x
        got = torch.from_dlpack(pinned(buf, *ws)).cpu().numpy()
        r["pinned_same"] = bool(np.array_equal(got, want))
        r["pinned_x_ms"] = _pipelined_ms(lambda: pinned(buf, *ws), n, sync)
    except Exception as e:  # noqa: BLE001 - reported in the row
        r["pinned_error"] = f"{type(e).__name__}: {e}"
    blk = PinnedBuffer(default_pool(), x.shape, x.dtype)
    copier = default_copier()
    r["memcpy_us"] = _host_us(lambda: copier(blk.array, x), n)
    r["memcpy_one_us"] = _host_us(lambda: np.copyto(blk.array, x), n)  # one thread
    blk.free()
    if wc is not None:  # the same, its staging blocks write-combined (KINAC_STAGING_WC=1)
        os.environ["KINAC_STAGING_WC"] = "1"
        try:
            wc(x, *ws)  # (its stager is made now: its blocks from the write-combined pool)
        finally:
            del os.environ["KINAC_STAGING_WC"]
        r["wc_ms"] = _pipelined_ms(lambda: wc(x, *ws), n, sync)
        from kinac.rt.cuda.pinned import write_combined_pool

        wblk = PinnedBuffer(write_combined_pool(), x.shape, x.dtype)
        r["memcpy_wc_us"] = _host_us(lambda: copier(wblk.array, x), n)
        wblk.free()
    r["dma_ms"] = _copy_ms(torch, x.nbytes)
    r["copy_ms"] = r["memcpy_us"] / 1e3 + r["dma_ms"]
    r["shorter"] = r["copy_ms"] < r["dev_ms"]
    r["ratio"] = r["host_ms"] / r["dev_ms"]
    r["met"] = r["ratio"] <= GOAL if r["shorter"] else None
    r["pinned_ratio"] = r["pinned_x_ms"] / r["dev_ms"]  # its copy is the DMA alone
    applies = r["dma_ms"] < r["dev_ms"] and "pinned_error" not in r
    r["pinned_met"] = r["pinned_ratio"] <= GOAL if applies else None
    return r


def sweep(quick: bool) -> list[dict[str, Any]]:
    """Every size's numbers (one compiled MLP for all: a specialisation per shape)."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        pinned, plain = _mlp_fns(Path(tmp))
        wc, _ = _mlp_fns(Path(tmp))  # a third compiled MLP: its stagers write-combined
        for size in SWEEP:
            t0 = time.perf_counter()
            r = measure(pinned, plain, size, quick, wc)
            r["wall_s"] = time.perf_counter() - t0
            print(f"sweep {r['mib']:g} MiB: " + ", ".join(f"{k}={v}" for k, v in r.items()))
            out.append(r)
    return out


def sweep_table(res: list[dict[str, Any]]) -> str:
    """The compact table: one line per size."""
    head = (
        "| x MiB | MLP [B,S,D] F | compute (device x) ms | memcpy us (one thread) + DMA us "
        "| copy < compute "
        "| host x pipelined: graphs (streaming copy from L2/3) / cached copy / driver calls "
        "/ pinned=False | 4 x in rotation "
        "| write-combined blocks: host x, memcpy us "
        f"| host x synced | goal <= {GOAL}x | graph calls "
        f"| x in a pinned_empty array (DMA'd in place): ratio, goal (DMA < compute) |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for r in res:
        b, s, d, f = r["shape"]
        calls = f"{r['calls_ms'] / r['dev_ms']:.2f}x" if "calls_ms" in r else "-"
        cached = f"{r['cached_ms'] / r['dev_ms']:.2f}x" if "cached_ms" in r else "-"
        wc = (f"{r['wc_ms'] / r['dev_ms']:.2f}x, {r['memcpy_wc_us']:.1f}" if "wc_ms" in r
              else "-")  # fmt: skip
        met = "n/a" if r["met"] is None else ("**yes**" if r["met"] else "NO")
        pm = r.get("pinned_met")
        pmet = "n/a" if pm is None else ("**yes**" if pm else "NO")
        if "pinned_error" in r:
            pmet = f"error: {r['pinned_error'][:80]}"
        gc = f"{r['graph_calls']} of {r['host_calls']}"
        if r["graph_error"]:
            gc += f" ({r['graph_error']})"
        lines.append(
            f"| {r['mib']:g} | [{b},{s},{d}] {f} | {r['dev_ms']:.3f} (synced "
            f"{r['dev_sync_ms']:.3f}) | {r['memcpy_us']:.1f} ({r['memcpy_one_us']:.1f}) + "
            f"{r['dma_ms'] * 1e3:.1f} "
            f"| {r['shorter']} | {r['ratio']:.2f}x ({r['host_ms']:.3f} ms) / {cached} / {calls} / "
            f"{r['plain_ms'] / r['dev_ms']:.2f}x | {r['fresh_ms'] / r['dev_ms']:.2f}x "
            f"| {wc} "
            f"| {r['host_sync_ms'] / r['dev_sync_ms']:.2f}x "
            f"| {met} | {gc} "
            f"| {r['pinned_ratio']:.2f}x (same: {r['pinned_same']}), {pmet} |"
        )
    return head + "\n".join(lines) + "\n"


def sweep_rows(res: list[dict[str, Any]]) -> list[Row]:
    """The bench's rows (one per size: the goal's, where it applies)."""
    rows = []
    for r in res:
        b, s, d, f = r["shape"]
        what = (f"sweep: MLP [{b},{s},{d}] f32 hidden {f}, x {r['mib']:g} MiB from numpy each "
                f"call, graphs, pipelined (same result: {r['same']}; copy {r['copy_ms']:.3f} ms "
                f"< compute: {r['shorter']})")  # fmt: skip
        goal = f"<= {GOAL}x" if r["shorter"] else "info"
        rows.append(row(what, r["host_ms"], "ms", r["dev_ms"], "device x, pipelined", goal, None))
        if "pinned_error" in r:
            continue
        what = (f"sweep: MLP [{b},{s},{d}] f32 hidden {f}, x {r['mib']:g} MiB in a pinned_empty "
                f"array (DMA'd in place, waited), pipelined (same result: {r['pinned_same']}; "
                f"DMA {r['dma_ms']:.3f} ms < compute: {r['dma_ms'] < r['dev_ms']})")  # fmt: skip
        goal = f"<= {GOAL}x" if r["dma_ms"] < r["dev_ms"] else "info"
        rows.append(row(what, r["pinned_x_ms"], "ms", r["dev_ms"], "device x, pipelined", goal,
                        None))  # fmt: skip
    return rows
