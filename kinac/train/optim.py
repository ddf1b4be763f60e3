"""Optimizers: the update formulas live in Kina (``std/optim.kina``); this drives them.

An optimizer owns its parameters and their state. Each step calls the state updates, then the
parameter update (a Kina defn has one result). The parameters of one dtype, their gradients
and each state live in flat buffers (every parameter is a view of a slice:
:mod:`kinac.train.flat`), so a step is one call per defn over all the weights (3 for AdamW,
not 3 per tensor), and every call writes into a buffer the optimizer already holds:

* on the host (``pingpong``): each flat buffer has two copies, the step reads one and writes
  the other (host kernels take no output aliasing an input: their buffers are ``noalias``),
  so after the first step a step allocates nothing (``kinac.rt.host.OUTPUT_STATS``);
* on a GPU (``inplace``): one device buffer each, overwritten by the update
  (``GpuEntry(..., out=)``, which allows it for an elementwise map): the
  parameters, gradients and two moments of AdamW are 4 copies of the weights' bytes, as
  PyTorch's AdamW holds, at fixed addresses (one CUDA graph per call, replayed every step);
* ``donate=False`` (``calls``): one call per parameter, each returning new arrays.

Hyperparameters and the step count are rank-0 arguments of the parameter's dtype, so a
learning-rate schedule or a new step never recompiles.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kinac.errors import KinaUsageError

OPTIM_KINA = Path(__file__).resolve().parent.parent / "std" / "optim.kina"


def to_numpy(x: Any) -> Any:
    """A host numpy array of ``x`` (itself if it is one; a copy of a device tensor)."""
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # a torch tensor
        return x.detach().cpu().numpy()
    return x.numpy()


def type_stub(x: Any) -> Any:
    """A stand-in for ``x`` that the Python API can read the type of: kinac's own device
    tensors (a GPU call's outputs) become zero-size-backed numpy views of their dtype and
    shape (the API binds types from numpy, torch and DLPack producers; it reads a kinac
    ``Tensor``'s dtype as unknown). Anything else is itself."""
    import numpy as np

    if type(x).__module__ != "kinac.rt.cuda.tensor":
        return x
    name = x.dtype.name
    if name == "bfloat16":
        return x  # no numpy dtype: the API's message says so
    return np.broadcast_to(np.zeros((), np.dtype(name)), tuple(x.shape))


def specialised(fn: Any, args: tuple[Any, ...], dims: dict[str, int]) -> Any:
    """The loaded entry of compiled ``fn`` for ``args`` (compiled on first use): calling it
    skips the API's per-call binding, and takes kinac's device tensors as they are."""
    entry, _, _ = fn.specialisation(tuple(type_stub(a) for a in args), dims)
    return entry


class KinaFn:
    """One defn of a prelude module, called in one of the optimizer's modes (``mode``):
    ``"calls"`` returns new arrays, ``"pingpong"`` writes into the given host buffer (``out``),
    ``"inplace"`` writes into ``out``, which may be an argument's own buffer (on a GPU through
    ``GpuEntry(*args, out=)``; on the host, for tests, into a temporary that
    is then copied over ``out``: host kernels take no aliased output). Its specialisations
    are keyed by the caller (one per parameter or flat unit)."""

    def __init__(
        self,
        name: str,
        target: str,
        options: dict[str, Any],
        path: Path = OPTIM_KINA,
        donate: bool | str | None = None,
    ) -> None:
        from kinac.api import compile as compile_defn

        self.fn = compile_defn(path, name, target=target, **options)
        self.target = target
        self.mode = mode_of(target, donate)
        self._entries: dict[str, Any] = {}
        self.calls = 0

    def __call__(self, key: str, args: tuple[Any, ...], out: Any) -> Any:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = specialised(self.fn, args, {})
        self.calls += 1
        if self.mode == "calls" or out is None:
            return entry(*args)
        if self.mode == "pingpong":
            return entry(*args, out=(out,))
        if self.target == "cuda":  # GpuEntry's out=: in place over the argument's buffer
            return entry(*args, out=(out,))[0]
        import numpy as np

        np.copyto(out, entry(*args))
        return out


def check_hyper(
    what: str, x: float, low: float, high: float = float("inf"), hi_open: bool = True
) -> None:
    """``x`` is a number in ``[low, high)`` (``[low, high]`` when not ``hi_open``), else a
    usage error naming ``what`` (torch.optim's ValueError; out of range, a step divides by
    zero or grows without bound: NaN or infinite weights after the first step)."""
    ok = isinstance(x, int | float) and low <= x and (x < high if hi_open else x <= high)
    if not ok:
        rng = f"[{low:g}, {high:g}{')' if hi_open else ']'}"
        raise KinaUsageError(f"{what} must be a number in {rng}, got {x!r}")


_DTYPE_NAMES = {"float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16"}


def dtype_name(x: Any) -> str | None:
    """The numpy-style dtype name of a numpy array, torch tensor or kinac device tensor
    (``float32``); None for an object without a dtype."""
    dt = getattr(x, "dtype", None)
    if dt is None:
        return None
    name = getattr(dt, "name", None)
    return str(name if isinstance(name, str) else dt).removeprefix("torch.")


def kina_type(dt: str | None, shape: tuple[int, ...]) -> str:
    """``f32[2 3]``: a dtype name and a shape as kinac's messages write them."""
    return f"{_DTYPE_NAMES.get(dt or '', dt)}[{' '.join(map(str, shape))}]"


def mode_of(target: str, donate: bool | str | None) -> str:
    """How results are written: ``pingpong`` (host default: two host buffers each),
    ``inplace`` (GPU default: one device buffer each, overwritten), ``calls`` (new arrays)."""
    if donate in ("inplace", "pingpong", "calls"):
        return str(donate)
    if donate is None or donate is True:
        return "pingpong" if target == "cpu" else "inplace"
    if donate is False:
        return "calls"
    raise KinaUsageError(f"donate={donate!r}: True, False or 'inplace'")


class Optimizer:
    """Parameters, their state, and the Kina defns that update them."""

    defns: tuple[str, ...] = ()
    state_names: tuple[str, ...] = ()

    def __init__(
        self,
        params: dict[str, Any],
        *,
        lr: float,
        target: str = "cpu",
        donate: bool | str | None = None,
        **options: Any,
    ) -> None:
        """``donate``: True (the default) keeps flat buffers that each call writes: on the
        host two of each (ping-pong), on a GPU one, updated in place; ``"inplace"`` asks
        for one on the host too (tests of the GPU's way); False returns new arrays from each
        call, one call per parameter and formula."""
        import numpy as np

        from kinac.train.flat import DeviceStore, HostStore, layout

        check_hyper("the learning rate", lr, low=0.0)
        self.lr = float(lr)
        self.t = 0
        self.target = target
        self.mode = mode_of(target, donate)
        if self.mode == "pingpong" and target != "cpu":
            raise KinaUsageError("ping-pong buffers are a host runtime feature (target cpu)")
        self.donate = self.mode != "calls"
        self._fns = {n: KinaFn(n, target, options, donate=self.mode) for n in self.defns}
        self._np = {k: np.dtype(np.asarray(to_numpy(v)).dtype) for k, v in params.items()}
        self._shapes = {k: tuple(np.shape(to_numpy(v))) for k, v in params.items()}
        for k, dt in self._np.items():
            if dt not in (np.float32, np.float64):
                raise KinaUsageError(f"parameter `{k}` is {dt}: optimizers update f32 or f64")
        # What one update call covers (a "unit"), its dtype, and its buffers (``_bufs[unit]``,
        # ``_bufs[unit.state]``). Donating: one unit per dtype, whose buffers are flat (every
        # parameter of that dtype is a view of a slice of them: kinac.train.flat), two of
        # each when ping-ponging, so a step is a few calls over all the weights. Otherwise
        # one unit per parameter, one buffer each (the calls allocate).
        self._unit_dt: dict[str, Any] = {}
        self._members: dict[str, Any] = {}
        self._bufs: dict[str, list[Any]] = {}
        self._grad: dict[str, Any] = {}
        self.store: Any = HostStore()
        if self.donate:
            if target == "cuda":
                self.store = DeviceStore()
            copies = 2 if self.mode == "pingpong" else 1
            for dt in dict.fromkeys(self._np.values()):
                unit = f"flat.{dt.name}"
                self._unit_dt[unit] = dt
                shapes = {k: tuple(np.shape(to_numpy(v))) for k, v in params.items()}
                members, n = layout({k: sh for k, sh in shapes.items() if self._np[k] == dt})
                self._members[unit] = members
                host = np.zeros(n, dt)
                for m in members:
                    host[m.offset : m.offset + m.size] = to_numpy(params[m.name]).reshape(-1)
                st = self.store
                self._bufs[unit] = [st.upload(host, dt)] + [st.empty(n, dt)] * (copies - 1)
                for name in self.state_names:
                    self._bufs[f"{unit}.{name}"] = [st.zeros(n, dt)] + [st.empty(n, dt)] * (
                        copies - 1
                    )
                self._grad[unit] = st.zeros(n, dt)
        else:
            for k, v in params.items():
                self._unit_dt[k] = self._np[k]
                self._bufs[k] = [v]
                for name in self.state_names:
                    self._bufs[f"{k}.{name}"] = [np.zeros(tuple(v.shape), self._np[k])]
        self._cur = 0
        self._view_cache: dict[tuple[int, ...], dict[str, Any]] = {}

    @property
    def calls(self) -> int:
        """Update calls made so far (all defns): a step of a flat optimizer makes a few."""
        return sum(f.calls for f in self._fns.values())

    def _views(self, flats: dict[str, Any]) -> dict[str, Any]:
        """Each parameter's view of its unit's flat buffer ``flats[unit]`` (made once per set
        of buffers: in place they never change, and a step reads them several times)."""
        key = tuple(id(b) for b in flats.values())
        hit = self._view_cache.get(key)
        if hit is not None:
            return hit
        views = {
            m.name: self.store.view(flats[unit], m)
            for unit, members in self._members.items()
            for m in members
        }
        if len(self._view_cache) > 16:  # ping-pong alternates two sets per state: a few
            self._view_cache.clear()
        self._view_cache[key] = views
        return views

    @property
    def params(self) -> dict[str, Any]:
        """The current parameters (when donating, views of buffers that later steps overwrite:
        copy what you keep)."""
        if self.donate:
            return self._views({u: self._bufs[u][self._cur] for u in self._members})
        return {k: self._bufs[k][0] for k in self._np}

    def state(self, name: str) -> dict[str, Any]:
        """The current value of state ``name`` (``m``, ``v``, ``buf``) of each parameter."""
        if self.donate:
            return self._views({u: self._bufs[f"{u}.{name}"][self._cur] for u in self._members})
        return {k: self._bufs[f"{k}.{name}"][0] for k in self._np}

    def grad_buffers(self) -> dict[str, Any] | None:
        """When donating: where each gradient should be written (views of the flat gradient
        buffer: a loss-and-gradient call given these as ``out`` costs the step no copy)."""
        return self._views(self._grad) if self.donate else None

    def _scalar(self, unit: str, x: float) -> Any:
        import numpy as np

        return np.asarray(x, dtype=self._unit_dt[unit])

    def _io(self, name: str) -> tuple[Any, Any]:
        """The current buffer of ``name`` and the one its update writes (the same one in
        place; None when each call returns a new array)."""
        b = self._bufs[name]
        if self.mode == "inplace":
            return b[0], b[0]
        if len(b) == 1:
            return b[0], None
        return b[self._cur], b[1 - self._cur]

    def _set(self, name: str, value: Any) -> None:
        b = self._bufs[name]
        if len(b) == 1:
            b[0] = value

    def step(self, grads: dict[str, Any]) -> None:
        """One update of every parameter from ``grads`` (one gradient per parameter)."""
        missing = sorted(set(self._np) - set(grads))
        if missing:
            raise KinaUsageError(f"no gradient for {', '.join(missing)}")
        for k, dt in self._np.items():
            self._check_grad(k, dt, grads[k])
        self.t += 1
        if not self.donate:
            for k in self._np:
                self._update(k, grads[k])
            return
        self.gather(grads)
        for unit in self._members:
            self._update(unit, self._grad[unit])
        if self.mode == "pingpong":
            self._cur = 1 - self._cur

    def _check_grad(self, k: str, dt: Any, g: Any) -> None:
        """A gradient must have its parameter's shape and dtype (as torch requires of
        ``p.grad``): the flat buffers would broadcast or cast it silently, the per-tensor
        calls would report a mismatch inside ``std/optim.kina``."""
        shape = self._shapes[k]
        gshape = tuple(getattr(g, "shape", ()))
        gdt = dtype_name(g)
        if gshape != shape or (gdt is not None and gdt != dt.name):
            raise KinaUsageError(
                f"the gradient of `{k}` is {kina_type(gdt, gshape)}, but its parameter is "
                f"{kina_type(dt.name, shape)}: a gradient has its parameter's shape and dtype"
            )

    def gather(self, grads: dict[str, Any]) -> dict[str, Any]:
        """When donating: copy each gradient not already in its slice of the flat gradient
        buffers there (a loss entry given :meth:`grad_buffers` as ``out`` wrote them in
        place: no copy); the flat buffers per unit (``{unit: buffer}``)."""
        views = self._views(self._grad)
        for k, g in grads.items():
            if k in views and not self.store.same(g, views[k]):
                self.store.copy(views[k], g)  # not written in place: one copy
        return self._grad

    def _update(self, k: str, g: Any) -> None:
        raise NotImplementedError


class SGD(Optimizer):
    """``torch.optim.SGD`` with momentum (dampening 0), weight decay and Nesterov."""

    defns = ("sgd-buf", "sgd-param", "sgd-param-nesterov")
    state_names = ("buf",)

    def __init__(
        self,
        params: dict[str, Any],
        *,
        lr: float = 0.01,
        momentum: float = 0.9,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        target: str = "cpu",
        **options: Any,
    ) -> None:
        check_hyper("momentum", momentum, 0.0)
        check_hyper("weight decay", weight_decay, 0.0)
        if nesterov and momentum <= 0:
            raise KinaUsageError("Nesterov momentum needs momentum > 0 (torch.optim.SGD's rule)")
        super().__init__(params, lr=lr, target=target, **options)
        self.momentum, self.weight_decay, self.nesterov = momentum, weight_decay, nesterov

    def _update(self, k: str, g: Any) -> None:
        p, p_out = self._io(k)
        buf, buf_out = self._io(f"{k}.buf")
        sc = self._scalar
        new_buf = self._fns["sgd-buf"](
            k, (p, g, buf, sc(k, self.momentum), sc(k, self.weight_decay)), buf_out
        )
        if self.nesterov:
            args = (p, g, new_buf, sc(k, self.lr), sc(k, self.momentum), sc(k, self.weight_decay))
            new_p = self._fns["sgd-param-nesterov"](k, args, p_out)
        else:
            new_p = self._fns["sgd-param"](k, (p, new_buf, sc(k, self.lr)), p_out)
        self._set(f"{k}.buf", new_buf)
        self._set(k, new_p)


class AdamW(Optimizer):
    """``torch.optim.AdamW``: decoupled weight decay, bias-corrected moments."""

    defns = ("adamw-m", "adamw-v", "adamw-param")
    state_names = ("m", "v")

    def __init__(
        self,
        params: dict[str, Any],
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
        target: str = "cpu",
        **options: Any,
    ) -> None:
        fused = options.pop("fused", None)
        if not (isinstance(betas, tuple | list) and len(betas) == 2):
            raise KinaUsageError(f"betas must be a pair (b1, b2), got {betas!r}")
        check_hyper("betas[0]", betas[0], 0.0, 1.0)
        check_hyper("betas[1]", betas[1], 0.0, 1.0)
        check_hyper("eps", eps, 0.0)
        check_hyper("weight decay", weight_decay, 0.0)
        super().__init__(params, lr=lr, target=target, **options)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay
        # on a GPU, in place: one fused kernel for the three formulas (kinac.train.fused)
        self.fused = (self.mode == "inplace" and target == "cuda") if fused is None else fused
        if self.fused and (self.mode != "inplace" or target != "cuda"):
            raise KinaUsageError("the fused AdamW step updates GPU buffers in place")
        # the compile options only (donate is the optimizer's own: kinac.compile refuses it)
        self._options = {k: v for k, v in options.items() if k != "donate"}
        self._fused: dict[str, Any] = {}
        self._hyper_dev: dict[str, tuple[Any, ...]] = {}
        self.fused_calls = 0

    @property
    def calls(self) -> int:
        return super().calls + self.fused_calls

    def _update(self, k: str, g: Any) -> None:
        if self.fused:
            self._update_fused(k, g)
            return
        p, p_out = self._io(k)
        m, m_out = self._io(f"{k}.m")
        v, v_out = self._io(f"{k}.v")
        sc = self._scalar
        b1, b2 = sc(k, self.betas[0]), sc(k, self.betas[1])
        new_m = self._fns["adamw-m"](k, (g, m, b1), m_out)
        new_v = self._fns["adamw-v"](k, (g, v, b2), v_out)
        lr, eps, wd, t = (sc(k, x) for x in (self.lr, self.eps, self.weight_decay, self.t))
        args = (p, new_m, new_v, lr, b1, b2, eps, wd, t)
        new_p = self._fns["adamw-param"](k, args, p_out)
        self._set(f"{k}.m", new_m)
        self._set(f"{k}.v", new_v)
        self._set(k, new_p)

    def _update_fused(self, k: str, g: Any) -> None:
        """One launch: ``m``, ``v`` and the parameters of unit ``k`` updated in place."""
        from kinac.train import fused

        p, v, m = self._io(k)[0], self._io(f"{k}.v")[0], self._io(f"{k}.m")[0]
        entry = self._fused.get(k)
        if entry is None:
            dtype = self.store.dtype_name(p)
            entry = self._fused[k] = fused.load(int(p.shape[0]), dtype, self._options)
        entry(p, g, m, v, *self._hyper(k), self._scalar(k, self.t))
        self.fused_calls += 1

    def _hyper(self, k: str) -> tuple[Any, ...]:
        """``b1, b2, lr, eps, wd`` as rank-0 device tensors (16-byte apart in one buffer),
        written when they change (a learning-rate schedule: one small copy, ordered after
        the last step's kernels on the default stream): only ``t`` is staged each step, and
        the fused step's addresses stay put (one graph per staging slot of ``t``)."""
        import numpy as np

        from kinac.train.flat import Member

        vals = (self.betas[0], self.betas[1], self.lr, self.eps, self.weight_decay)
        hit = self._hyper_dev.get(k)
        if hit is not None and hit[0] == vals:
            return hit[2]  # type: ignore[no-any-return]
        host = np.zeros(4 * len(vals), self._unit_dt[k])
        host[::4] = vals
        if hit is None:
            buf = self.store.upload(host, self._unit_dt[k])
            views = tuple(self.store.view(buf, Member("", 4 * i, ())) for i in range(len(vals)))
        else:  # a schedule: rewritten in place (after the last step's kernels), same graph
            buf, views = hit[1], hit[2]
            self.store.copy(buf, host)
        self._hyper_dev[k] = (vals, buf, views)
        return views


OPTIMIZERS: dict[str, type[Optimizer]] = {"adamw": AdamW, "sgd": SGD}
