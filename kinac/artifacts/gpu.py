"""The records that leave the GPU lowering: kernels, cuBLAS calls, steps and the entry.

Plain data (``@record``), no xDSL: the CUDA runtime (:mod:`kinac.rt.cuda.entry`) reads them
without importing the compiler. Buffers are named as in the host's records: ``param{i}``,
``out{j}``, ``arena+{offset}`` (bytes into the entry's scratch arena) and ``status``.
"""

from __future__ import annotations

from kinac.artifacts.gemm_algo import GemmAlgo
from kinac.artifacts.host import BufferSpec
from kinac.rules.codec import record

GPU_LOWERING_VERSION = 1


@record
class GpuLaunch:
    """One kernel launch: the function in the PTX module, its grid and its buffers.

    ``grid`` is the grid's x extent; ``grid_yz`` its y and z (the fused attention's heads and
    batch); ``shared`` the bytes of dynamic shared memory (above 48 KiB the runtime raises
    the function's limit first). The block size is also the kernel's launch bound
    (``.maxntid`` in its PTX) where it declares one.
    """

    function: str
    grid: int
    block: int
    args: tuple[str, ...]  # buffer names, in the kernel's parameter order
    vec: int = 1
    note: str = ""
    grid_yz: tuple[int, int] = (1, 1)
    shared: int = 0


@record
class GemmOperand:
    """A matrix operand of a cuBLAS call: its buffer, per-batch element offsets, row-major
    leading dimension and whether it is stored transposed."""

    buf: str
    offsets: tuple[int, ...]
    ld: int
    trans: bool = False
    # per-batch buffers of a ``pointers`` call (``offsets[i]`` into ``bufs[i]``); empty: every
    # batch in ``buf``. Projections sharing an input are one call over their own weight and
    # output buffers (:mod:`kinac.ir.gpu.gemm_group`)
    bufs: tuple[str, ...] = ()


@record
class GpuGemm:
    """``C[b] = A[b] @ B[b]`` (row-major, per batch ``b``), plus an optional epilogue.

    ``mode``: ``single`` (one matrix), ``strided`` (offsets in arithmetic progression: a
    strided-batched call) or ``pointers`` (arbitrary offsets: a pointer-array batched call,
    as for grouped-query attention). ``epilogue``: ``""``, ``bias`` (a vector over the last
    dim, cuBLASLt), or ``residual`` (``C += R``, a tensor of the output's shape,
    cuBLASLt with ``beta = 1``); ``epi`` is that operand's buffer.
    """

    dtype: str
    out_dtype: str
    m: int
    n: int
    k: int
    batch: int
    a: GemmOperand
    b: GemmOperand
    c: GemmOperand
    mode: str
    epilogue: str = ""
    epi: str = ""
    # the autotuned way to issue it (kinac/pipeline_gemm_tune.py); None: as always
    algo: GemmAlgo | None = None

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * self.batch


@record
class GpuStep:
    """One ``kina.kernel`` of the entry: generated launches or one library call."""

    sym: str
    kind: str
    impl: str  # "kernel" | "cublas" | "cublasLt"
    dtype: str
    shape: tuple[int, ...]
    reads: tuple[str, ...]
    writes: str
    launches: tuple[GpuLaunch, ...] = ()
    gemm: GpuGemm | None = None
    bytes_moved: int = 0  # fewest bytes this step must move (inputs read once, output written)
    aux: tuple[int, ...] = ()  # gather: the index tensor's shape
    # the buffers the step writes besides ``writes``: a grouped cuBLAS call's further outputs
    # in its batch order (arena temporaries, kinac/ir/gpu/gemm_group.py), a fused optimizer
    # step's state buffers
    also_writes: tuple[str, ...] = ()


@record
class GpuKernel:
    """One generated GPU kernel as a content-addressed unit: the key of the per-kernel queries
    ``gpu_kernel_llvm`` and ``gpu_kernel_ptx`` (issue 19; docs/architecture.md).

    ``text`` is a canonical form of the kernel, independent of its position, layer and entry:
    for ``source = "kina"``, its ``kina.kernel`` op after the GPU fusion passes cut out of the
    entry into a ``func.func @kernel`` of its inputs, in xDSL's generic format. ``symbol``
    (``k_<digest>`` of the key) names its functions in the PTX, so identical kernels of
    different layers or entries are one function and one compilation. A gather writes its
    step number into the status buffer (its error names the step): ``status_step`` is part of
    its key (0 for every other kernel). ``source`` names the generator that reads ``text``:
    another kind of kernel (hand-written, say) keys itself by its own canonical text.
    """

    symbol: str
    text: str
    status_step: int = 0
    source: str = "kina"


@record
class GpuKernelCode:
    """A :class:`GpuKernel` lowered to LLVM IR: what ``gpu_kernel_llvm`` returns.

    ``launches`` hold each function's geometry (``args`` empty: the entry names the buffers
    of each step that runs the kernel); ``declares`` the declarations its functions need
    (merged with other kernels' when a module holds several); ``body`` its globals and
    function definitions; ``has_status`` whether its functions take the status buffer last.
    """

    symbol: str
    launches: tuple[GpuLaunch, ...]
    has_status: bool
    declares: tuple[str, ...]
    body: str


@record
class GpuLoweredEntry:
    """An entry lowered for the GPU: LLVM IR for NVPTX and its launch plan.

    Params and outputs carry their placement (``param_devices``, ``output_devices``: ``cpu``
    or ``cuda:N``): a ``to-host`` output is copied back, a host param copied in.
    """

    name: str
    llvm_ir: str
    params: tuple[BufferSpec, ...]
    outputs: tuple[BufferSpec, ...]
    param_devices: tuple[str, ...]
    output_devices: tuple[str, ...]
    arena_bytes: int
    status_slots: int
    steps: tuple[GpuStep, ...]
    functions: tuple[str, ...]
    version: int = GPU_LOWERING_VERSION
    kernels: tuple[GpuKernel, ...] = ()  # the distinct generated kernels, in order of first use

    @property
    def has_status(self) -> bool:
        return any(s.kind == "gather" for s in self.steps)
