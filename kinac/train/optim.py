"""Optimizers: the update formulas live in Kina (``std/optim.kina``); this drives them.

An optimizer owns its parameters and their state. Each step calls the state updates, then the
parameter update, one compiled defn call per tensor (a Kina defn has one result). On the host
every call writes into a buffer the optimizer already holds (``HostEntry(..., out=...)``):
each tensor has two buffers, the step reads one and writes the other (ping-pong), so after
the first step a step allocates nothing (``kinac.rt.host.OUTPUT_STATS``). Writing a parameter
over itself would need the lowering to allow an output to alias an input; ping-pong costs one
extra copy of the parameters and state in memory instead. On a GPU the calls return new
tensors from the runtime's caching pool.

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
        # two buffers per tensor when donating (ping-pong), else one (the calls allocate)
        self._bufs: dict[str, list[Any]] = {}
        for k, v in params.items():
            v = np.ascontiguousarray(to_numpy(v)) if host else v
            self._bufs[k] = [v, np.empty_like(v)] if host else [v]
            for s in self.state_names:
                z = np.zeros(tuple(v.shape), self._np[k])
                self._bufs[f"{k}.{s}"] = [z, np.empty_like(z)] if host else [z]
        self._cur = 0

    @property
    def params(self) -> dict[str, Any]:
        """The current parameters (on the host, buffers that the next step overwrites only
        after one more: copy what you keep)."""
        return {k: self._bufs[k][self._cur] for k in self._np}

    def state(self, name: str) -> dict[str, Any]:
        """The current value of state ``name`` (``m``, ``v``, ``buf``) of each parameter."""
        return {k: self._bufs[f"{k}.{name}"][self._cur] for k in self._np}

    def _scalar(self, k: str, x: float) -> Any:
        import numpy as np

        return np.asarray(x, dtype=self._np[k])

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
        for k in self._np:
            self._update(k, grads[k])
        if self.donate:
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
