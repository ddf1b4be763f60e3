"""GPU kernels as content-addressed units: each generated kernel cut out of its entry.

After the GPU fusion passes every generated ``kina.kernel`` (``impl`` not ``blas``) is cut out
of its entry into a module of its own, ``func.func @kernel`` over the kernel's inputs, printed
in xDSL's generic format. Nothing positional survives (its symbol becomes ``kernel``, values are
numbered by the printer), so the text is a canonical form of the kernel: its ops, shapes,
dtypes, layouts and fusion. Its BLAKE2b digest names the kernel's functions (``k_<digest>``,
``k_<digest>_<i>`` for a concat's parts), so identical kernels of different layers or entries
are one function and one compilation: the pipeline's ``gpu_kernel_llvm`` and
``gpu_kernel_ptx`` are keyed by the :class:`~kinac.artifacts.gpu.GpuKernel` record. A gather
writes its step number into the status buffer, so for gathers the step is part of the key.

:func:`lower_gpu_kernel` parses the text back and generates the kernel's LLVM functions
(:class:`~kinac.ir.gpu.kernels.KernelGen`); :func:`kernel_module` puts several kernels'
functions into one LLVM module (one header, declarations merged). A new kind of kernel whose
text is not a ``kina.kernel`` (a hand-written one) adds its generator to :data:`SOURCES`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from xdsl.dialects.builtin import StringAttr

from kinac.artifacts.gpu import GpuKernel, GpuKernelCode, GpuLaunch
from kinac.ir.dialects import kina_struct as st
from kinac.ir.gpu.emit import add_declaration
from kinac.ir.gpu.kernels import KernelGen
from kinac.ir.gpu.stitch import gpu_kernel_symbol
from kinac.ir.gpu.stitch import kernel_module as kernel_module
from kinac.ir.kernel_structure import kernel_structure
from kinac.ir.kernel_text import CANONICAL_NAME as CANONICAL_NAME
from kinac.ir.kernel_text import canonical_text, kernel_op


def canonical_gpu_kernel(k: st.KernelOp, step: int) -> GpuKernel:
    """``k`` cut out of its entry: its canonical text and the symbol derived from it."""
    if k.kind.data == "attention":  # the generated flash kernel: keyed by its parameters
        from kinac.ir.gpu.attention_lower import canonical_attention_kernel

        return canonical_attention_kernel(k)
    if k.impl.data == "tc":  # the generated tensor-core GEMM: keyed by its parameters
        from kinac.ir.gpu.small_gemm import canonical_small_gemm

        return canonical_small_gemm(k)
    # its "gpu" attribute is a decision printed by gpu-kernels-to-nvvm, not input
    text = canonical_text(k, _OPS, drop_attr="gpu")
    status_step = step if k.kind.data == "gather" else 0
    return GpuKernel(gpu_kernel_symbol(text, status_step), text, status_step)


# The op each canonical text was printed from in this process (as the host's,
# kinac.ir.host.kernels._OPS): _lower_kina clones it instead of parsing the text back, which
# was ~85% of lowering a kernel (an edit's new kernels are printed by the process that lowers
# them). The text is the op's generic form: parsing it gives the same op (test).
_OPS: dict[str, st.KernelOp] = {}


def structure(k: st.KernelOp, step: int) -> Hashable:
    """The kernel's structure (:mod:`kinac.ir.kernel_structure`); its ``gpu`` launch notes are
    not part of its canonical text."""
    return kernel_structure(k, step, ignored_attr="gpu")


def _lower_kina(kernel: GpuKernel, flavour: str, reuse: bool = True) -> GpuKernelCode:
    """A ``kina.kernel`` text: parsed back (or the op it was printed from cloned, ``reuse``),
    its functions generated as for the whole entry."""
    k = kernel_op(kernel.text, _OPS.get(kernel.text) if reuse else None)
    k.properties["sym"] = StringAttr(kernel.symbol)
    gen = KernelGen(k, kernel.status_step, flavour)
    fns = gen.generate()
    decls: dict[str, str] = {}
    globals_: list[str] = []
    for f in fns:
        globals_.extend(f.builder.globals)
        for decl in f.builder.declares.values():
            add_declaration(decls, decl)
    body = "\n".join([*globals_, *(f.text + "\n" for f in fns)])
    launches = tuple(GpuLaunch(f.name, f.grid, f.block, (), f.vec, f.note) for f in fns)
    return GpuKernelCode(
        kernel.symbol, launches, gen.has_status, tuple(sorted(decls.values())), body
    )


# source -> generator of a kernel's LLVM functions (``flavour``: "nvptx", or "emu" for the host)
def _lower_attention(kernel: GpuKernel, flavour: str) -> GpuKernelCode:
    from kinac.ir.gpu.attention_lower import lower_attention_kernel

    return lower_attention_kernel(kernel, flavour)


def _lower_small_gemm(kernel: GpuKernel, flavour: str) -> GpuKernelCode:
    from kinac.ir.gpu.small_gemm_kernel import lower_small_gemm

    return lower_small_gemm(kernel, flavour)


SOURCES: dict[str, Callable[[GpuKernel, str], GpuKernelCode]] = {
    "kina": _lower_kina,
    "attention": _lower_attention,
    "small_gemm": _lower_small_gemm,
}


def lower_gpu_kernel(kernel: GpuKernel, flavour: str = "nvptx") -> GpuKernelCode:
    """One canonical kernel to its LLVM functions and their launch geometry."""
    gen = SOURCES.get(kernel.source)
    if gen is None:
        raise ValueError(f"no generator for GPU kernels of source {kernel.source!r}")
    return gen(kernel, flavour)
