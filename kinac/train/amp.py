"""Dynamic loss scaling for f16 training (mixed precision with f32 master weights).

The loss defn multiplies its f32 loss by ``scale`` (a rank-0 f32 argument: see
``workspaces/decoder``'s ``decoder-loss-f16``), so f16 gradients stay above f16's underflow.
After each backward pass the scaler unscales the gradients and checks them
(``std/amp.kina``: ``unscale``, ``nonfinite``). An inf or NaN anywhere skips the optimizer
step and multiplies the scale by ``backoff`` (0.5); ``growth_interval`` clean steps in a row
multiply it by ``growth`` (2). Same rules and defaults as ``torch.amp.GradScaler``. The
decision is made on the host, as GradScaler's ``step`` does (one scalar read per parameter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kinac.errors import KinaUsageError
from kinac.train.optim import KinaFn, to_numpy

AMP_KINA = Path(__file__).resolve().parent.parent / "std" / "amp.kina"


class LossScaler:
    """The scale, the count of clean steps since the last change, and the checks."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth: float = 2.0,
        backoff: float = 0.5,
        growth_interval: int = 2000,
        target: str = "cpu",
        donate: bool | None = None,
        **options: Any,
    ) -> None:
        self.scale = float(init_scale)
        self.growth, self.backoff, self.growth_interval = growth, backoff, int(growth_interval)
        self.clean_steps = 0
        self.skipped = 0
        self.host = target == "cpu" if donate is None else donate  # results into own buffers
        self._unscale = KinaFn("unscale", target, options, AMP_KINA, self.host)
        self._nonfinite = {
            r: KinaFn(n, target, options, AMP_KINA, self.host)
            for r, n in ((0, "nonfinite-0"), (1, "nonfinite"), (2, "nonfinite-2"))
            + ((3, "nonfinite-3"), (4, "nonfinite-4"))
        }
        self._bufs: dict[str, Any] = {}
        self.target, self._options = target, options
        self._flat: tuple[KinaFn, KinaFn] | None = None  # unscale, nonfinite over flat buffers

    def _buf(self, key: str, like: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        import numpy as np

        if not self.host:
            return None
        b = self._bufs.get(key)
        if b is None:
            b = self._bufs[key] = np.empty(shape, dtype)
        return b

    def unscale(self, grads: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        """The gradients divided by the scale, and whether all of them are finite."""
        import numpy as np

        out: dict[str, Any] = {}
        finite = True
        for k, g in grads.items():
            dt = np.dtype(np.float32) if not self.host else g.dtype
            inv = np.asarray(1.0 / self.scale, dtype=dt)
            u = self._unscale(k, (g, inv), self._buf(k, g, tuple(g.shape), dt))
            check = self._nonfinite.get(len(g.shape))
            if check is None:
                raise KinaUsageError(f"gradient `{k}` has rank {len(g.shape)}: at most 4")
            bad = check(k, (u,), self._buf(f"{k}.bad", g, (), np.float32))
            finite = finite and bool(np.isfinite(to_numpy(bad)))
            out[k] = u
        return out, finite

    def unscale_flat(self, opt: Any, grads: dict[str, Any]) -> bool:
        """With an in-place flat optimizer (the GPU's): the gradients gathered into its flat
        buffers, divided by the scale there (one call per buffer, overwriting it), then one
        finiteness check per buffer: a step reads one scalar per dtype, not one per tensor.
        Whether all of them are finite."""
        import numpy as np

        if self._flat is None:
            opts = self._options
            self._flat = (
                KinaFn("unscale", self.target, opts, AMP_KINA, "inplace"),
                KinaFn("nonfinite", self.target, opts, AMP_KINA, "calls"),
            )
        unscale, check = self._flat
        finite = True
        for unit, g in opt.gather(grads).items():
            inv = np.asarray(1.0 / self.scale, dtype=opt._unit_dt[unit])
            unscale(unit, (g, inv), g)
            bad = check(unit, (g,), None)
            finite = finite and bool(np.isfinite(to_numpy(bad)))
        return finite

    def update(self, finite: bool) -> None:
        """After a step: back off on overflow (the step was skipped), grow after N clean."""
        if not finite:
            self.scale *= self.backoff
            self.clean_steps = 0
            self.skipped += 1
            return
        self.clean_steps += 1
        if self.clean_steps >= self.growth_interval:
            self.scale *= self.growth
            self.clean_steps = 0
