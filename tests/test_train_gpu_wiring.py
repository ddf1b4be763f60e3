"""The GPU trainer's wiring, end to end, without a GPU (issue 12).

``Trainer(target="cuda")`` is run with a driverless stand-in for the device: "device" memory
is host memory (kinac CUDA tensors over ``HostResource``), a fake driver copies bytes, and
every GPU entry (the loss-and-gradient entry, the optimizer's and the scaler's defns) is a
real :class:`~kinac.rt.cuda.entry.GpuEntry` whose launch sequence runs the *host* build of
the same program on those bytes. What is checked is everything but the kernels: the device
flat buffers and their views, the in-place optimizer calls through ``call_into``, the
gradients written into the flat gradient buffer, graph binding and staging, the scaler's flat
check; the losses and weights must equal the host run's bit for bit (the same kernels ran).
"""

from __future__ import annotations

import ctypes
import math
from collections import OrderedDict
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from test_determinism_gpu_fake import FakeDriver, HostResource
from train_support import CACHE, DECODER

from kinac.artifacts.gpu import GpuLaunch, GpuLoweredEntry, GpuStep
from kinac.rt.cuda import driver, graph
from kinac.rt.cuda.entry import GpuEntry
from kinac.rt.cuda.entry_support import DL_NAMES, NP_NAMES, array_nbytes
from kinac.rt.cuda.tensor import DTYPES, contiguous_strides
from kinac.train import Trainer
from kinac.train import flat as flat_mod
from kinac.train import fused as fused_mod
from kinac.train import optim as optim_mod
from kinac.train.amp import AMP_KINA
from kinac.train.optim import OPTIM_KINA, to_numpy

RES = HostResource()


class Driver(FakeDriver):
    """The copies a trainer step makes, on host memory."""

    def cuMemcpyHtoDAsync(self, dst: int, src: int, n: int, s: Any) -> tuple[int]:  # noqa: N802
        ctypes.memmove(dst, src, n)
        return (0,)

    cuMemcpyDtoDAsync = cuMemcpyHtoDAsync  # noqa: N815


class Graph:
    captured = True

    def __init__(self, seq: Any, stream: Any, name: str = "") -> None:
        self.seq = seq

    def replay(self, stream: Any = None) -> None:
        self.seq(stream)

    def close(self) -> None:
        pass


def _array(ptr: int, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    n = array_nbytes(dtype, shape)
    buf = (ctypes.c_uint8 * max(n, 1)).from_address(ptr)
    return np.frombuffer(buf, np.uint8)[:n].view(NP_NAMES[dtype]).reshape(shape)  # type: ignore[call-overload]


def gpu_twin(host: Any) -> GpuEntry:
    """A GpuEntry with ``host``'s signature whose one "map" step runs ``host`` (a HostEntry)
    on the bound addresses: the runtime's binding, staging and graph logic, real; the kernel,
    the host's."""
    lw0 = host.lowered
    n_in = len(lw0.params)
    launch = GpuLaunch("k_twin", 1, 128, ())
    first = lw0.outputs[0] if lw0.outputs else lw0.params[0]  # no outputs: updates in place
    shape = tuple(first.shape)
    reads = tuple(f"param{i}" for i in range(n_in))
    steps = (GpuStep("k0_map", "map", "kernel", first.dtype, shape, reads, "out0",
                     (launch,)),)  # fmt: skip
    lw = GpuLoweredEntry(lw0.name, "", lw0.params, lw0.outputs, ("cuda:0",) * n_in,
                         ("cuda:0",) * len(lw0.outputs), 0, 0, steps, ())  # fmt: skip
    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.ordinal, e.pinned, e.resource = lw, 0, False, RES
    e.device = SimpleNamespace(enter=lambda: False, leave=lambda pushed: None)  # type: ignore[assignment]
    e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                     contiguous_strides(o.shape)) for o in lw.outputs]  # fmt: skip
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
    e.stream = e.capture_stream = SimpleNamespace(cu=0, handle=0, synchronize=lambda: None)  # type: ignore[assignment]
    e._imports, e._last_box, e._stager = {}, [None], None
    npos = n_in + len(lw.outputs)
    e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(npos)], set(), {}, OrderedDict()
    e.captures = e.replays = 0
    e.arena, e._allocs = 0, []
    specs = (*lw.params, *lw.outputs)

    def bind(key: tuple[int, ...]) -> Any:
        ptrs = [p or e._staging(pos) for pos, p in enumerate(key)]
        arrays = [_array(p, s.dtype, tuple(s.shape)) for p, s in zip(ptrs, specs, strict=True)]

        def seq(stream: Any) -> None:
            ins, outs = arrays[:n_in], arrays[n_in:]
            alias = [any(np.shares_memory(o, a) for a in ins) for o in outs]
            tmp = [np.empty_like(o) if a else o for o, a in zip(outs, alias, strict=True)]
            host(*ins, out=tuple(tmp))  # host kernels take no aliasing: through a temporary
            for o, t, a in zip(outs, tmp, alias, strict=True):
                if a:
                    np.copyto(o, t)

        return seq, [seq]

    e._bind = bind  # type: ignore[method-assign]
    return e


