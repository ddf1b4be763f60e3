"""A compiled GPU entry: buffers from the pool, kernel launches and cuBLAS calls, graph replay.

:func:`load_gpu_entry` takes a :class:`~kinac.artifacts.gpu.GpuLoweredEntry` and its PTX and
returns a :class:`GpuEntry`, a callable taking one array per param:

- CUDA arrays (kinac tensors, or any DLPack producer such as a torch CUDA tensor) are used in
  place, without a copy (contiguous and 16-byte aligned; a misaligned one is copied once); the
  import of an array passed again (a weight) is reused while the array lives;
  host arrays (numpy, torch CPU) are copied in, as the ``to-device`` of a host param is:
  through page-locked slots on a copy stream that overlaps the previous call's compute
  (:mod:`~kinac.rt.cuda.staging`; ``pinned=False``: a pageable copy and a wait, as before);
- outputs are new kinac :class:`~kinac.rt.cuda.tensor.Tensor` s from the memory pool, which
  ``torch.from_dlpack`` takes without a copy; an output placed on the host (``to-host``) is
  copied back and returned as a numpy array;
- the entry's scratch arena is allocated once. The launch sequence (memset of the status
  buffer, kernels, cuBLAS calls) is bound to the call's buffer addresses and, by default,
  captured into a CUDA graph; later calls with the same addresses replay it with one driver
  call. Graphs are kept per address tuple (LRU, ``max_graphs``): weights keep their
  addresses, and the pool hands outputs the same few blocks again. An argument or output seen
  at three different addresses becomes *volatile*: the graph then reads (writes) an entry-owned
  staging buffer, and each call copies it in (out) with one device-to-device copy, so a
  caller who keeps every output, or passes fresh activations each time, still replays one
  graph.

Work runs on the legacy default stream, so it is ordered with PyTorch's default stream, on
the GPU the entry's placement names (``@cuda(N)`` params: device ``N``; device 0 by default).
"""

from __future__ import annotations

import ctypes
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from kinac.artifacts.gpu import GpuLoweredEntry, GpuStep
from kinac.errors import KinaCallError
from kinac.rt.cuda import driver, entry_hot, entry_imports
from kinac.rt.cuda.entry_support import (
    DL_NAMES,
    GATHER_OOB,
    NP_NAMES,
    VOLATILE,
    KinaGpuError,
    Seq,
    array_nbytes,
    is_dense,
    placement,
    profile_steps,
)
from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Allocation, Tensor, contiguous_strides


