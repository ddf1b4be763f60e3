"""The trainer's options checked before anything is built: ``Trainer(...)`` from Python gets the
usage errors ``kinac train`` gets from its flags (argparse checks the command line's types), never
a ``TypeError`` from a comparison or a ``ValueError`` from numpy's seeding deep in the first step.

A fixed loss scale is checked as the value the loss defn receives: a rank-0 ``f32``
(``scale``), whose reciprocal unscales the gradients in their dtype. A scale that is finite
in Python but not in f32 (``1e39``), or whose reciprocal is not (``1e-45``), made every step
non-finite: each was skipped and the run "trained" without ever updating a weight.
"""

from __future__ import annotations

import math
from typing import Any

from kinac.errors import KinaUsageError

F32_MAX = 3.4028234663852886e38  # the largest finite f32
F32_TINY = 1.1754943508222875e-38  # the smallest normal f32


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _is_count(x: Any, least: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= least


def check_options(
    *,
    lr: Any,
    seed: Any,
    weight_decay: Any,
    growth_interval: Any,
    simulate: Any,
) -> None:
    """The numeric options of :class:`kinac.train.trainer.Trainer`, or a usage error naming
    the bad one (the messages ``kinac train``'s flags give)."""
    if not _is_number(lr) or not 0 < lr < math.inf:
        raise KinaUsageError(f"the learning rate must be a positive number, got {lr!r}")
    if not _is_number(weight_decay) or not 0 <= weight_decay < math.inf:
        raise KinaUsageError(f"weight decay must be a number >= 0, got {weight_decay!r}")
    if not _is_count(seed, 0):
        raise KinaUsageError(f"the seed must be an integer >= 0, got {seed!r}")
    if not _is_count(growth_interval, 1):
        raise KinaUsageError(
            f"growth_interval must be an integer >= 1 (clean steps before the loss scale "
            f"grows), got {growth_interval!r}"
        )
    if simulate is not None and not _is_count(simulate, 1):
        raise KinaUsageError(f"--simulate takes a device count >= 1, got {simulate!r}")


def check_fixed_scale(scale: Any) -> float:
    """A fixed loss scale as a float, or a usage error: a positive number that is finite as
    the f32 the loss defn receives, with a reciprocal that is finite in f32 too."""
    if not _is_number(scale) or not 0 < scale < math.inf:
        raise KinaUsageError(f"loss scale {scale!r}: 'dynamic' or a positive number")
    value = float(scale)
    if not F32_TINY <= value <= F32_MAX:
        raise KinaUsageError(
            f"loss scale {scale!r} is outside f32's normal range [{F32_TINY:.3g}, "
            f"{F32_MAX:.3g}]: the loss defn receives it as an f32 and the gradients are "
            "multiplied by its reciprocal, so every step would be non-finite (and skipped)"
        )
    return value
