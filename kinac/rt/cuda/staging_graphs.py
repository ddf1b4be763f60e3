"""A staged host-input call as two CUDA graph launches and no host wait (issue 17 item 3).

Why: the H200 measured a steady-state host-input call of a small MLP (0.5 MiB ``x``) at 38 us
against 29 us for a device ``x``: the host is the limit, and besides the 13.6 us ``memcpy``
into the pinned block the call made 7 driver calls, each ~0.5-2 us through ctypes:

====  =================================  ========================================
 1    ``cuEventSynchronize`` (CDLL)      host: the turn's pinned block is read out
 2    ``cuStreamWaitEvent`` (copy)       device: the turn's device slot is read out
 3    ``cuMemcpyHtoDAsync`` per input    the DMA
 4    ``cuEventRecord`` (copy)           *copied*
 5    ``cuStreamWaitEvent`` (compute)    the compute waits for *copied*
 6    ``cuGraphLaunch``                  the compute
 7    ``cuEventRecord`` (compute)        *consumed*
====  =================================  ========================================

Here calls 2-4 are one graph per turn (the **copy graph**: an event-wait node on *consumed*,
one memcpy node per host input from the turn's pinned block into its device slot, an
event-record node for *copied*), and calls 5-7 one graph per captured compute graph (the
**compute wrapper**: an event-wait node on *copied*, the captured graph as a child node, an
event-record node for *consumed*). Call 1 becomes a read of host memory: the copy graph also
copies a device word holding 1 into a pinned *flag* of the turn after its DMAs (the host
clears it before each launch), so a set flag says the turn's pinned block is free without
asking the driver; only when it is not set yet does the host wait, on a *done* event the
graph records after the flag's copy (so the flag's write has landed before the host clears it
again). Per call: two ``cuGraphLaunch`` and no other driver call.

A graph that cannot be built (a driver without event nodes, a captured graph a child node
refuses: memory alloc/free nodes) leaves that call on the driver-call path, and
:attr:`Graphs.error` says why. A caller's pinned array (``pinned_empty``, ``pin_memory()``) is
DMA'd from where it is by a copy graph of its own (:func:`direct_copy`) without the flag's copy
and *done*: the call waits for *copied* before it returns (the caller may refill the array
then), which the H200 measured 6.5 us a call faster at 0.5 MiB than waiting for *done*
(2026-12-02c round 3; ``stager.direct_flag``). Round 3 also measured, and left off by default,
the DMA cut into pieces on parallel branches (``stager.dma_pieces``: slower) and the numpy copy
graph without its flag (``stager.copy_flag``: the host queries *copied* instead; even).

The builder is :class:`Graphs`: libcuda's graph API through ``ctypes`` (the bindings' struct
wrappers differ between cuda-python versions; the C ABI does not). Tests give the stager a
fake of it that runs the nodes over the fake driver's log.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kinac.rt.cuda import driver
from kinac.rt.cuda.pinned import HANDED, PinnedBuffer, default_pool, handed_out, torch_pinned
from kinac.rt.cuda.staging import DMA_PIECE_MIN, FLAG_STRIDE, SLOTS

if TYPE_CHECKING:
    from kinac.rt.cuda.staging import HostStager, Param

HOST, DEVICE = 1, 2  # CUmemorytype


class CUDA_MEMCPY3D(ctypes.Structure):  # noqa: N801 - cuda.h's name
    """cuda.h's ``CUDA_MEMCPY3D`` (one 1D copy: width in bytes, height and depth 1)."""

    _fields_ = [
        ("srcXInBytes", ctypes.c_size_t), ("srcY", ctypes.c_size_t), ("srcZ", ctypes.c_size_t),
        ("srcLOD", ctypes.c_size_t), ("srcMemoryType", ctypes.c_int),
        ("srcHost", ctypes.c_void_p), ("srcDevice", ctypes.c_uint64),
        ("srcArray", ctypes.c_void_p), ("reserved0", ctypes.c_void_p),
        ("srcPitch", ctypes.c_size_t), ("srcHeight", ctypes.c_size_t),
        ("dstXInBytes", ctypes.c_size_t), ("dstY", ctypes.c_size_t), ("dstZ", ctypes.c_size_t),
        ("dstLOD", ctypes.c_size_t), ("dstMemoryType", ctypes.c_int),
        ("dstHost", ctypes.c_void_p), ("dstDevice", ctypes.c_uint64),
        ("dstArray", ctypes.c_void_p), ("reserved1", ctypes.c_void_p),
        ("dstPitch", ctypes.c_size_t), ("dstHeight", ctypes.c_size_t),
        ("WidthInBytes", ctypes.c_size_t), ("Height", ctypes.c_size_t),
        ("Depth", ctypes.c_size_t),
    ]  # fmt: skip