class HostStoreOnFakeDevice(flat_mod.DeviceStore):
    def __init__(self) -> None:
        self.resource = RES  # type: ignore[assignment]


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> list[GpuEntry]:
    """Every specialisation a cuda trainer makes becomes a GPU twin of its host build."""
    monkeypatch.setattr(driver, "_api", Driver())
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(graph, "capture", Graph)
    monkeypatch.setattr(flat_mod, "DeviceStore", HostStoreOnFakeDevice)
    made: list[GpuEntry] = []
    real = optim_mod.specialised

    def specialised(fn: Any, args: tuple[Any, ...], dims: dict[str, int]) -> Any:
        from kinac.api import compile as compile_defn
        from kinac.api_grad import GradEntry, ValueAndGrad

        if fn.target != "cuda":
            return real(fn, args, dims)
        host_args = tuple(to_numpy(a) for a in args)
        if isinstance(fn, ValueAndGrad):
            assert fn.fixed is not None
            h = ValueAndGrad(DECODER, fn.fixed.name, fn.wrt, cache_dir=CACHE)
            host = real(h, host_args, dims)
            made.append(gpu_twin(host.entry))
            return GradEntry(made[-1], host.wrt)
        path = {"optim.kina": OPTIM_KINA, "amp.kina": AMP_KINA}[fn.key.file]
        h = compile_defn(path, fn.key.name, cache_dir=CACHE)
        made.append(gpu_twin(real(h, host_args, dims)))
        return made[-1]

    monkeypatch.setattr(optim_mod, "specialised", specialised)

    def load_fused(n: int, dtype: str, options: dict[str, Any]) -> GpuEntry:
        """The fused AdamW step's real lowering (its PTX unused), run by the three host
        defns in place on the bound buffers (the kernel's arithmetic is checked bit for bit
        on the GPU emulation: tests/test_train_fused_adamw.py)."""
        from kinac.api import compile as compile_defn

        lw, _ = fused_mod.fused_lowered(n, dtype, options)
        fns = {k: compile_defn(OPTIM_KINA, k, cache_dir=CACHE) for k, _ in fused_mod.PARTS}

        class Host:
            lowered = lw

            def __call__(self, p: Any, g: Any, m: Any, v: Any, *sc: Any, out: Any) -> None:
                assert out == ()
                b1, b2, lr, eps, wd, t = (x[()] for x in sc)
                m[...] = fns["adamw-m"](g, m, b1)
                v[...] = fns["adamw-v"](g, v, b2)
                p[...] = fns["adamw-param"](p, m, v, lr, b1, b2, eps, wd, t)

        e = gpu_twin(Host())
        e.updates_inputs = fused_mod.WRITTEN
        made.append(e)
        return e

    monkeypatch.setattr(fused_mod, "load", load_fused)
    return made


@pytest.mark.parametrize("entry", ["decoder_1m", "decoder_1m_f16"])
def test_cuda_trainer_wiring_matches_the_host_bit_for_bit(
    fake_gpu: list[GpuEntry], entry: str
) -> None:
    host = Trainer(DECODER, entry, seed=6, cache_dir=CACHE)
    dev = Trainer(DECODER, entry, seed=6, cache_dir=CACHE, target="cuda")
    assert dev.opt.mode == "inplace" and isinstance(dev.opt.store, HostStoreOnFakeDevice)
    rh, rd = host.run(3), dev.run(3)
    assert [(r.loss, r.skipped, r.scale) for r in rh] == [(r.loss, r.skipped, r.scale) for r in rd]
    for k, v in host.weights.items():
        assert to_numpy(v).tobytes() == to_numpy(dev.weights[k]).tobytes(), k
    # one fused AdamW launch a step; skipped steps make none
    assert dev.opt.calls == sum(not r.skipped for r in rd) and dev.opt.fused
    # the fused step's buffers and hyperparameters stay put: only ``t`` (a host scalar, here
    # a new upload each step, on a GPU one of two pinned slots) moves, and is staged
    fe = dev.opt._fused["flat.float32"]
    assert fe in fake_gpu and fe.volatile <= {9} and fe.captures <= 3
    if dev.scaler is not None:  # f16: one unscale and one finiteness check a step, flat
        assert dev.scaler._flat is not None
        assert [f.calls for f in dev.scaler._flat] == [3, 3]
    loss_entry = dev._entry.entry
    assert loss_entry in fake_gpu
    # the weights and gradients never moved: only the host batch (a new upload each step)
    # is staged; one graph, replayed
    n_in = len(loss_entry.lowered.params)
    names = [p.name for p in loss_entry.lowered.params]
    staged = {names[p] if p < n_in else "out" for p in loss_entry.volatile}
    assert staged <= {"tokens", "targets", "scale"}, staged
    assert loss_entry.captures <= 3 and loss_entry.replays >= 1
    # every gradient was written into its slice of the flat gradient buffer
    grads = dev.opt.grad_buffers()
    assert grads is not None and dev._outs is not None
    assert all(o.ptr == grads[n].ptr for n, o in zip(dev.names, dev._outs[1:], strict=True))
    flat = dev.opt._grad["flat.float32"]
    assert flat.ptr <= min(g.ptr for g in grads.values())
    assert all((g.ptr - flat.ptr) % 256 == 0 for g in grads.values())  # aligned slices
    assert math.prod(flat.shape) >= dev.n_weights


