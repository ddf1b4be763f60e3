"""The steady state of a GPU entry's call, kept apart from the general path (entry.py).

Issue 14 asks that a call cost (almost) nothing on the host: after the first calls, a user
passes the same arrays again (weights, and an activation buffer refilled in place), the
outputs of the previous call have been dropped, and the launch sequence is a captured CUDA
graph. Then a call needs only: is it the same arrays, at the same addresses; new output
tensors; one ``cuGraphLaunch``. This module is that path:

- :func:`memo` records what a later call compares (ids, imports, addresses);
- :func:`outputs` makes the output tensors, reusing the block of an output the caller dropped
  (:class:`OutBlock`: one spare block per output, kept by the entry instead of going through
  the pool's bins: the pool's allocate and free cost ~1.5 us of Python per call together);
- :func:`hot_call` is the path itself, and :func:`bind_hot` a closure for callers that checked
  the arguments' identity already (``kinac.compile``'s own memo), which skips even that.

Ordering is the pool's: a block is reused on the stream it was used on (the legacy default
stream), so work queued before on that stream finishes before the next call's kernels write it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kinac.rt import hot
from kinac.rt.cuda import driver, entry_imports
from kinac.rt.cuda.tensor import DTYPES, KDL_CUDA, Allocation, Tensor

if TYPE_CHECKING:
    from kinac.rt.cuda.entry import GpuEntry


class Spares(list):  # type: ignore[type-arg]  # list[int] of device pointers
    """At most one dropped output block per output position, for the next call's output.

    Owned by the entry and by every output tensor's :class:`OutBlock`; when the last of them
    goes, the spare block goes back to the pool."""

    __slots__ = ("resource", "nbytes")

    def __init__(self, resource: Any, nbytes: int) -> None:
        super().__init__()
        self.resource = resource
        self.nbytes = nbytes

    def __del__(self) -> None:
        try:
            for p in self:
                self.resource.deallocate(p, self.nbytes, 0)
            self.clear()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (shutdown)
            pass


class OutBlock(Allocation):
    """An output's memory: like :class:`Allocation`, but a dropped one becomes its position's
    spare (if that is empty) instead of going back to the pool."""

    __slots__ = ("spares",)
    spares: Spares

    def __del__(self) -> None:
        try:
            sp = self.spares
            if self.ptr and not sp:
                sp.append(self.ptr)
                self.ptr = 0
            else:
                self.free()
        except Exception:  # noqa: BLE001 - never raise from a finaliser (shutdown, dead driver)
            pass


def make_spares(entry: GpuEntry) -> list[Spares]:
    return [Spares(entry.resource, nbytes) for _, _, nbytes, _ in entry._out_specs]


_RC = sys.getrefcount
KEEP = 2  # output tensors kept per output position (a caller that holds the last one: two)


def _refs(kept: list[Any]) -> tuple[int, int]:
    """What :func:`take` reads of a kept tensor nobody else holds (the same code shape, so the
    interpreter's own references count the same)."""
    for t in kept:
        return _RC(t), _RC(t.owner)
    return -1, -1


def _calibrate() -> tuple[int, int]:
    """The reference counts of a kept output tensor (and of its block) that only the entry
    holds, read the way :func:`take` reads them; (-1, -1), which turns reuse off, when this
    interpreter does not show a second holder or a weak reference as take expects."""

    class _T:
        __slots__ = ("owner", "__weakref__")

    kept: list[Any] = [_T()]
    kept[0].owner = _T()
    free = _refs(kept)
    held = kept[0]
    busy = _refs(kept)
    del held
    by_block = kept[0].owner
    busy_block = _refs(kept)
    del by_block
    import weakref

    ref = weakref.ref(kept[0])
    ok = busy[0] == free[0] + 1 and busy_block[1] == free[1] + 1 and kept[0].__weakref__ is ref
    del ref
    return free if ok and kept[0].__weakref__ is None else (-1, -1)


FREE_T, FREE_O = _calibrate()


def take(kept: list[Tensor]) -> Tensor | None:
    """A kept output tensor that nobody else holds, to be this call's output again: only the
    entry references it and its block (every view, DLPack export, torch tensor made from it
    holds one of the two), and no weak reference to it is alive. Its memory is ordered like a
    dropped output's block: the next call's kernels run on the stream that wrote it."""
    for t in kept:
        if _RC(t) == FREE_T and _RC(t.owner) == FREE_O and t.__weakref__ is None:
            return t
    return None


def _new_output(entry: GpuEntry, k: int, keep: bool = True) -> Tensor:
    """A new output tensor for output ``k`` (a dropped output's block, else one from the pool).
    Its spec was checked once, at load, so the fields are set directly (``Tensor.__init__``
    re-validates shape and dtype: ~1 us per output)."""
    spares = entry._spares
    if spares is None:
        spares = entry._spares = make_spares(entry)
    shape, dt, nbytes, st = entry._out_specs[k]
    sp, res = spares[k], entry.resource
    if sp:
        a = OutBlock.__new__(OutBlock)
        a.ptr, a.nbytes, a.resource, a.stream = sp.pop(), nbytes, res, 0
    else:
        a = OutBlock(res, nbytes, 0)
    a.spares = sp
    t = Tensor.__new__(Tensor)
    t.ptr, t.shape, t.dtype, t.strides, t.device = a.ptr, shape, dt, st, (KDL_CUDA, entry.ordinal)
    t.owner, t.stream, t.readonly = a, 0, False
    if keep:
        kept = kept_lists(entry)[k]
        if len(kept) >= KEEP:  # the oldest kept one is the caller's now (or goes to the spares)
            del kept[0]
        kept.append(t)
    return t


def kept_lists(entry: GpuEntry) -> list[list[Tensor]]:
    """The entry's kept output tensors per output position (made at the first call)."""
    kept = entry._kept
    if kept is None:
        kept = entry._kept = [[] for _ in entry._out_specs]
    return kept


def outputs(entry: GpuEntry) -> list[Tensor]:
    """The output tensors of a call: per output, a tensor this entry returned before and nobody
    holds any more (:func:`take`: no allocation, no new object, and the same address, so the
    same captured graph), else a new one (:func:`_new_output`)."""
    kept = kept_lists(entry)
    if not hot.LEAN:  # (the A/B's path before: a new tensor each call, dropped ones' blocks)
        if any(kept):
            entry._kept = None
        return [_new_output(entry, k, False) for k in range(len(entry._out_specs))]
    return [take(c) or _new_output(entry, k) for k, c in enumerate(kept)]


def addresses(dp: Any, arrays: tuple[Any, ...]) -> tuple[int, ...] | None:
    """``dp`` (a ``data_ptr`` method) of each array; None when it is not torch's (a kinac
    :class:`Tensor` has none; anything else that fails is checked one by one)."""
    try:
        return tuple(map(dp, arrays))
    except Exception:  # noqa: BLE001 - not torch's data_ptr
        return None


def memo(arrays: tuple[Any, ...], ids: tuple[int, ...], ins: list[Tensor]) -> tuple[Any, ...]:
    """What :func:`hot_call` compares a later call with: the arrays' ids, their imports and
    addresses, and (when every array is of one type with a ``data_ptr`` method, as torch
    tensors are) that method and each array's address by it, so a tensor whose memory was
    replaced in place is noticed; last, in a one-element list (renewed in place, so a bound
    call's token stays the memo), every array's torch ``_version`` (None when some array has
    none), so a tensor reshaped or transposed in place is noticed (:func:`same_versions`)."""
    kind = type(arrays[0]) if arrays else None
    dp = getattr(kind, "data_ptr", None)
    dps: tuple[int, ...] | None = None
    if dp is not None and all(type(a) is kind for a in arrays):
        try:
            dps = tuple(map(dp, arrays))
        except Exception:  # noqa: BLE001 - a data_ptr that is not torch's: not used
            dp = None
    else:
        dp = None
    return (ids, ins, tuple([t.ptr for t in ins]), dp, dps, [entry_imports.versions(arrays)])


def same_versions(last: tuple[Any, ...], arrays: tuple[Any, ...]) -> bool:
    """Whether the memo's arrays (the same objects, at the same addresses) still have their
    imports' forms: no version moved, or every array whose version moved (a data write, or a
    ``t_``) kept its import's shape, strides and dtype; the memo's versions are then renewed."""
    box = last[5]
    was = box[0]
    if was is None:
        return True
    now = entry_imports.versions(arrays)
    if now == was:
        return True
    if now is None or not entry_imports.changed_forms_same(arrays, last[1], was, now):
        return False
    box[0] = now
    return True


def _launch(entry: GpuEntry, in_ptrs: tuple[int, ...], last: list[Any] | None = None) -> Any:
    """Outputs, and the captured graph bound to these addresses launched; None (nothing
    launched) when there is no such graph. ``last`` (a bound call's, one output): set to
    ``[output address, graph, its fast launch]``, what the next call of the same addresses
    launches without looking the graph up."""
    outs = outputs(entry)
    ptrs = in_ptrs + tuple([t.ptr for t in outs])
    hit = entry._bound.get(ptrs)
    graph = hit[2] if hit is not None else None
    fast = graph.fast_launch if graph is not None else None
    if fast is None:
        return None  # (the outputs stay the entry's; the general path takes them)
    entry._bound.move_to_end(ptrs)
    rc = fast[0](fast[1], entry.stream.cvp)
    if rc:
        driver.fail("cuGraphLaunch", rc)
    entry.hot_calls += 1  # (a replay too: GpuEntry.replays counts it)
    if last is not None:
        last[:] = [outs[0].ptr, graph, fast]
        hot_key(entry, ptrs)
    if entry._host_outputs:
        return entry._host_results(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)


def hot_key(entry: GpuEntry, ptrs: tuple[int, ...]) -> None:
    """Mark ``ptrs`` as launched by a hot call that no longer looks its graph up (nor moves it
    to the end of the entry's LRU order): the entry's eviction passes over it
    (:meth:`~kinac.rt.cuda.entry.GpuEntry._runner`); the last few such keys are kept."""
    keys = entry._hot_keys
    if keys is None:
        keys = entry._hot_keys = {}
    keys.pop(ptrs, None)
    keys[ptrs] = None
    while len(keys) > 4:
        del keys[next(iter(keys))]


def _plain(entry: GpuEntry) -> bool:
    """Nothing per call besides one graph launch: graphs on, no staged (volatile) address,
    no host array staging, no runtime check to read back."""
    return entry.use_graphs and not entry.volatile and entry._stager is None and not entry.status


def hot_call(entry: GpuEntry, arrays: tuple[Any, ...]) -> Any:
    """The steady state of a call, or None to take the general path: the same arrays as the
    last call (by identity, each still at the address it had: a tensor reallocated in place,
    by ``set_`` or ``resize_``, is looked up again), nothing staged or checked, and a captured
    graph bound to these addresses."""
    if entry._stager is not None:  # host arguments staged: their steady state (staging_hot)
        return entry._stager.hot_call(entry, arrays)
    last = entry._last_box[0]
    if last is None or not _plain(entry):
        return None
    ids, _, in_ptrs, dp, dps, _ = last
    if tuple(map(id, arrays)) != ids or (dp is not None and tuple(map(dp, arrays)) != dps):
        return None
    if not hot.LAUNCH_FIRST:
        return _launch(entry, in_ptrs) if same_versions(last, arrays) else None
    # launch first (docs/call_path.md): the versions after the launch; a form changed in place
    # at the same addresses made it compute garbage into outputs nobody holds, and the general
    # path redoes the call after it on the stream (re-importing the array, or reporting it)
    out = _launch(entry, in_ptrs)
    if out is None or same_versions(last, arrays):
        return out
    entry.hot_calls -= 1
    entry._replays += 1  # (a launch all the same)
    return None


def bind_hot(entry: GpuEntry, arrays: tuple[Any, ...]) -> Callable[..., Any] | None:
    """A call of ``entry`` for a caller that has checked its arrays are the very objects of
    the entry's last call (``kinac.compile``'s memo: ids, and torch's in-place version
    counters): while the entry's memo is still the one seen now, the call skips the identity
    check, and checks only that each tensor is still at its address (torch's ``x.data = y``
    moves a tensor without counting a change); otherwise it is a plain call. None unless the
    entry's memo is of ``arrays`` (the last call's arrays, all remembered CUDA arrays, at their
    addresses).

    With one output (a model's call), the call also skips the graph's lookup: when the kept
    output it takes back (:func:`take`) is at the address of the last launch's, the graph is
    that launch's, still bound while its fast launch is (an evicted graph is closed, which
    clears it)."""
    if entry._stager is not None:  # host arguments staged: their steady state, bound
        return entry._stager.bind_hot(entry, arrays)
    token = entry._last_box[0]
    if token is None or tuple(map(id, arrays)) != token[0]:
        return None
    dp, dps = token[3], token[4]
    if dp is not None and tuple(map(dp, arrays)) != dps:
        return None
    box, in_ptrs = entry._last_box, token[2]
    get, ref, cur, mine = entry._ctx_get, entry._ctx_ref, entry._ctx_cur, entry._ctx_mine
    kept = kept_lists(entry)
    one = len(kept) == 1 and not entry._host_outputs and hot.LEAN
    kept0 = kept[0] if one else []
    last: list[Any] = [None, None, None]  # the last launch: output address, graph, fast launch
    cvp = entry.stream.cvp
    free_t, free_o = FREE_T, FREE_O
    rc_of = _RC

    # launch first (hot.LAUNCH_FIRST): the caller compares the arrays' versions after the
    # launch; the addresses stay before it (below): a tensor whose memory was freed in place
    # (untyped_storage().resize_(0)) reads address 0 there, and no launch may read it
    first = hot.LAUNCH_FIRST

    def run(arrays: tuple[Any, ...]) -> Any:
        if (
            box[0] is token
            and (dp is None or tuple(map(dp, arrays)) == dps)
            and entry.use_graphs
            and not entry.volatile
            and entry._stager is None
            and not entry.status
            and get is not None
            and not get(ref)
            and cur.value == mine
        ):
            for t in kept0:  # (take, inline)
                if rc_of(t) == free_t and rc_of(t.owner) == free_o and t.__weakref__ is None:
                    if t.ptr == last[0] and last[1].fast_launch is last[2]:
                        fast = last[2]
                        rc = fast[0](fast[1], cvp)
                        if rc:
                            driver.fail("cuGraphLaunch", rc)
                        entry.hot_calls += 1  # (a replay too: GpuEntry.replays)
                        return t
                    break
            t = None  # type: ignore[assignment]  # (not held while _launch takes the kept outputs)
            out = _launch(entry, in_ptrs, last if one else None)
            if out is not None:
                return out
        return entry(*arrays)

    def call(*arrays: Any) -> Any:
        return run(arrays)

    call.run = run  # type: ignore[attr-defined]  # (kinac.compile calls it with the tuple)
    # launched first (hot.LAUNCH_FIRST): the caller may compare the arrays' versions after the
    # launch, and check the forms of those that moved against these imports (kinac.compile)
    call.launch_first = first  # type: ignore[attr-defined]
    call.ins = token[1]  # type: ignore[attr-defined]
    return call


def torch_import(x: Any) -> Tensor | None:
    """A torch CUDA tensor's memory as a kinac :class:`Tensor`, read from torch's own
    attributes: what the DLPack exchange gives, without its capsule (~5 us per tensor, paid by
    every call that passes a fresh activation). Only in the plain case, where the exchange would
    do nothing more: a strided tensor of a Kina dtype without a lazy conjugate or negation bit,
    and torch's current stream on its device is the legacy default stream, which the entry runs
    on (on another stream DLPack orders the two with an event). None otherwise: the DLPack
    exchange decides, and reports what it refuses.

    A tensor that requires a gradient (an ``nn.Parameter``) is taken too, where DLPack refuses
    it: the entry only reads its inputs, as under ``torch.no_grad()``, and a user passing a
    model's parameters for inference expects that to work.

    The import keeps the tensor's storage alive (not the tensor object, which the entry's
    memo references weakly). Torch is the caller's: it is loaded when a torch tensor exists."""
    if not type(x).__module__.startswith("torch") or not getattr(x, "is_cuda", False):
        return None
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if x.layout is not torch.strided or x.is_conj() or x.is_neg():
            return None
        index = x.get_device()
        if torch.cuda.current_stream(index).cuda_stream != 0:
            return None
        dt = DTYPES.get(str(x.dtype).removeprefix("torch."))
        if dt is None:
            return None
        return Tensor(
            x.data_ptr(),
            tuple(x.shape),
            dt,
            device=(KDL_CUDA, index),
            strides=tuple(x.stride()),
            owner=x.untyped_storage(),
        )
    except (AttributeError, TypeError, RuntimeError):  # another torch: DLPack decides
        return None