def memcpy_params(dst: int, dst_host: bool, src: int, src_host: bool, n: int) -> CUDA_MEMCPY3D:
    """A 1D copy of ``n`` bytes, each side host (pinned) or device memory."""
    p = CUDA_MEMCPY3D()
    p.srcMemoryType = HOST if src_host else DEVICE
    if src_host:
        p.srcHost = src
    else:
        p.srcDevice = src
    p.dstMemoryType = HOST if dst_host else DEVICE
    if dst_host:
        p.dstHost = dst
    else:
        p.dstDevice = dst
    p.srcPitch = p.dstPitch = p.WidthInBytes = n
    p.srcHeight = p.dstHeight = p.Height = p.Depth = 1
    return p


class BuildError(Exception):
    """A graph the driver would not build (the call keeps the driver-call path)."""


class Graphs:
    """libcuda's graph building calls through ``ctypes.PyDLL``: ``create``, the node adders
    (each takes the graph, the nodes it depends on and its operand, returns the node),
    ``instantiate`` (graph -> executable), ``destroy``; ``launch`` is ``cuGraphLaunch``
    taking ``(exec, stream)`` as ``c_void_p`` and returning the CUresult as an int."""

    def __init__(self) -> None:
        vp, P = ctypes.c_void_p, ctypes.POINTER
        lib = driver.libcuda(ctypes.PyDLL)
        node = [P(vp), vp, P(vp), ctypes.c_size_t]  # (node out, graph, deps, n deps)
        sigs: dict[str, list[Any]] = {
            "cuGraphCreate": [P(vp), ctypes.c_uint],
            "cuGraphAddEventWaitNode": [*node, vp],
            "cuGraphAddEventRecordNode": [*node, vp],
            "cuGraphAddMemcpyNode": [*node, P(CUDA_MEMCPY3D), vp],
            "cuGraphAddChildGraphNode": [*node, vp],
            "cuGraphInstantiateWithFlags": [P(vp), vp, ctypes.c_ulonglong],
            "cuGraphDestroy": [vp],
            "cuGraphExecDestroy": [vp],
            "cuCtxGetCurrent": [P(vp)],
            "cuGraphLaunch": [vp, vp],
        }
        self._f: dict[str, Any] = {}
        for name, args in sigs.items():
            f = lib[name]  # our own function objects (lib.name is shared)
            f.restype = ctypes.c_int
            f.argtypes = args
            self._f[name] = f
        self.launch = self._f["cuGraphLaunch"]

    def _call(self, name: str, *args: Any) -> None:
        rc = self._f[name](*args)
        if rc:
            raise BuildError(f"{name} failed with CUresult {rc}")

    def create(self) -> int:
        g = ctypes.c_void_p()
        self._call("cuGraphCreate", ctypes.byref(g), 0)
        return int(g.value or 0)

    def _node(self, name: str, g: int, deps: Sequence[int], *arg: Any) -> int:
        out = ctypes.c_void_p()
        arr = (ctypes.c_void_p * max(1, len(deps)))(*deps)
        self._call(name, ctypes.byref(out), ctypes.c_void_p(g), arr, len(deps), *arg)
        return int(out.value or 0)

    def wait(self, g: int, deps: Sequence[int], event: int) -> int:
        return self._node("cuGraphAddEventWaitNode", g, deps, ctypes.c_void_p(event))

    def record(self, g: int, deps: Sequence[int], event: int) -> int:
        return self._node("cuGraphAddEventRecordNode", g, deps, ctypes.c_void_p(event))

    def memcpy(self, g: int, deps: Sequence[int], params: CUDA_MEMCPY3D) -> int:
        ctx = ctypes.c_void_p()
        self._call("cuCtxGetCurrent", ctypes.byref(ctx))
        return self._node("cuGraphAddMemcpyNode", g, deps, ctypes.byref(params), ctx)

    def child(self, g: int, deps: Sequence[int], captured: Any) -> int:
        """A node running a clone of ``captured``'s (a :class:`CapturedGraph`) graph."""
        handle = getattr(captured, "_graph", None)
        if handle is None:
            raise BuildError("the compute graph was not captured")
        return self._node("cuGraphAddChildGraphNode", g, deps, ctypes.c_void_p(int(handle)))

    def instantiate(self, g: int) -> Any:
        """The executable graph, as the argument :attr:`launch` takes."""
        ex = ctypes.c_void_p()
        self._call("cuGraphInstantiateWithFlags", ctypes.byref(ex), ctypes.c_void_p(g), 0)
        return ex

    def destroy(self, g: int, ex: Any) -> None:
        if ex is not None and ex.value:
            self._f["cuGraphExecDestroy"](ex)
        if g:
            self._f["cuGraphDestroy"](ctypes.c_void_p(g))


