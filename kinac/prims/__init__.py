"""Primitive definitions that every stage reads: one entry per primitive, written once.

Why a package of its own: the checker (``kinac.check``), the reference interpreter
(``kinac.tir.interp``) and the lowerings (``kinac.ir``) all need a primitive's meaning, and the
checker may not import lowering. So the neutral facts (name, arity, traits, the scalar formula,
the empty sharding and VJP slots) live here, in plain Python with no heavy import, and each
stage derives its part from them: the checker registers a typing rule per entry, the folder and
the interpreter evaluate the formula on Python floats and numpy arrays, and the host and GPU
emitters evaluate the same formula over their own base operations. See ``docs/architecture.md``,
"Adding a primitive".
"""

from kinac.prims.elementwise import ELEMENTWISE, Elementwise, apply, lookup
from kinac.prims.scalar import Algebra, S

__all__ = ["ELEMENTWISE", "Algebra", "Elementwise", "S", "apply", "lookup"]
