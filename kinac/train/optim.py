"""Optimizers: the update formulas live in Kina (``std/optim.kina``); this drives them.

An optimizer owns its parameters and their state. Each step calls the state updates, then the
parameter update (a Kina defn has one result). On the host the parameters of one dtype, their
gradients and each state live in flat buffers (every parameter is a view of a slice), so a
step is one call per defn over all the weights, and every call writes into a buffer the
optimizer already holds (``HostEntry(..., out=...)``): each flat buffer has two copies, the
step reads one and writes the other (ping-pong), so after the first step a step allocates
nothing (``kinac.rt.host.OUTPUT_STATS``). On a GPU there is one call per parameter. Writing a parameter
over itself would need the lowering to allow an output to alias an input; ping-pong costs one
extra copy of the parameters and state in memory instead. On a GPU the calls return new
tensors from the runtime's caching pool.

Hyperparameters and the step count are rank-0 arguments of the parameter's dtype, so a
learning-rate schedule or a new step never recompiles.
"""

from __future__ import annotations

import math
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
    """One defn of a prelude module, called with donated outputs on the host (``out``) and
    plainly on a GPU; its specialisations are keyed by the caller (one per parameter)."""

    def __init__(
        self,
        name: str,
        target: str,
        options: dict[str, Any],
        path: Path = OPTIM_KINA,
        donate: bool | None = None,
    ) -> None:
        from kinac.api import compile as compile_defn

        self.fn = compile_defn(path, name, target=target, **options)
        self.donate = target == "cpu" if donate is None else donate
        self._entries: dict[str, Any] = {}

    def __call__(self, key: str, args: tuple[Any, ...], out: Any) -> Any:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = specialised(self.fn, args, {})
        if not self.donate:
            return entry(*args)
        return entry(*args, out=(out,))


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
        donate: bool | None = None,
        **options: Any,
    ) -> None:
        """``donate`` (default: on the host) writes every result into a buffer the optimizer
        holds; without it each call returns a new array (the GPU's way, testable on the host)."""
        import numpy as np

        self.lr = float(lr)
        self.t = 0
        self.target = target
        host = self.donate = target == "cpu" if donate is None else donate
        if host and target != "cpu":
            raise KinaUsageError("buffer donation is a host runtime feature (target cpu)")
        self._fns = {n: KinaFn(n, target, options, donate=host) for n in self.defns}
        self._np = {k: np.dtype(np.asarray(to_numpy(v)).dtype) for k, v in params.items()}
        for k, dt in self._np.items():
            if dt not in (np.float32, np.float64):
                raise KinaUsageError(f"parameter `{k}` is {dt}: optimizers update f32 or f64")
        # What one update call covers (a "unit"), its dtype, and its buffers (``_bufs[unit]``,
        # ``_bufs[unit.state]``). Donating: one unit per dtype, whose buffers are flat (every
        # parameter of that dtype is a view of a slice of them), two of each (ping-pong), so
        # a step is a few calls over all the weights. Otherwise one unit per parameter, one
        # buffer each (the calls allocate).
        self._unit_dt: dict[str, Any] = {}
        self._members: dict[str, list[tuple[str, int, tuple[int, ...]]]] = {}
        self._bufs: dict[str, list[Any]] = {}
        self._grad: dict[str, Any] = {}
        if host:
            for k, dt in self._np.items():
                unit = f"flat.{dt.name}"
                self._unit_dt[unit] = dt
                members = self._members.setdefault(unit, [])
                off = members[-1][1] + math.prod(members[-1][2]) if members else 0
                members.append((k, off, tuple(np.shape(to_numpy(params[k])))))
            for unit, members in self._members.items():
                n = members[-1][1] + math.prod(members[-1][2])
                dt = self._unit_dt[unit]
                self._bufs[unit] = [np.empty(n, dt), np.empty(n, dt)]
                for k, off, shape in members:
                    size = math.prod(shape)
                    self._bufs[unit][0][off : off + size] = to_numpy(params[k]).reshape(-1)
                for st in self.state_names:
                    self._bufs[f"{unit}.{st}"] = [np.zeros(n, dt), np.empty(n, dt)]
                self._grad[unit] = np.zeros(n, dt)
        else:
            for k, v in params.items():
                self._unit_dt[k] = self._np[k]
                self._bufs[k] = [v]
                for st in self.state_names:
                    self._bufs[f"{k}.{st}"] = [np.zeros(tuple(v.shape), self._np[k])]
        self._cur = 0

    def _views(self, flats: dict[str, Any]) -> dict[str, Any]:
        """Each parameter's view of its unit's flat buffer ``flats[unit]``."""
        return {
            k: flats[unit][off : off + math.prod(shape)].reshape(shape)
            for unit, members in self._members.items()
            for k, off, shape in members
        }

    @property
    def params(self) -> dict[str, Any]:
        """The current parameters (when donating, views of buffers that the step after next
        overwrites: copy what you keep)."""
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
        """The current buffer of ``name`` and the one its update writes (None on a GPU)."""
        b = self._bufs[name]
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
        self.t += 1
        if not self.donate:
            for k in self._np:
                self._update(k, grads[k])
            return
        import numpy as np

        views = self._views(self._grad)
        for k, g in grads.items():
            if k in views and not (
                isinstance(g, np.ndarray) and g.ctypes.data == views[k].ctypes.data
            ):
                np.copyto(views[k], to_numpy(g))  # not written in place: one copy
        for unit in self._members:
            self._update(unit, self._grad[unit])
        self._cur = 1 - self._cur

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
        super().__init__(params, lr=lr, target=target, **options)
        self.betas, self.eps, self.weight_decay = betas, eps, weight_decay

    def _update(self, k: str, g: Any) -> None:
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


OPTIMIZERS: dict[str, type[Optimizer]] = {"adamw": AdamW, "sgd": SGD}