def native_graphs() -> Graphs | None:
    """The builder when the driver is cuda-python's module and libcuda opens through ctypes
    with every function it needs; None otherwise (the tests' fake drivers: calls path)."""
    import types

    if not isinstance(driver.api(), types.ModuleType):
        return None
    try:
        return Graphs()
    except (OSError, AttributeError):
        return None


class Built:
    """One executable graph: what :meth:`launch` takes, and the handles to destroy."""

    __slots__ = ("launch", "exec", "graph", "flag", "alive")

    def __init__(self, launch: Any, ex: Any, graph: int, flag: bool = False) -> None:
        self.launch, self.exec, self.graph = launch, ex, graph
        self.flag = flag  # (a copy graph) it sets the turn's flag and records *done*
        self.alive = True  # False once destroyed (a record of it is never launched again)


def pieces_of(
    pairs: Sequence[tuple[int, int, int]], pieces: int, least: int = DMA_PIECE_MIN
) -> list[tuple[int, int, int]]:
    """``pairs`` (device, host, bytes) with each copy cut into up to ``pieces`` pieces of at
    least ``least`` bytes, cut at 4 KiB (the last piece takes the rest)."""
    out: list[tuple[int, int, int]] = []
    for d, h, n in pairs:
        k = max(1, min(pieces, n // max(1, least)))
        step = (-(-n // k) + 4095) // 4096 * 4096 if k > 1 else n
        out += [(d + o, h + o, min(step, n - o)) for o in range(0, n, step)] if n else [(d, h, n)]
    return out


def build_copy(
    api: Any,
    pairs: Sequence[tuple[int, int, int]],
    flag: int,
    one: int,
    events: Any,
    pieces: int = 1,
) -> Built:
    """The copy graph of a turn: wait for *consumed*, memcpy nodes for each ``(device slot,
    pinned block, bytes)`` of ``pairs`` (``pieces`` per copy on parallel branches: the driver
    may give them more than one copy engine), record *copied*; after the copies, where
    ``flag`` is an address, the flag's copy (from device word ``one`` into pinned ``flag``) and
    *done* (``flag`` 0: neither; the host asks about *copied* instead). ``events``: the
    turn's ``(consumed, copied, done)`` handles."""
    consumed, copied, done = events
    g = api.create()
    try:
        w = api.wait(g, [], consumed)
        cps = [
            api.memcpy(g, [w], memcpy_params(d, False, h, True, n))
            for d, h, n in pieces_of(pairs, pieces)
        ]
        api.record(g, cps, copied)
        if flag:
            f = api.memcpy(g, cps, memcpy_params(flag, True, one, False, 4))
            api.record(g, [f], done)
        return Built(api.launch, api.instantiate(g), g, bool(flag))
    except BaseException:
        api.destroy(g, None)
        raise


def build_compute(api: Any, captured: Any, copied: int, consumed: int) -> Built:
    """The compute wrapper: wait for *copied*, ``captured`` as a child graph, record
    *consumed*."""
    g = api.create()
    try:
        w = api.wait(g, [], copied)
        c = api.child(g, [w], captured)
        api.record(g, [c], consumed)
        return Built(api.launch, api.instantiate(g), g)
    except BaseException:
        api.destroy(g, None)
        raise


# ---- the stager's graphs ------------------------------------------------------------------------
def pair(st: HostStager, j: int, host: tuple[tuple[int, Param], ...], captured: Any) -> Any:
    """``(copy graph, compute wrapper)`` of turn ``j`` for the host params ``host`` and the
    captured compute graph ``captured`` (built at their first use), or None where one could
    not be built (``st.graph_error`` says why; that call uses driver calls)."""
    t, api = st.turns[j], st.graphs
    pieces, with_flag = st.dma_pieces, st.copy_flag
    key = (j, tuple([i for i, _ in host]), pieces, with_flag)
    cp = st._copy_built.get(key, False)
    if cp is False:
        cp = None
        if _flags_ready(st):
            pairs = [(p.dev[j], st.block(p, j).ptr, p.nbytes) for _, p in host]
            flag = st._flag_ptr + 4 * j * FLAG_STRIDE if with_flag else 0
            events = (t.consumed.handle, t.copied.handle, t.done.handle)
            cp = _built(st, lambda: build_copy(api, pairs, flag, st._one, events, pieces))
        st._copy_built[key] = cp
    if cp is None:
        return None
    ck = (id(captured), j)
    hit = st._compute_built.get(ck)
    if hit is None or hit[0] is not captured:
        if len(st._compute_built) >= 16:  # graphs the entry dropped since: ours go too
            _drop_compute(st)
        cw = _built(st, lambda: build_compute(api, captured, t.copied.handle, t.consumed.handle))
        st._compute_built[ck] = hit = (captured, cw)
    return (cp, hit[1]) if hit[1] is not None else None


def plan(st: HostStager, host: tuple[tuple[int, Param], ...], j: int, captured: Any) -> tuple:
    """What the steady state needs for turn ``j`` and compute graph ``captured``:
    ``(captured, copy graph, compute wrapper, fills)`` (the graphs None where they could not
    be built), each fill ``(position, param, copy function, pinned block's array, j)``: a plain
    ``numpy.copyto`` below the copier's threshold (the dtype and shape were checked: no cast),
    the streaming-store copy (:mod:`~kinac.rt.cuda.staging_nt`) from ``st.stream_min`` bytes.
    """

    pr = pair(st, j, host, captured)
    if pr is None:
        return (captured, None, None, ())
    fills = []
    for i, p in host:
        blk = st.block(p, j).array
        fn: Any = st.copier if p.nbytes >= st.copier.min_bytes else raw_copyto()
        if p.nbytes >= st.stream_min:  # streaming stores (staging_nt), where they can be made
            from kinac.rt.cuda.staging_nt import raw_copy, stream_copier

            threads = bool(getattr(st.copier, "workers", False))  # (tests' copiers: none)
            if fn is st.copier and threads:  # big: split across the threads too
                raw = raw_copy(st.stream_width)
                if raw is not None:
                    fn = st.copier.streaming(raw, st)
            else:
                fn = stream_copier(blk, st, st.stream_width) or fn
        fills.append((i, p, fn, blk, j))
    return (captured, pr[0], pr[1], tuple(fills))


def raw_copyto() -> Any:
    """``numpy.copyto`` without its ``__array_function__`` dispatcher (the plan's copies are of
    plain ndarrays, checked by the caller: the same C function, ~0.15 us a call less), or
    ``numpy.copyto`` where this numpy keeps it elsewhere."""
    import numpy as np

    try:
        from numpy._core import _multiarray_umath as mu  # type: ignore[attr-defined]  # numpy 2
    except ImportError:  # numpy 1
        try:
            from numpy.core import _multiarray_umath as mu  # type: ignore[no-redef]
        except ImportError:
            return np.copyto
    fn = getattr(mu, "copyto", None)
    return fn if callable(fn) else np.copyto


def fill(
    st: HostStager, fills: tuple[Any, ...], arrays: tuple[Any, ...], nd: Any
) -> tuple[int, ...] | None:
    """Copy each host argument into the turn's pinned block, except a caller's pinned array (a
    ``pinned_empty`` array, a ``pin_memory()`` tensor), DMA'd from where it is. None when every
    argument went to its block (the plan's copy graph reads them); else each argument's
    source address (the caller's, or the block's), for :func:`direct_copy`."""
    handed, least = HANDED, st.direct_min
    direct: list[int] | None = None
    for k, (i, p, fn, dst, j) in enumerate(fills):
        a = arrays[i]
        src = 0
        if type(a) is nd:
            if handed and p.nbytes >= least:
                src = handed_out(a)[0]
            if not src:
                fn(dst, a)
        elif p.nbytes >= least and torch_pinned(a, st.pin_cache):
            src = a.data_ptr()
        else:
            st.fill_torch(p, a, j)
        if src:
            if direct is None:
                direct = [f[1].host[f[4]].ptr for f in fills]
            direct[k] = src
    return None if direct is None else tuple(direct)


def direct_copy(
    st: HostStager, j: int, host: tuple[tuple[int, Param], ...], srcs: tuple[int, ...]
) -> Built | None:
    """The copy graph of turn ``j`` reading ``srcs`` (a caller's pinned arrays among them: the
    same arrays are passed again and again, as a data loader refills its buffer), built at
    their first use; at most 8 kept."""
    pieces, with_flag = st.dma_pieces, st.direct_flag
    key = (j, tuple([i for i, _ in host]), srcs, pieces, with_flag)
    cp = st._direct_built.get(key, False)
    if cp is False:
        if len(st._direct_built) >= 8:
            gone = {id(b) for b in st._direct_built.values() if b is not None}
            _destroy(st, gone)
            st._direct_built.clear()
        t = st.turns[j]
        pairs = [(p.dev[j], src, p.nbytes) for (_, p), src in zip(host, srcs, strict=True)]
        flag = st._flag_ptr + 4 * j * FLAG_STRIDE if with_flag else 0
        events = (t.consumed.handle, t.copied.handle, t.done.handle)
        cp = _built(st, lambda: build_copy(st.graphs, pairs, flag, st._one, events, pieces))
        st._direct_built[key] = cp
    return cp


def _built(st: HostStager, build: Callable[[], Built]) -> Built | None:
    try:
        b = build()
    except (BuildError, ctypes.ArgumentError, OSError, AttributeError, TypeError) as e:
        st.graph_error = f"{type(e).__name__}: {e}"
        return None
    st._extra.append((st.graphs, b))
    return b


def _drop_compute(st: HostStager) -> None:
    """Destroy every compute wrapper (the entry dropped most of their graphs since), and the
    memo's plans that name them."""
    m = st.memo[0]
    if m is not None:
        m.plans[:] = [None] * len(m.plans)
    _destroy(st, {id(b) for _, b in st._compute_built.values() if b is not None})
    st._compute_built.clear()


def _destroy(st: HostStager, gone: set[int]) -> None:
    """Destroy the built graphs whose ids are ``gone`` (a running one is freed when it ends)."""
    for x in [x for x in st._extra if not isinstance(x, PinnedBuffer) and id(x[1]) in gone]:
        st._extra.remove(x)
        x[1].alive = False
        x[0].destroy(x[1].graph, x[1].exec)


def _flags_ready(st: HostStager) -> bool:
    """The pinned flags and their device source (made once); False if they cannot be."""
    if st.flags is None:
        import numpy as np

        from kinac.rt.cuda.errors import CudaError

        try:
            blk = PinnedBuffer(default_pool(), (SLOTS * FLAG_STRIDE,), np.uint32)  # (cached)
            st._extra.append(blk)
            blk.array[...] = 0
            one = st._alloc_device(16)
            src = ctypes.c_uint32(1)
            d = driver.api()
            driver.check("cuMemcpyHtoD", d.cuMemcpyHtoD(one, ctypes.addressof(src), 4))
        except (CudaError, OSError) as e:
            st.graph_error = f"flags: {e}"
            return False
        st._one, st._flag_ptr = one, blk.ptr
        st.flags = (ctypes.c_uint32 * (SLOTS * FLAG_STRIDE)).from_address(blk.ptr)
    return True
