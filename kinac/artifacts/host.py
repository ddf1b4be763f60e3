"""Host artifacts: a lowered entry, its buffer plan and steps, and its runtime status codes.

Plain data (``@record``), no xDSL: the runtime reads them without importing the compiler.
"""

from __future__ import annotations

from kinac.rules.codec import record

LOWERING_VERSION = 1
GATHER_OOB = 1  # status code written by a gather kernel for an index outside [0, V)


@record
class BufferSpec:
    """One argument buffer of an entry: a param or an output, C-contiguous."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@record
class Step:
    """One kernel of the entry, in execution order.

    ``kind`` is the loop structure (``map``, ``reduce``, ``softmax``, ``gather``, ``concat``,
    ``matmul``); ``impl`` is ``loops`` (generated code) or ``blas`` (a library call). ``aux``
    holds kind-specific integers (for ``gather``: the index tensor's shape, to report errors).
    """

    sym: str
    kind: str
    impl: str
    dtype: str
    shape: tuple[int, ...]
    reads: tuple[str, ...]
    writes: str
    aux: tuple[int, ...] = ()


@record
class HostKernel:
    """One fused kernel in canonical form (:mod:`kinac.ir.host.kernels`): ``text`` is its body
    cut out of its entry (xDSL generic format, nothing positional), ``symbol`` the function
    name derived from it, ``status_step`` the step a gather kernel reports errors as (0 for
    others). Compiled once per distinct kernel, whatever entry or layer it comes from."""

    symbol: str
    text: str
    status_step: int


@record
class KernelCode:
    """A kernel's LLVM IR (defining ``symbol``) and the external functions it calls."""

    symbol: str
    llvm_ir: str
    library_calls: tuple[str, ...]


@record
class LoweredEntry:
    """An entry point lowered to LLVM IR, with what the runtime needs to call it.

    The compiled code is called as ``void symbol(void **argv)`` with ``argv`` holding the params,
    then the outputs, then a scratch arena of ``arena_bytes`` and a status buffer of
    ``status_slots`` int64s (zeroed; a nonzero first slot reports a runtime error, see
    :mod:`kinac.rt.host`). ``library_calls`` are the external symbols the code needs bound.
    When ``kernels`` is not empty, ``llvm_ir`` is only the wrapper: each kernel is its own
    object (the pipeline's per-kernel queries), loaded beside it. Each distinct kernel is
    stored once (``kernel_set``, in order of first use) and each step names its own by index
    (``kernel_index``): the 32 layers of a model repeat a dozen kernels 576 times, whose texts
    were 544 KB of the 739 KB record, encoded and stored at every build of the entry.
    """

    name: str
    symbol: str
    llvm_ir: str
    params: tuple[BufferSpec, ...]
    outputs: tuple[BufferSpec, ...]
    arena_bytes: int
    status_slots: int
    steps: tuple[Step, ...]
    library_calls: tuple[str, ...]
    version: int = LOWERING_VERSION
    kernel_set: tuple[HostKernel, ...] = ()  # empty: ``llvm_ir`` holds every kernel
    kernel_index: tuple[int, ...] = ()  # per step: its kernel in ``kernel_set``
    kernel_launch: tuple[tuple[int, int] | None, ...] = ()  # per kernel_set: pool (extent, tasks)
    # when not empty, ``llvm_ir`` calls one function per piece, each its own module here
    piece_code: tuple[str, ...] = ()

    @property
    def kernels(self) -> tuple[HostKernel, ...]:
        """Each step's kernel (a kernel that several steps run appears at each)."""
        return tuple(self.kernel_set[i] for i in self.kernel_index)
