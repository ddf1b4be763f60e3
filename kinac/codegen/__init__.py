"""Code generation: LLVM IR text to native code (host object code today; NVPTX later).

:mod:`kinac.codegen.llvm` is the only module that imports llvmlite (lazily, inside its
functions), so importing :mod:`kinac.codegen` costs nothing.
"""

from kinac.codegen.target import TargetSpec

__all__ = ["TargetSpec"]
