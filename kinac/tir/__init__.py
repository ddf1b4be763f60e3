"""Concrete typed IR: an entry point specialised at concrete dims, calls inlined.

The checker produces it (``kinac.check``); lowering consumes it (``kinac.ir``).
"""

from kinac.tir.graph import Graph, Node, TType

__all__ = ["Graph", "Node", "TType"]
