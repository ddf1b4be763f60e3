"""Sharding propagation: the stage between specialisation and lowering (spec section 7).

:mod:`kinac.shard.factors` describes each graph op as factors (Shardy style),
:mod:`kinac.shard.propagate` runs one generic fixpoint over those tables and plans the
collectives, :mod:`kinac.shard.model` holds the records the query returns. Design:
``docs/sharding.md``. This package reads the concrete Graph and never imports lowering.
"""

from kinac.shard.model import Collective, ShardPlan, TensorLayout
from kinac.shard.propagate import propagate

__all__ = ["Collective", "ShardPlan", "TensorLayout", "propagate"]