def test_cuda_trainer_bad_target_fails_its_step_before_the_update(
    fake_gpu: list[GpuEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loss entry's deferred gather check (docs/training.md): a target outside [0, V)
    fails the step that used it, after the loss read and before its loss is reported or its
    update queued; the weights and the step count stay as they were."""
    import dataclasses

    from test_train_gpu_checks import FakeEvent, Rows

    from kinac.rt.cuda import entry_checks
    from kinac.rt.cuda.entry_support import GATHER_OOB, KinaGpuError
    from kinac.train import data

    monkeypatch.setattr(entry_checks, "_event", FakeEvent)
    monkeypatch.setattr(entry_checks, "_pinned", Rows)
    dev = Trainer(DECODER, "decoder_1m", seed=6, cache_dir=CACHE, target="cuda")
    dev.run(1)
    e = dev._entry.entry
    assert e._deferred is None  # no status word in the twin: give it the real entry's
    e.lowered = dataclasses.replace(e.lowered, status_slots=5)
    e.status = RES.allocate(40)
    e.defer_checks()
    assert e._deferred is not None
    vocab = dev.info.vocab
    pos = [p.name for p in e.lowered.params].index("targets")
    plain_bind = e._bind

    def bind(key: tuple[int, ...]) -> Any:  # the gather kernel's check, on the bound bytes
        seq, steps = plain_bind(key)
        shape = tuple(e.lowered.params[pos].shape)

        def checked(stream: Any) -> None:
            st = _array(e.status, "i64", (5,))
            st[:] = 0
            t = _array(key[pos] or e._staging(pos), "i32", shape).reshape(-1)
            bad = np.flatnonzero((t < 0) | (t >= vocab))
            if bad.size:
                st[:] = (GATHER_OOB, 0, bad[0], t[bad[0]], vocab)
                return
            seq(stream)

        return checked, [checked]

    e._bind = bind  # type: ignore[method-assign]
    e._bound.clear()
    dev.run(1)  # a good step, checked (deferred) after its loss read
    assert e._deferred.queued == 1 and not e._deferred.pending
    before = {k: to_numpy(v).copy() for k, v in dev.weights.items()}
    t0, steps0 = dev.opt.t, dev.step_count
    real_batch = data.batch

    def bad_batch(*a: Any) -> tuple[Any, Any]:
        tokens, targets = real_batch(*a)
        targets = targets.copy()
        targets[1, 2] = vocab
        return tokens, targets

    monkeypatch.setattr(data, "batch", bad_batch)
    with pytest.raises(KinaGpuError, match=f"gather index {vocab} .* outside \\[0, {vocab}\\)"):
        dev.step()
    assert (dev.opt.t, dev.step_count) == (t0, steps0)
    for k, v in dev.weights.items():
        assert to_numpy(v).tobytes() == before[k].tobytes(), k


def test_cuda_trainer_learning_rate_schedule(fake_gpu: list[GpuEntry]) -> None:
    """A changed learning rate reaches the fused AdamW step (its hyperparameter buffer is
    rewritten in place, same address): the host's weights bit for bit."""
    host = Trainer(DECODER, "decoder_1m", seed=7, cache_dir=CACHE)
    dev = Trainer(DECODER, "decoder_1m", seed=7, cache_dir=CACHE, target="cuda")
    host.run(1), dev.run(1)
    buf = dev.opt._hyper_dev["flat.float32"][1]
    for lr in (1e-3, 5e-4):
        host.opt.lr = dev.opt.lr = lr
        host.run(1), dev.run(1)
    assert dev.opt._hyper_dev["flat.float32"][1] is buf
    for k, v in host.weights.items():
        assert to_numpy(v).tobytes() == to_numpy(dev.weights[k]).tobytes(), k