class GpuEntry:
    """A compiled entry on the GPU: ``entry(*arrays)`` returns its output(s)."""

    # set by _setup; class defaults for entries tests build without a driver
    _ctx_get: Any = None
    _ctx_cur: Any = None
    _ctx_ref: Any = None
    _ctx_mine = 0
    hot_calls = 0
    _replays = 0  # replays that were not hot calls (every hot call is one: replays counts both)
    _spares: list[Any] | None = None  # entry_hot.Spares per output, made at the first call
    _kept: list[list[Tensor]] | None = None  # entry_hot.outputs: returned outputs, reused
    _hot_keys: dict[tuple[int, ...], None] | None = None  # entry_hot.hot_key: never evicted
    _deferred: Any = None  # entry_checks.DeferredStatus while checks are deferred
    _sync_fn: Any = None  # cuStreamSynchronize through PyDLL, made by the first synchronize()
    pdl = False  # programmatic dependent launch (set by __init__)
    split_grouped: bool | str = False
    # params the entry's kernels overwrite in place (a fused optimizer step): every call runs
    # through entry_into.call_into, whose first call at new addresses is the warm-up
    updates_inputs: tuple[int, ...] = ()

    def __init__(
        self,
        lowered: GpuLoweredEntry,
        ptx: str,
        *,
        graphs: bool = True,
        allow_tf32: bool = False,
        resource: Any = None,
        max_graphs: int = 8,
        pinned: bool = True,
        pdl: bool | None = None,
        split_grouped: bool | str = False,
    ) -> None:
        from kinac.rt import cuda

        self.lowered = lowered
        # programmatic dependent launch for the captured launches of kinac's own kernels
        # (docs/gpu.md "Latency of a small call"); None: KINAC_PDL (default_pdl)
        self.pdl = default_pdl() if pdl is None else bool(pdl)
        # grouped ``pointers`` GEMMs without a tuned choice issued as one call per member
        # (True: cublasGemmEx, "lt": cublasLtMatmul; an A/B lever of benches/latency_probe.py:
        # no pointer arrays, and no memset node if it is theirs)
        if split_grouped not in (False, True, "lt"):
            raise ValueError(f"split_grouped must be False, True or 'lt', not {split_grouped!r}")
        self.split_grouped = split_grouped
        self.pinned = pinned  # host arrays staged through pinned slots on a copy stream
        self.ordinal = placement(lowered)
        self.device = cuda.device.lookup(self.ordinal)
        pushed = self.device.enter()  # everything below belongs to the entry's GPU
        try:
            self._setup(ptx, graphs, allow_tf32, resource, max_graphs)
        finally:
            self.device.leave(pushed)

    def _setup(
        self, ptx: str, graphs: bool, allow_tf32: bool, resource: Any, max_graphs: int
    ) -> None:
        from kinac.rt import cuda

        lowered = self.lowered
        from kinac.rt.cuda.module import load_entry_module

        self.module, self.kernels = load_entry_module(ptx, lowered.name, lowered.functions)
        if resource is None:
            resource = cuda.default_resource()
        elif getattr(resource, "ordinal", self.ordinal) != self.ordinal:
            raise KinaGpuError(
                f"{lowered.name} runs on cuda:{self.ordinal}, but the memory resource given "
                f"allocates on cuda:{resource.ordinal}"
            )
        self.resource = resource
        # per output: shape, dtype, bytes, strides (computed once, not per call)
        self._out_specs = [
            (
                o.shape,
                DTYPES[DL_NAMES[o.dtype]],
                array_nbytes(o.dtype, o.shape),
                contiguous_strides(o.shape),
            )
            for o in lowered.outputs
        ]
        host = [d == "cpu" for d in lowered.output_devices]
        self._host_outputs = host if any(host) else []
        self.stream = cuda.Stream.null()
        self.capture_stream = cuda.Stream()
        self.use_graphs = graphs
        self.max_graphs = max_graphs
        self._allocs: list[Allocation] = []
        self.arena = self._alloc(lowered.arena_bytes)
        self.status = self._alloc(8 * lowered.status_slots) if lowered.has_status else 0
        self.blas: Any = None
        if any(s.gemm is not None for s in lowered.steps):
            from kinac.rt.cuda.blas import Blas

            self.blas = Blas(self._alloc, allow_tf32=allow_tf32)
        self._imports: dict[tuple[int, int], tuple[Any, Tensor, int | None]] = {}
        # the last call's argument ids and imports, when every argument was a remembered CUDA
        # array: the same arrays again (weights and activations reused) skip the per-argument
        # lookups. Emptied by the weakref callback of any of them, before its id can be reused.
        self._last_box: list[Any] = [None]
        npos = len(lowered.params) + len(lowered.outputs)
        self._seen: list[set[int]] = [set() for _ in range(npos)]
        self.volatile: set[int] = set()
        self._stage: dict[int, int] = {}
        self._bound: OrderedDict[tuple[int, ...], tuple[Seq, list[Seq], Any]] = OrderedDict()
        self._stager: Any = None  # staging.HostStager, made at the first host array
        self.captures = 0
        self.replays = 0  # calls run by a graph replay (metrics: graph hit rate)
        self.hot_calls = 0  # calls that took :meth:`_hot_call` (tests observe this)
        from kinac.rt.cuda.kernel_graph import libcuda_fn

        self._ctx_get = libcuda_fn("cuCtxGetCurrent")
        self._ctx_cur = ctypes.c_void_p()
        self._ctx_ref = ctypes.byref(self._ctx_cur)
        self._ctx_mine = self.device.context_handle

    # ---- memory ---------------------------------------------------------------------------
    @property
    def replays(self) -> int:
        """Calls run by a graph replay (metrics: graph hit rate): the hot calls, which count
        only themselves (one attribute write less per call), and the others."""
        return self._replays + self.hot_calls

    @replays.setter
    def replays(self, value: int) -> None:
        self._replays = value - self.hot_calls

    def _alloc(self, nbytes: int) -> int:
        a = Allocation(self.resource, max(nbytes, 16), 0)
        self._allocs.append(a)
        return a.ptr

    def _upload(self, data: bytes) -> int:
        p = self._alloc(len(data))
        buf = ctypes.create_string_buffer(data, len(data))
        d = driver.api()
        driver.check("cuMemcpyHtoD", d.cuMemcpyHtoD(p, ctypes.addressof(buf), len(data)))
        return p

    def _known(self, i: int, x: Any) -> Tensor | None:
        """The remembered import of ``x`` at position ``i`` while it is still ``x`` as imported
        (address and form: :func:`kinac.rt.cuda.entry_imports.known`)."""
        return entry_imports.known(self, i, x)

    def _input(self, x: Any, i: int) -> Tensor:
        known = self._known(i, x)
        if known is not None:
            return known
        spec = self.lowered.params[i]
        t: Tensor | None = None
        if isinstance(x, Tensor) and x.is_cuda:
            t = x
        elif (t := entry_hot.torch_import(x)) is not None:
            gap = entry_imports.storage_gap(t)  # (then checked below like any)
            if gap is not None:
                raise KinaGpuError(
                    f"{self.lowered.name}: argument `{spec.name}` has no memory to read ({gap}: "
                    "freed or shrunk in place, e.g. by untyped_storage().resize_)"
                )
        elif hasattr(x, "__dlpack_device__") and int(x.__dlpack_device__()[0]) == KDL_CUDA:
            self._check_gpu(spec.name, int(x.__dlpack_device__()[1]))  # before the export
            try:
                t = Tensor.from_dlpack(x, stream=0)
            except (BufferError, TypeError, ValueError, RuntimeError) as e:  # refused by it
                raise KinaCallError(
                    f"{self.lowered.name}: argument `{spec.name}` cannot be taken from its GPU "
                    f"({e}): pass a contiguous CUDA tensor of a Kina dtype"
                ) from None
        if t is None:  # a host array: read through kinac's DLPack consumer (bf16 too), copied in
            from kinac.rt.cuda.host_input import host_array

            a, keep = host_array(x, spec.name, self.lowered.name, spec.dtype, spec.shape)
            if self.pinned:  # copied on the copy stream, overlapping the previous call's compute
                ptr = self._staging_for().stage(i, a, spec.shape, NP_NAMES[spec.dtype])
                del keep  # the pinned block holds the data now
                return Tensor(
                    ptr, spec.shape, DL_NAMES[spec.dtype], device=(KDL_CUDA, self.ordinal)
                )
            t = Tensor.empty(spec.shape, DL_NAMES[spec.dtype], self.resource, 0)
            t.copy_from_host(a.astype(NP_NAMES[spec.dtype], copy=False))
            del keep  # the producer's memory was needed until the copy
            return t
        self._check_gpu(spec.name, t.device[1])
        if t.dtype.name != DL_NAMES[spec.dtype] or t.shape != spec.shape:
            raise KinaGpuError(
                f"{self.lowered.name}: argument `{spec.name}` is {t.dtype.name}{list(t.shape)}, "
                f"expected {DL_NAMES[spec.dtype]}{list(spec.shape)}"
            )
        if not is_dense(t):
            raise KinaGpuError(f"argument `{spec.name}` is not contiguous: pass x.contiguous()")
        if t.ptr % 16:
            return t.clone(self.resource)
        if t is not x:
            self._remember(i, x, t)
        return t

    def _staging_for(self) -> Any:
        if self._stager is None:
            from kinac.rt.cuda.staging import HostStager

            self._stager = HostStager(self._alloc)
        return self._stager

    def _check_gpu(self, name: str, ordinal: int) -> None:
        if ordinal != self.ordinal:
            raise KinaGpuError(
                f"{self.lowered.name}: argument `{name}` is on cuda:{ordinal}, but the entry "
                f"runs on cuda:{self.ordinal}: move it there first"
            )

    def _remember(self, i: int, x: Any, t: Tensor) -> None:
        """Reuse the import of a CUDA array passed again (weights, most often) until it dies."""
        entry_imports.remember(self, i, x, t)

    # ---- binding and running ------------------------------------------------------------------
    def _key(self, ptrs: tuple[int, ...]) -> tuple[int, ...]:
        """The binding key: addresses, with 0 for *volatile* positions (an array seen at
        ``VOLATILE`` different addresses), which the graph reads from (or writes to) a staging
        buffer of the entry instead, copied in before (out after) each replay."""
        key = []
        for pos, p in enumerate(ptrs):
            seen = self._seen[pos]
            if pos not in self.volatile and p not in seen:
                seen.add(p)
                if len(seen) >= VOLATILE:
                    self.volatile.add(pos)
            key.append(0 if pos in self.volatile else p)
        return tuple(key)

    def _staging(self, pos: int) -> int:
        p = self._stage.get(pos)
        if p is None:
            specs = (*self.lowered.params, *self.lowered.outputs)
            p = self._stage[pos] = self._alloc(array_nbytes(specs[pos].dtype, specs[pos].shape))
        return p

    def _bind(self, key: tuple[int, ...]) -> tuple[Seq, list[Seq]]:
        """The launch sequence for this binding key (and one closure per step)."""
        lw = self.lowered
        names: dict[str, int] = {"status": self.status}
        labels = [f"param{i}" for i in range(len(lw.params))]
        labels += [f"out{j}" for j in range(len(lw.outputs))]
        for pos, (label, p) in enumerate(zip(labels, key, strict=True)):
            names[label] = p if p else self._staging(pos)

        def ptr(name: str) -> int:
            if name.startswith("arena+"):
                return self.arena + int(name[6:])
            return names[name]

        steps = [self._bind_step(s, ptr) for s in lw.steps]
        d = driver.api()
        status, nstat = self.status, 8 * lw.status_slots

        def sequence(stream: Any) -> None:
            if status:
                driver.check("cuMemsetD8Async", d.cuMemsetD8Async(status, 0, nstat, stream.cu))
            for run in steps:
                run(stream)

        return sequence, steps

    def _bind_step(self, s: GpuStep, ptr: Callable[[str], int]) -> Seq:
        if s.gemm is not None:
            g = s.gemm
            if (
                self.split_grouped
                and g.mode == "pointers"
                and not g.epilogue
                and (g.algo is None or g.algo.how == "today")
            ):
                return self._bind_split(g, ptr)
            call = self.blas.bind(g, ptr, self._upload)
            return lambda stream: call(stream.handle)
        launches = []
        # captured sequences launch with cuLaunchKernel (their eager runs are the warm-up and
        # the fallback), or with cuLaunchKernelEx and programmatic dependent launch for the
        # kernels whose PTX waits first (pdl); uncaptured ones replay a one-kernel graph per
        # launch (module.py)
        path = "bindings" if self.use_graphs else "graph"
        for ln in s.launches:
            k = self.kernels[ln.function]
            args = tuple(ptr(a) for a in ln.args)
            if ln.shared > DEFAULT_SHARED:
                allow_shared(k, ln.shared)
            grid = (ln.grid, *ln.grid_yz)
            how = "pdl" if self.pdl and self.use_graphs and getattr(k, "waits", False) else path
            launches.append(k.prepare(("ptr",) * len(args), grid, ln.block, ln.shared, args, how))

        def run(stream: Any) -> None:
            for launch in launches:
                launch.run(stream)

        return run

    def _bind_split(self, g: Any, ptr: Callable[[str], int]) -> Seq:
        """A grouped ``pointers`` GEMM as one call per member: classic ``cublasGemmEx``
        (``split_grouped=True``), or ``cublasLtMatmul`` with cuBLASLt's first heuristic
        algorithm (``split_grouped="lt"``; classic where cuBLASLt finds none)."""
        from dataclasses import replace

        from kinac.artifacts.gemm_algo import GemmAlgo
        from kinac.rt.cuda.blas import members

        if self.split_grouped == "lt":
            calls = []
            for m in members(g):
                try:
                    calls.append(self.blas._bind_lt(m, ptr))
                except Exception:  # noqa: BLE001 - no cuBLASLt algorithm: classic cuBLAS
                    calls.append(self.blas.bind_today(m, ptr, self._upload))

            def split(stream: Any) -> None:
                for c in calls:
                    c(stream.handle)

            return split
        call = self.blas.bind(replace(g, algo=GemmAlgo("split")), ptr, self._upload)
        return lambda stream: call(stream.handle)

    def _runner(self, ptrs: tuple[int, ...]) -> Seq:
        hit = self._bound.get(ptrs)
        if hit is None:
            seq, steps = self._bind(ptrs)
            graph = None
            if self.use_graphs:
                from kinac.rt.cuda.graph import capture

                seq(self.stream)  # warm up: library initialisation must not happen under capture
                self.stream.synchronize()
                graph = capture(seq, self.capture_stream, name=self.lowered.name)
                self.captures += 1
            hit = (seq, steps, graph)
            self._bound[ptrs] = hit
            hot = self._hot_keys or {}
            while len(self._bound) > self.max_graphs:
                # the least recently used, passing over the hot calls' graphs (they skip the
                # LRU's move_to_end: entry_hot.hot_key) unless only they are left; never this one
                old_key = next((k for k in self._bound if k not in hot and k != ptrs), None)
                if old_key is None:
                    old_key = next(k for k in self._bound if k != ptrs)
                _, _, old = self._bound.pop(old_key)
                if old is not None:
                    old.close()
        else:
            self._bound.move_to_end(ptrs)
        seq, _, graph = hit
        if graph is None:
            return seq
        self.replays += graph.captured  # an eager fallback is no replay
        return graph.replay

    def prepare(self, *arrays: Any) -> tuple[list[Tensor], list[Tensor], tuple[int, ...]]:
        lw = self.lowered
        if len(arrays) != len(lw.params):
            names = ", ".join(p.name for p in lw.params)
            raise KinaGpuError(
                f"{lw.name} takes {len(lw.params)} arrays ({names}), got {len(arrays)}"
            )
        stager = self._stager
        if stager is not None and stager._pending:  # a prepare whose run was never reported
            stager.after_run(self.stream)
        ids = tuple(map(id, arrays))
        last = self._last_box[0]
        if (
            last is not None
            and last[0] == ids
            and (last[3] is None or tuple(map(last[3], arrays)) == last[4])
            and entry_hot.same_versions(last, arrays)
        ):  # the same arrays as the last call, at the same addresses, of the same forms
            ins = last[1]
        else:
            ins = []
            hits = 0
            imports = self._imports
            # every array's address at once when they are of one type with a data_ptr (torch
            # tensors): the per-array check of _known, in one C-level map
            kinds = set(map(type, arrays))
            dp = getattr(next(iter(kinds)), "data_ptr", None) if len(kinds) == 1 else None
            dps = entry_hot.addresses(dp, arrays) if dp is not None else None
            for i, a in enumerate(arrays):  # a CUDA array passed before (weights): its import
                hit = imports.get((i, id(a)))
                if hit is None:
                    t = None
                elif (  # (the usual case inline: the same object, address and version)
                    dps is not None
                    and hit[0]() is a
                    and dps[i] == hit[1].ptr
                    and getattr(a, "_version", None) == hit[2]
                ):
                    t = hit[1]
                else:  # a moved, reshaped or written tensor, or no data_ptr to read at once
                    t = entry_imports.known(self, i, a, dps[i] if dps is not None else None)
                if t is not None:
                    ins.append(t)
                    hits += 1
                else:  # (a moved or reshaped one is forgotten there, imported again)
                    ins.append(self._input(a, i))
            self._last_box[0] = entry_hot.memo(arrays, ids, ins) if hits == len(arrays) else None
        stager = self._stager
        if stager is not None and stager._pending:  # the compute waits, on the device, for copies
            stager.before_run(self.stream)
        outs = self._outputs()
        ptrs = tuple([t.ptr for t in ins] + [t.ptr for t in outs])
        return ins, outs, ptrs

    def __call__(self, *arrays: Any, out: Any = None) -> Any:
        """The entry's output(s) on ``arrays``; with ``out=`` (one CUDA array per output) the
        outputs are written into the caller's buffers, in place over an input where that is
        safe (:mod:`kinac.rt.cuda.entry_into`), and that tuple is returned."""
        if out is not None or self.updates_inputs:
            from kinac.rt.cuda.entry_into import call_into

            return call_into(self, arrays, () if out is None else out)
        # the entry's GPU is current during the call, and the caller's context comes back after;
        # the usual case (it is current already) costs one PyDLL call (cuda-python's ~1 us)
        get = self._ctx_get
        if get is not None and not get(self._ctx_ref) and self._ctx_cur.value == self._ctx_mine:
            return self._call(arrays)
        pushed = self.device.enter()
        try:
            return self._call(arrays)
        finally:
            self.device.leave(pushed)

    def _call(self, arrays: tuple[Any, ...]) -> Any:
        hot = self._hot_call(arrays)
        if hot is not None:
            return hot
        if self._deferred is not None:
            self._status_before_run()
        ins, outs, ptrs = self.prepare(*arrays)
        # addresses bound before (and nothing staged): every one was seen at its position already
        key = ptrs if not self.volatile and ptrs in self._bound else self._key(ptrs)
        run = self._runner(key)
        if self.volatile:
            self._copy(ptrs, key, inputs=True)
        run(self.stream)
        if self._stager is not None:
            self._stager.after_run(self.stream)  # the slots' device buffers are free after this
        if self.volatile:
            self._copy(ptrs, key, inputs=False)
        if self.status:
            self._status_after_run()
        del ins
        if not self._host_outputs:
            return outs[0] if len(outs) == 1 else tuple(outs)
        return self._host_results(outs)

    def _hot_call(self, arrays: tuple[Any, ...]) -> Any:
        return entry_hot.hot_call(self, arrays)

    def _outputs(self) -> list[Tensor]:
        return entry_hot.outputs(self)

    def hot_path(self, arrays: tuple[Any, ...]) -> Callable[..., Any] | None:
        """A call for callers that check their arrays are these, the last call's, unchanged
        (see :func:`kinac.rt.cuda.entry_hot.bind_hot`)."""
        return entry_hot.bind_hot(self, arrays)

    def _host_results(self, outs: list[Tensor]) -> Any:
        res = [t.numpy() if host else t for t, host in zip(outs, self._host_outputs, strict=True)]
        return res[0] if len(res) == 1 else tuple(res)

    def _copy(self, ptrs: tuple[int, ...], key: tuple[int, ...], inputs: bool) -> None:
        """Copy volatile inputs into their staging buffers (or staged outputs out)."""
        d = driver.api()
        specs = (*self.lowered.params, *self.lowered.outputs)
        n = len(self.lowered.params)
        for pos in sorted(self.volatile):
            if (pos < n) != inputs or key[pos]:
                continue
            nb = array_nbytes(specs[pos].dtype, specs[pos].shape)
            src, dst = (ptrs[pos], self._stage[pos]) if inputs else (self._stage[pos], ptrs[pos])
            driver.check("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync(dst, src, nb, self.stream.cu))

    def synchronize(self) -> None:
        """Wait until the work queued so far on the entry's stream (the legacy default stream:
        every call of this entry, and what the caller queued there before) is done. The
        cheapest correct wait for a call's outputs from the host (``cuStreamSynchronize``
        through PyDLL); ``torch.cuda.synchronize()`` waits for the whole device instead."""
        f = self._sync_fn
        if f is None:
            from kinac.rt.cuda.kernel_graph import libcuda_fn

            f = self._sync_fn = libcuda_fn("cuStreamSynchronize")
        get = self._ctx_get  # the legacy stream is the current context's: the entry's GPU's
        if get is not None and not get(self._ctx_ref) and self._ctx_cur.value == self._ctx_mine:
            rc = f(self.stream.cvp)
        else:
            pushed = self.device.enter()
            try:
                rc = f(self.stream.cvp)
            finally:
                self.device.leave(pushed)
        if rc:
            driver.fail("cuStreamSynchronize", rc)

    # ---- runtime checks (gather bounds): immediate by default, deferred on request ----------
    def defer_checks(self, on: bool = True) -> None:
        """Check the status word asynchronously (:mod:`kinac.rt.cuda.entry_checks`): a call
        queues its copy to pinned memory instead of waiting for it; a failure is raised at
        the entry's next call or at :meth:`check`, whichever comes first. Off by default: a
        plain call's bad index is then reported by that very call."""
        if not on and self._deferred is not None:
            self.check()
        if on and self.status and self._deferred is None:
            from kinac.rt.cuda.entry_checks import DeferredStatus

            pushed = self.device.enter()  # its events and pinned rows: the entry's context
            try:
                self._deferred = DeferredStatus(self.lowered.status_slots)
            finally:
                self.device.leave(pushed)
        elif not on:
            self._deferred = None

    def check(self) -> None:
        """Wait for this entry's deferred checks and raise the first failure (a no-op for the
        immediate checks, already done by each call). A synchronisation point."""
        if self._deferred is not None and self._deferred.pending:
            pushed = self.device.enter()
            try:
                self._deferred.wait(self._raise_status)
            finally:
                self.device.leave(pushed)

    def _status_after_run(self) -> None:
        """After a call's launches: check its status word now, or queue the deferred copy."""
        if self._deferred is None:
            self._check_status()
        else:
            self._deferred.queue(self.status, self.stream, self._raise_status)

    def _status_before_run(self) -> None:
        """Before a call: report an earlier call's failed deferred check, if its copy is in."""
        if self._deferred is not None and self._deferred.pending:
            self._deferred.poll(self._raise_status)

    def _check_status(self) -> None:
        import numpy as np

        st = np.zeros(self.lowered.status_slots, dtype=np.int64)
        d = driver.api()
        driver.check("cuStreamSynchronize", d.cuStreamSynchronize(self.stream.cu))
        driver.check("cuMemcpyDtoH", d.cuMemcpyDtoH(st.ctypes.data, self.status, st.nbytes))
        if st[0]:
            self._raise_status(st)

    def _raise_status(self, st: Any) -> None:
        """The error a failed status word ``st`` (int64 per slot) stands for."""
        import numpy as np

        code, k, pos, value, bound = (int(x) for x in st[:5])
        step = self.lowered.steps[k] if 0 <= k < len(self.lowered.steps) else None
        if code == GATHER_OOB and step is not None:
            where = [int(i) for i in np.unravel_index(pos, step.aux)] if step.aux else []
            raise KinaGpuError(
                f"{self.lowered.name}: gather index {value} at position {where} of the index "
                f"tensor is outside [0, {bound}) (kernel {step.sym})"
            )
        raise KinaGpuError(f"{self.lowered.name}: runtime check {code} failed")

    # ---- measurement ----------------------------------------------------------------------------
    def profile(self, *arrays: Any, reps: int = 20) -> list[tuple[GpuStep, float]]:
        """Each step's device time (ms), from a CUDA graph of ``reps`` back-to-back runs."""
        pushed = self.device.enter()
        try:
            return profile_steps(self, arrays, reps)
        finally:
            self.device.leave(pushed)

    def __repr__(self) -> str:
        ps = ", ".join(f"{p.name}: {p.dtype}{list(p.shape)}" for p in self.lowered.params)
        return f"<GpuEntry {self.lowered.name}({ps}), {len(self.lowered.steps)} steps>"


def default_pdl() -> bool:
    """``KINAC_PDL``: ``1`` launches kinac's kernels in captured graphs with programmatic
    dependent launch, ``0`` plainly; unset: :data:`PDL_DEFAULT`."""
    v = os.environ.get("KINAC_PDL", "")
    if v == "":
        return PDL_DEFAULT
    if v not in ("0", "1"):
        raise ValueError(f"KINAC_PDL must be 0 or 1, not {v!r}")
    return v == "1"


# on: with the small bf16 block's products generated (gpu-small-gemm) its edges join kinac's
# own kernels: 24.6 us of GPU per call with PDL, 26.2 without, 37.3 / 39.0 per synced call
# (benches/small_gemm_probe.py on the H200, docs/measurements/small_gemm_2026-12-02d.md).
# Before: no win (benches/latency_probe.py: every programmatic edge left a cuBLAS kernel; the
# 45M block 659.0 / 659.4 us, bit-identical either way)
PDL_DEFAULT = True

DEFAULT_SHARED = 48 * 1024  # dynamic shared memory a launch may ask for without opting in


def allow_shared(kernel: Any, nbytes: int) -> None:
    """Let ``kernel`` launch with ``nbytes`` of dynamic shared memory (past 48 KiB a function
    must opt in: ``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES``)."""
    d = driver.api()
    attr = d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    driver.check("cuFuncSetAttribute", d.cuFuncSetAttribute(kernel.handle, attr, nbytes))


def load_gpu_entry(lowered: GpuLoweredEntry, ptx: str, **options: Any) -> GpuEntry:
    """A :class:`GpuEntry` for ``lowered`` and its PTX (see the module docstring)."""
    return GpuEntry(lowered, ptx, **options)
