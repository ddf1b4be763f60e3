"""A GPU entry called with the caller's output buffers (``out=``), in place where it is safe.

Why: a training step keeps its parameters, gradients and optimizer state in buffers it owns.
:class:`~kinac.rt.cuda.entry.GpuEntry`'s call takes every output from the memory pool, so a
step that replaced its weights, moments and gradients by new tensors held two copies of each
at once, and the loss entry saw its weights at a new address every step: after three
addresses the entry *stages* them (a device copy of every weight in, of every gradient out,
and a staging buffer of each). The H200 run measured 4,855 MiB peak against PyTorch's 1,864
(BENCHMARKS.md, "Training"). :func:`call_into` writes the outputs into the given buffers
(fixed addresses: one CUDA graph, replayed every step, no staging) and lets an output be the
very buffer of an input when the entry is a map over it (:func:`inplace_safe`): AdamW's
``m``, ``v`` and parameter updates then overwrite their state, so no second copy exists.

In-place and CUDA graphs: the first call at a new set of addresses runs the launch sequence
once eagerly (a warm-up, so library set-up is not captured) and then captures it; the plain
call replays the capture after the warm-up, which for an in-place update would apply it
twice. Here the warm-up *is* the call's run when an output aliases an input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kinac.artifacts.gpu import GpuLoweredEntry
from kinac.errors import KinaCallError
from kinac.rt.cuda.entry_support import DL_NAMES, KinaGpuError, array_nbytes, is_dense
from kinac.rt.cuda.tensor import KDL_CUDA, Tensor


def inplace_safe(lowered: GpuLoweredEntry, aliases: dict[int, int]) -> str | None:
    """Why output ``j`` may not overwrite input ``i`` for each ``{j: i}`` of ``aliases``
    (None: it may). Safe when every step is an elementwise map over the output's shape and
    no step runs after the one writing an aliased output: element ``k`` of the output is
    then computed from element ``k`` of the input (and broadcast scalars) by the thread that
    writes it, after it read it, and nothing reads that input again."""
    steps = lowered.steps
    for j, i in aliases.items():
        out, inp = lowered.outputs[j], lowered.params[i]
        if (out.dtype, out.shape) != (inp.dtype, inp.shape):
            return f"output {j} is {out.dtype}{list(out.shape)}, input {i} {inp.dtype}{list(inp.shape)}"
        writer = [k for k, s in enumerate(steps) if s.writes == f"out{j}"]
        if len(writer) != 1:
            return f"output {j} is not written by one step"
        for k, s in enumerate(steps):
            if s.kind != "map" or s.impl != "kernel" or tuple(s.shape) != tuple(out.shape):
                return f"step {k} ({s.sym}) is a {s.kind} ({s.impl}), not a map over the output"
            if k > writer[0] and f"param{i}" in s.reads:
                return f"step {k} reads input {i} after output {j} overwrote it"
            if any(r.startswith("out") for r in s.reads):
                return f"step {k} reads an output"
    return None


def _given(entry: Any, x: Any, j: int) -> Tensor:
    """The caller's buffer for output ``j``: a dense, 16-byte aligned CUDA array of exactly the
    output's dtype and shape on the entry's GPU (an unaligned one cannot be written in place)."""
    lw = entry.lowered
    spec = lw.outputs[j]
    t: Tensor | None = None
    if isinstance(x, Tensor) and x.is_cuda:
        t = x
    elif hasattr(x, "__dlpack_device__") and int(x.__dlpack_device__()[0]) == KDL_CUDA:
        t = Tensor.from_dlpack(x, stream=0)
    if t is None:
        raise KinaCallError(f"{lw.name}: out[{j}] must be a CUDA array, got {type(x).__name__}")
    entry._check_gpu(spec.name, t.device[1])
    if t.dtype.name != DL_NAMES[spec.dtype] or t.shape != tuple(spec.shape):
        raise KinaGpuError(
            f"{lw.name}: out[{j}] is {t.dtype.name}{list(t.shape)}, expected "
            f"{DL_NAMES[spec.dtype]}{list(spec.shape)}"
        )
    if not is_dense(t) or t.ptr % 16 or t.readonly:
        raise KinaGpuError(f"{lw.name}: out[{j}] must be contiguous, writeable, 16-byte aligned")
    return t


def _aliases(lowered: GpuLoweredEntry, ins: list[Tensor], outs: list[Tensor]) -> dict[int, int]:
    """``{output: input}`` for outputs that are exactly an input's buffer; any other overlap
    of an output with an input or another output is an error."""
    n_in = [array_nbytes(p.dtype, p.shape) for p in lowered.params]
    n_out = [array_nbytes(o.dtype, o.shape) for o in lowered.outputs]
    found: dict[int, int] = {}
    for j, o in enumerate(outs):
        for i, t in enumerate(ins):
            if o.ptr == t.ptr and n_out[j] == n_in[i]:
                found[j] = i
            elif o.ptr < t.ptr + n_in[i] and t.ptr < o.ptr + n_out[j]:
                raise KinaGpuError(f"{lowered.name}: out[{j}] partly overlaps input {i}")
        for k in range(j):
            if o.ptr < outs[k].ptr + n_out[k] and outs[k].ptr < o.ptr + n_out[j]:
                raise KinaGpuError(f"{lowered.name}: out[{j}] overlaps out[{k}]")
    return found


def _cuda(x: Any) -> bool:
    """Whether ``x`` is a CUDA array (a kinac tensor or any DLPack producer on a GPU)."""
    if isinstance(x, Tensor):
        return bool(x.is_cuda)
    return hasattr(x, "__dlpack_device__") and int(x.__dlpack_device__()[0]) == KDL_CUDA


def _cuda_ptr(x: Any) -> int:
    return int(x.ptr if isinstance(x, Tensor) else Tensor.from_dlpack(x, stream=0).ptr)


def _not_in_place(lw: GpuLoweredEntry, i: int) -> KinaGpuError:
    return KinaGpuError(
        f"{lw.name} updates `{lw.params[i].name}` in place: pass a contiguous, 16-byte aligned "
        "CUDA buffer (a host or misaligned array would be a copy, its update lost)"
    )


def call_into(entry: Any, arrays: Sequence[Any], out: Sequence[Any]) -> tuple[Tensor, ...]:
    """Run GPU entry ``entry`` on ``arrays`` writing its outputs into ``out`` (one CUDA array
    per output, returned); an output may be an input's buffer where :func:`inplace_safe`."""
    lw: GpuLoweredEntry = entry.lowered
    if len(arrays) != len(lw.params):
        raise KinaGpuError(f"{lw.name} takes {len(lw.params)} arrays, got {len(arrays)}")
    if len(out) != len(lw.outputs):
        raise KinaGpuError(f"{lw.name} has {len(lw.outputs)} outputs, got {len(out)} out= arrays")
    if entry._host_outputs:
        raise KinaGpuError(f"{lw.name}: out= needs every output on the GPU (one goes to the host)")
    pushed = entry.device.enter()
    try:
        if entry._deferred is not None:  # an earlier call's failed check, if its copy is in
            entry._status_before_run()
        stager = entry._stager
        if stager is not None and stager._pending:  # a prepare whose run was never reported
            stager.after_run(entry.stream)
        for i in entry.updates_inputs:  # written in place: a copy's update would be lost
            if not _cuda(arrays[i]):
                raise _not_in_place(lw, i)
        ins = [entry._input(a, i) for i, a in enumerate(arrays)]
        for i in entry.updates_inputs:
            if _cuda_ptr(arrays[i]) != ins[i].ptr:  # a misaligned or strided one was copied
                raise _not_in_place(lw, i)
        outs = [_given(entry, x, j) for j, x in enumerate(out)]
        ptrs = tuple([t.ptr for t in ins] + [t.ptr for t in outs])
        checked: dict[tuple[int, ...], bool] = entry.__dict__.setdefault("_into_checked", {})
        aliased = checked.get(ptrs)
        if aliased is None:  # these addresses not seen yet: check them (a step's are the same)
            found = _aliases(lw, ins, outs)
            if found:
                why = inplace_safe(lw, found)
                if why is not None:
                    raise KinaGpuError(f"{lw.name}: an output cannot overwrite its input: {why}")
            if len(checked) > 64:
                checked.clear()
            aliased = checked[ptrs] = bool(found) or bool(entry.updates_inputs)
        stager = entry._stager
        if stager is not None and stager._pending:  # the compute waits for the copies
            stager.before_run(entry.stream)
        key = ptrs if not entry.volatile and ptrs in entry._bound else entry._key(ptrs)
        if entry.volatile.intersection(entry.updates_inputs):  # staged: the update'd be lost
            raise KinaGpuError(
                f"{lw.name} updates its inputs in place: call it on buffers that keep their "
                "addresses (one of them was seen at three)"
            )
        fresh = aliased and entry.use_graphs and key not in entry._bound
        if entry.volatile:
            for pos in entry.volatile:
                entry._staging(pos)
            entry._copy(ptrs, key, inputs=True)
        if fresh:
            replays = entry.replays
            entry._runner(key)  # its warm-up run is this call's: an update must run once
            entry.replays = replays  # and the capture is not replayed by this call
        else:
            entry._runner(key)(entry.stream)
        if entry._stager is not None:
            entry._stager.after_run(entry.stream)
        if entry.volatile:
            entry._copy(ptrs, key, inputs=False)
        if entry.status:
            entry._status_after_run()
        return tuple(outs)
    finally:
        entry.device.leave(pushed)


def copy_device(dst: Tensor, src: Any) -> None:
    """Copy ``src`` (a CUDA array of ``dst``'s size, or a host array) into device tensor
    ``dst``, ordered on the legacy default stream as the entries' work is."""
    from kinac.rt.cuda import driver

    if not (hasattr(src, "__dlpack_device__") and int(src.__dlpack_device__()[0]) == KDL_CUDA):
        dst.copy_from_host(src)
        return
    t = src if isinstance(src, Tensor) else Tensor.from_dlpack(src, stream=0)
    if t.nbytes != dst.nbytes or not (is_dense(t) and is_dense(dst)):
        raise KinaGpuError(f"copy of {t.nbytes} bytes into a {dst.nbytes}-byte buffer")
    d = driver.api()
    driver.check("cuMemcpyDtoDAsync", d.cuMemcpyDtoDAsync(dst.ptr, t.ptr, t.nbytes, 0))
