"""LLVM through llvmlite: optimise and compile LLVM IR text, and load object code in-process.

The one module of kinac that imports llvmlite (inside each function, so importing it is free);
:mod:`kinac.codegen.ptx` gets it, initialised, from :func:`binding`.
:func:`compile_object` is a pure function of its arguments (IR text, target, optimisation
level) returning ELF object bytes: a cacheable artifact. :func:`jit_load` links such bytes into
the process with MCJIT's RuntimeDyld, resolving external symbols (BLAS, libm) to addresses the
caller supplies or to the process's own symbols.
"""

from __future__ import annotations

import threading
from typing import Any

from kinac.codegen.target import TargetSpec

_INIT = threading.Lock()
_READY: set[str] = set()
LLVM_LOCK = threading.RLock()  # llvmlite shares one LLVM context: one thread in it at a time


def binding(targets: str = "native") -> Any:
    """``llvmlite.binding`` with the code generators of ``targets`` initialised (once each).

    ``native``: this machine's target (host code); ``all``: every target LLVM was built
    with (:mod:`kinac.codegen.ptx` needs NVPTX).
    """
    import llvmlite.binding as llvm

    with _INIT:
        if targets not in _READY:
            if targets == "all":
                llvm.initialize_all_targets()
                llvm.initialize_all_asmprinters()
            else:
                llvm.initialize_native_target()
                llvm.initialize_native_asmprinter()
            _READY.add(targets)
    return llvm


def _llvm() -> Any:
    return binding("native")


# LLVM's tuning for AVX-512 server CPUs since Skylake keeps vectorised loops at 256 bits (the
# first such CPUs dropped their clock under 512-bit code). Sapphire/Emerald Rapids barely do: on
# this project's Emerald Rapids machine the small block's softmax and SwiGLU kernels took 9-13%
# less time at 512 bits (one thread, per-kernel profile; the memory-bound maps: no change).
_WIDE = ",-prefer-256-bit"


def wide_vectors(features: str) -> str:
    """``features`` with 512-bit vectorisation preferred where the CPU has AVX-512."""
    flags = features.split(",")
    if "+avx512f" in flags and "-evex512" not in flags and _WIDE[1:] not in flags:
        return features + _WIDE
    return features


def host_target() -> TargetSpec:
    """The machine this process runs on, with all its CPU features (AVX2, FMA, ...), and
    loops vectorised at the CPU's full vector width (:func:`wide_vectors`)."""
    llvm = _llvm()
    features = wide_vectors(llvm.get_host_cpu_features().flatten())
    return TargetSpec(llvm.get_process_triple(), llvm.get_host_cpu_name(), features)


def _machine(target: TargetSpec, opt_level: int) -> Any:
    """A target machine for code that MCJIT links into this process.

    The large code model with static relocations addresses every symbol, constant pool and
    libm function through a 64-bit absolute address. The default (small) model assumes the
    object's sections and the functions it calls lie within 2 GiB of each other, and in a big
    process (PyTorch, CUDA libraries, hundreds of JIT'd entries) they need not: RuntimeDyld
    then aborts the process (``isInt<32>(RealOffset)``), as seen on the H200 machine.
    """
    llvm = _llvm()
    t = llvm.Target.from_triple(target.triple)
    return t.create_target_machine(
        cpu=target.cpu, features=target.features, opt=opt_level, reloc="static", codemodel="large"
    )


_MACHINES: dict[tuple[TargetSpec, int], Any] = {}


def shared_machine(target: TargetSpec, opt_level: int) -> Any:
    """The target machine that compiles for (``target``, ``-O<opt_level>``), made once per
    process (not MCJIT's: it owns the one it is given). A new machine's first object
    initialises its subtarget from the ~100 feature flags: ~2 ms of every compile, and an
    edit's build compiles 3-5 small modules (its wrapper and piece function at -O0, its new
    kernels); a machine used before emits the same bytes (tests/test_codegen_machine.py)."""
    key = (target, opt_level)
    tm = _MACHINES.get(key)
    if tm is None:
        tm = _MACHINES[key] = _machine(target, opt_level)
    return tm


def optimize_ir(llvm_ir: str, target: TargetSpec, opt_level: int = 3) -> Any:
    """Parse, verify and optimise IR for ``target``: LLVM's ``-O<opt_level>`` pipeline."""
    llvm = _llvm()
    tm = shared_machine(target, opt_level)
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pto.loop_vectorization = opt_level >= 2
    pto.slp_vectorization = opt_level >= 2
    pto.loop_unrolling = False  # full unrolls of small loops: 10x compile time, no speed
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return mod, tm


def compile_object(llvm_ir: str, target: TargetSpec, opt_level: int = 3) -> bytes:
    """Object code (ELF bytes) for ``llvm_ir`` on ``target`` after ``-O<opt_level>``."""
    with LLVM_LOCK:
        mod, tm = optimize_ir(llvm_ir, target, opt_level)
        return bytes(tm.emit_object(mod))


def assembly(llvm_ir: str, target: TargetSpec, opt_level: int = 3) -> str:
    """The optimised machine assembly (for inspection: is this loop vectorised?)."""
    with LLVM_LOCK:
        mod, tm = optimize_ir(llvm_ir, target, opt_level)
        return str(tm.emit_assembly(mod))


class JitImage:
    """Object code linked into this process; keeps its memory alive while referenced."""

    def __init__(self, engine: Any, addresses: dict[str, int]) -> None:
        self._engine = engine
        self.addresses = addresses


def jit_load(
    object_code: bytes | tuple[bytes, ...], symbols: dict[str, int], exports: tuple[str, ...]
) -> JitImage:
    """Link ``object_code`` (one object, or several: an entry's wrapper and its per-kernel
    objects, which resolve each other's symbols) in-process; ``symbols`` binds its external
    names to addresses.

    Names not in ``symbols`` resolve against the process (libm's ``tanh``, ``erf``...).
    Returns the addresses of ``exports``.
    """
    objects = (object_code,) if isinstance(object_code, bytes) else object_code
    llvm = _llvm()
    with LLVM_LOCK:
        for name, addr in symbols.items():
            llvm.add_symbol(name, addr)
        tm = _machine(host_target(), 3)
        engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), tm)
        for obj in objects:
            engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        engine.finalize_object()
        addrs = {e: engine.get_function_address(e) for e in exports}
    missing = [e for e, a in addrs.items() if not a]
    if missing:
        raise RuntimeError(f"object code does not define {missing}")
    return JitImage(engine, addrs)
