"""Training on top of ``kinac.value_and_grad``: optimizers, mixed precision, the driver.

``kinac.train(workspace, entry, steps=...)`` and :class:`Trainer` train a ``kina.toml`` entry
whose defn returns a scalar loss (``docs/training.md``); ``kinac train`` is the same from the
command line. The update formulas are Kina (``std/optim.kina``, ``std/amp.kina``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["StepResult", "Trainer", "train"]


def __getattr__(name: str) -> Any:
    """``Trainer``, ``StepResult`` and ``train`` load the trainer (and numpy) on first use."""
    if name in __all__:
        from kinac.train import trainer

        return getattr(trainer, name)
    raise AttributeError(name)
