"""The training loop: a loss entry's ``value_and_grad``, an optimizer, optionally a scaler.

:class:`Trainer` compiles ``kinac.value_and_grad`` of a ``kina.toml`` entry with respect to
every weight (``kinac.train.params``: the roles of the parameters), initialises the weights
from the seed, and runs steps on the synthetic task (``kinac.train.data``). The
loss-and-gradient call writes into buffers the trainer holds (``out=``): the loss into its own
scalar, each gradient into its slice of the optimizer's flat gradient buffer. On the host the
optimizer ping-pongs its flat buffers, so after the first step a step allocates no runtime
buffer (:attr:`Trainer.allocations_per_step`, from ``kinac.rt.host.OUTPUT_STATS``); on a GPU
it updates one device buffer each in place (``kinac.train.optim``), so the loss entry's
weights and gradients never move and it replays one CUDA graph, and a step waits for the
device once (the loss entry's bounds check; the loss is read then).

Determinism: data and first weights depend only on the seed, and every kernel is
deterministic (no atomics on the default path), so two runs with one seed give bitwise equal
losses and weights (``tests/test_train_determinism.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kinac.errors import KinaUsageError
from kinac.train.params import DATA, SCALE, EntryInfo, entry_info, init_weights


@dataclass(frozen=True)
class StepResult:
    """One step: its number (from 1), the loss (unscaled), the tokens it saw, its wall time,
    whether the optimizer skipped it (a non-finite gradient under loss scaling), the scale."""

    step: int
    loss: float
    tokens: int
    seconds: float
    skipped: bool = False
    scale: float | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")

    def as_json(self) -> dict[str, Any]:
        return {
            "event": "step",
            "step": self.step,
            "loss": self.loss,
            "tokens": self.tokens,
            "seconds": round(self.seconds, 6),
            "tokens_per_s": round(self.tokens_per_s, 1),
            "skipped": self.skipped,
            "scale": self.scale,
        }


def grads_into(outputs: tuple[Any, ...], wrt: tuple[str, ...], opt: Any) -> tuple[Any, ...]:
    """Buffers for a loss-and-gradient call's ``outputs`` (the loss, then one gradient per
    name of ``wrt``): each gradient the optimizer's flat gradient buffer's view where it has
    one of the same dtype and shape (no copy before the update), else a new buffer of
    ``opt.store`` (host or device memory, allocated once: the trainer reuses them)."""
    bufs = opt.grad_buffers() or {}
    store = opt.store

    def fits(view: Any, o: Any) -> bool:
        return tuple(view.shape) == tuple(o.shape) and store.dtype_name(view) == o.dtype

    res = [store.output(outputs[0].shape, outputs[0].dtype)]
    for n, o in zip(wrt, outputs[1:], strict=True):
        view = bufs.get(n)
        res.append(view if view is not None and fits(view, o) else store.output(o.shape, o.dtype))
    return tuple(res)


class Trainer:
    """Train ``entry`` of ``workspace``: ``Trainer(ws, entry).run(steps)``.

    ``fused`` (AdamW): None runs one fused in-place kernel a step where the optimizer updates
    GPU buffers in place (``kinac.train.fused``), False the three defns' kernels."""

    def __init__(
        self,
        workspace: str,
        entry: str,
        *,
        lr: float = 3e-3,
        seed: int = 0,
        target: str = "cpu",
        optimizer: str = "adamw",
        weight_decay: float = 0.0,
        loss_scale: str | float | None = None,
        growth_interval: int = 2000,
        simulate: int | None = None,
        layout: str = "dp",
        donate: bool | None = None,
        fused: bool | None = None,
        **options: Any,
    ) -> None:
        from kinac.api_grad import value_and_grad
        from kinac.train.amp import LossScaler
        from kinac.train.optim import OPTIMIZERS
        from kinac.train.options import check_fixed_scale, check_options

        check_options(
            lr=lr,
            seed=seed,
            weight_decay=weight_decay,
            growth_interval=growth_interval,
            simulate=simulate,
        )
        if optimizer not in OPTIMIZERS:
            raise KinaUsageError(
                f"unknown optimizer {optimizer!r}: use {' or '.join(sorted(OPTIMIZERS))}"
            )
        self.workspace, self.entry, self.seed, self.target = str(workspace), entry, seed, target
        self.info: EntryInfo = entry_info(self.workspace, entry, target=target, **options)
        self.names = tuple(p.name for p in self.info.weights)
        self.parallel: Any = None
        if simulate is not None:
            if target != "cpu":
                raise KinaUsageError(
                    "--simulate runs on the host's device simulator: drop --target cuda"
                )
            from kinac.train.parallel import make_parallel

            self.parallel = make_parallel(
                self.workspace, entry, self.info, simulate, layout, **options
            )
        else:  # a rank of `kinac launch` (WORLD_SIZE set): data parallel over the launch
            from kinac.train.launched import launched_parallel

            self.parallel = launched_parallel(self.workspace, entry, self.info, target, **options)
        if self.parallel is None:
            self.vg = value_and_grad(
                self.workspace, entry, wrt=list(self.names), target=target, **options
            )
        kw: dict[str, Any] = {"lr": lr, "weight_decay": weight_decay}
        if optimizer == "adamw":  # None: one fused kernel where in place on a GPU
            kw["fused"] = fused
        self.opt = OPTIMIZERS[optimizer](
            init_weights(self.info, seed), target=target, donate=donate, **kw, **options
        )
        self.donate = self.opt.donate
        if self.parallel is not None:
            self.parallel.grad_buffers = self.opt.grad_buffers()
        if loss_scale is None:
            loss_scale = "dynamic" if self.info.f16 and self.info.amp else 1.0
        if not self.info.amp and loss_scale != 1.0:
            raise KinaUsageError(
                f"entry `{entry}` takes no `scale` parameter: loss scaling needs a mixed-"
                "precision loss (e.g. workspaces/decoder's decoder-loss-f16)"
            )
        if loss_scale != "dynamic":
            loss_scale = check_fixed_scale(loss_scale)
        self.scaler: LossScaler | None = None
        self.fixed_scale = 1.0
        if loss_scale == "dynamic" or loss_scale != 1.0:
            # a fixed scale is a scaler that never changes (a non-finite step is still skipped)
            fixed = loss_scale != "dynamic"
            self.scaler = LossScaler(
                init_scale=float(loss_scale) if fixed else 2.0**16,
                growth=1.0 if fixed else 2.0,
                backoff=1.0 if fixed else 0.5,
                growth_interval=growth_interval,
                target=target,
                donate=self.opt.mode == "pingpong",
                **options,
            )
        self.step_count = 0
        self._outs: tuple[Any, ...] | None = None  # donated loss-and-gradient buffers (host)
        self._entry: Any = None
        self.allocations_per_step: list[int] = []
        # kinac.train.observe's hooks: each observer sees every step's result; first_call sees
        # the loss-and-gradient entry and its arguments just before its first call
        self.observers: list[Callable[[Trainer, StepResult], None]] = []
        self.first_call: Callable[[Any, tuple[Any, ...]], None] | None = None

    @property
    def n_weights(self) -> int:
        return self.info.n_weights

    @property
    def tokens_per_step(self) -> int:
        b, s = self.info.batch_shape
        return b * s

    @property
    def weights(self) -> dict[str, Any]:
        """The current weights (host arrays, or on a GPU device tensors, that the next steps
        overwrite: copy what you keep)."""
        return self.opt.params

    def _args(self, tokens: Any, targets: Any, scale: float) -> tuple[Any, ...]:
        import numpy as np

        weights = self.opt.params
        data = {"tokens": tokens, "targets": targets, SCALE: np.asarray(scale, np.float32)}
        return tuple(
            data[p.name] if p.name in (*DATA, SCALE) else weights[p.name] for p in self.info.params
        )

    def _loss_and_grads(self, args: tuple[Any, ...]) -> tuple[Any, dict[str, Any]]:
        """``value_and_grad`` on ``args``; on the host into the trainer's buffers."""

        from kinac.train.optim import specialised

        if self.parallel is not None:
            return self.parallel(args)  # type: ignore[no-any-return]
        if self._entry is None:
            dims = {d: self.info.dims[d] for d in self.info.dim_params}
            self._entry = specialised(self.vg, args, dims)
            if self.donate:
                lw = self._entry.entry.lowered
                self._outs = grads_into(lw.outputs, self._entry.wrt, self.opt)
            if self.target == "cuda":  # its bounds check waits for the loss read (step())
                self._entry.entry.defer_checks()
        if self.first_call is not None:  # --deterministic: the first call, kernel by kernel
            hook, self.first_call = self.first_call, None
            hook(self._entry.entry, args)
        if self._outs is None:
            return self._entry(*args)  # type: ignore[no-any-return]
        outs = self._entry.entry(*args, out=self._outs)  # host or GPU: into the given buffers
        return outs[0], dict(zip(self._entry.wrt, outs[1:], strict=True))

    def step(self) -> StepResult:
        """One training step on the next batch of the synthetic task."""
        from kinac.rt.host import OUTPUT_STATS
        from kinac.train.data import batch
        from kinac.train.optim import to_numpy

        b, s = self.info.batch_shape
        tokens, targets = batch(self.seed, self.step_count, b, s, self.info.vocab)
        before = OUTPUT_STATS.allocations + OUTPUT_STATS.scratch
        t0 = time.perf_counter()
        scale = self.scaler.scale if self.scaler is not None else self.fixed_scale
        loss, grads = self._loss_and_grads(self._args(tokens, targets, scale))
        # read before the update is queued, the step's one host wait: on a GPU the loss
        # entry's gather bounds check is deferred (its status word copied to pinned memory on
        # the stream), so the check after the read waits for nothing more, and a bad index
        # fails this step before its loss is reported or its update queued; the optimizer's
        # kernels then run while the host prepares the next step
        value = float(to_numpy(loss)) / scale
        if self.target == "cuda" and self.parallel is None:
            self._entry.entry.check()
        finite = True
        if self.scaler is not None and self.opt.mode == "inplace":
            finite = self.scaler.unscale_flat(self.opt, grads)  # the flat buffers, in place
        elif self.scaler is not None:
            grads, finite = self.scaler.unscale(grads)
        if finite:
            self.opt.step(grads)
        if self.scaler is not None:
            self.scaler.update(finite)
        dt = time.perf_counter() - t0
        self.allocations_per_step.append(OUTPUT_STATS.allocations + OUTPUT_STATS.scratch - before)
        self.step_count += 1
        result = StepResult(
            self.step_count, value, b * s, dt, not finite, scale if self.info.amp else None
        )
        for observe in self.observers:
            observe(self, result)
        return result

    def serve_metrics(self, port: int = 0) -> Any:
        """Prometheus metrics of this trainer's steps on ``http://127.0.0.1:port/metrics``
        (0: a free port; ``.url``) until the returned server's ``close()``
        (``kinac train --metrics-port``; names in ``docs/observability.md``)."""
        from kinac.train.observe import serve_metrics

        return serve_metrics(self, port)

    def steps(self, n: int) -> Iterator[StepResult]:
        """``n`` steps, one result each as it completes."""
        for _ in range(n):
            yield self.step()

    def run(self, n: int, on_step: Callable[[StepResult], None] | None = None) -> list[StepResult]:
        """``n`` steps; ``on_step`` sees each result (a progress bar, JSON lines)."""
        out = []
        for r in self.steps(n):
            out.append(r)
            if on_step is not None:
                on_step(r)
        return out


def train(workspace: str, entry: str, steps: int, **options: Any) -> list[StepResult]:
    """Train ``entry`` for ``steps`` steps (options as :class:`Trainer`); the step results."""
    return Trainer(workspace, entry, **options).run(steps)
