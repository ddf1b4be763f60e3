"""Reverse-mode differentiation as a transform of the concrete Graph (issue 12).

:func:`value_and_grad` turns an entry's Graph (a scalar float loss) into one whose outputs are
the loss and its gradient with respect to chosen parameters; the VJP rules live with the
primitives (``vjp_rule`` in :mod:`kinac.check.prims`, ``vjp`` in :mod:`kinac.prims`). The
pipeline's ``grad_graph`` query (:mod:`kinac.pipeline_grad`) runs it before sharding and
lowering. Layering: like :mod:`kinac.shard`, it reads the concrete graph and the checker's
primitive table and never lowers or runs.
"""

from kinac.grad.transform import GradError, check_request, prune, value_and_grad

__all__ = ["GradError", "check_request", "prune", "value_and_grad"]
