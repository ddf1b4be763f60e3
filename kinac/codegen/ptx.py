"""LLVM IR -> PTX through llvmlite's NVPTX back end.

:func:`compile_ptx` is a pure function of the IR text, the architecture (``sm_90`` from
``kina.toml``'s ``target.arch``) and the optimisation level, so the PTX is a cacheable artifact
of the rule engine; the CUDA driver JIT-compiles it when the runtime loads it. LLVM's ``-O3``
pipeline runs first (GVN merges the row kernels' repeated loads, LICM hoists loop invariants);
the NVPTX back end then selects ``ld.global.nc`` for the kernels' read-only ``noalias`` inputs
and keeps the explicit 16-byte vector accesses. :func:`ptx_resources` runs ``ptxas -v`` where
it is installed (registers, spills) for tests and benchmarks.

llvmlite comes, imported and initialised, from :func:`kinac.codegen.llvm.binding`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kinac.codegen.llvm import LLVM_LOCK, binding
from kinac.codegen.target import NVPTX_TRIPLE

PTX_ISA = {"sm_80": "+ptx70", "sm_86": "+ptx71", "sm_89": "+ptx78", "sm_90": "+ptx80",
           "sm_90a": "+ptx80"}  # fmt: skip


def check_arch(arch: str) -> str:
    """``arch`` if it names a CUDA architecture kinac emits for, else a ValueError."""
    if not re.fullmatch(r"sm_\d{2,3}a?", arch):
        raise ValueError(f"target.arch must look like sm_90, got {arch!r}")
    return arch


_MACHINES: dict[tuple[str, int], Any] = {}


def optimize_nvptx(llvm_ir: str, arch: str = "sm_90", opt_level: int = 3) -> tuple[Any, Any]:
    """Parse, verify and optimise NVPTX IR; returns (module, target machine)."""
    llvm = binding("all")
    check_arch(arch)
    tm = _MACHINES.get((arch, opt_level))
    if tm is None:  # once per process, as the host's (kinac.codegen.llvm.shared_machine)
        target = llvm.Target.from_triple(NVPTX_TRIPLE)
        features = PTX_ISA.get(arch, "+ptx80")
        tm = target.create_target_machine(cpu=arch, features=features, opt=opt_level)
        _MACHINES[(arch, opt_level)] = tm
    with _naming_the_kernel(llvm_ir):
        mod = llvm.parse_assembly(llvm_ir)
        mod.triple = NVPTX_TRIPLE
        mod.data_layout = str(tm.target_data)
        mod.verify()
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    pto.loop_unrolling = opt_level >= 2
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    mod.verify()
    return mod, tm


def function_at_line(llvm_ir: str, line: int) -> str | None:
    """The function of ``llvm_ir`` whose body holds line ``line`` (1-based), if any."""
    for text in reversed(llvm_ir.splitlines()[: max(line, 0)]):
        if text.startswith("}"):
            return None
        m = re.match(r"define\b[^@]*@([\w.$]+)\(", text)
        if m:
            return m.group(1)
    return None


@contextmanager
def _naming_the_kernel(llvm_ir: str) -> Iterator[None]:
    """An LLVM parse or verify error names the kernel it is in (``<string>:LINE:COL`` or
    ``Function 'k3_map'``), so the internal compiler error reports it (:mod:`kinac.ice`)."""
    try:
        yield
    except Exception as e:
        text = str(e)
        m = re.search(r"<string>:(\d+):", text)
        name = function_at_line(llvm_ir, int(m.group(1))) if m else None
        if name is None:
            f = re.search(r"[Ff]unction '?@?([\w.$]+)'?", text)
            name = f.group(1) if f and f"@{f.group(1)}(" in llvm_ir else None
        if name is None:
            raise
        from kinac.ice import in_kernel

        with in_kernel(name):
            raise


def compile_ptx(llvm_ir: str, arch: str = "sm_90", opt_level: int = 3) -> str:
    """PTX text for ``llvm_ir`` (``nvptx64-nvidia-cuda``) on ``arch``."""
    with LLVM_LOCK:  # one thread at a time in LLVM (and in the shared target machine)
        mod, tm = optimize_nvptx(llvm_ir, arch, opt_level)
        return str(tm.emit_assembly(mod))


_HEADER = re.compile(r"^\.(version|target|address_size)\b")
_DEFINES = re.compile(r"^(?:\.(?:visible|weak|extern)\s+)?\.(?:entry|func|global|shared|const)\b")
_FUNCTION = re.compile(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)")


def _top_level(ptx: str) -> tuple[list[str], list[str]]:
    """``ptx`` split into its header directives and its top-level items (a function with its
    body, a declaration), each item with the comment lines just above it (the banner above
    the header is dropped)."""
    header: list[str] = []
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for line in ptx.splitlines():
        text = line.strip()
        if depth == 0 and _HEADER.match(text):
            header.append(text)
            current = []
            continue
        if depth == 0 and not text:
            continue
        current.append(line)
        if text.startswith("//"):
            continue
        depth += text.count("{") - text.count("}")
        if depth == 0 and (text.endswith("}") or text.endswith(";")):
            items.append("\n".join(current))
            current = []
    if current and header:
        items.append("\n".join(current))
    return header, items


def _defined_name(item: str) -> str | None:
    """The symbol a top-level PTX item defines (``None`` for a pure declaration): a function
    (after its return parameters, if any) or a variable (before its size and initialiser)."""
    first = next(line.strip() for line in item.splitlines() if not line.strip().startswith("//"))
    if first.startswith(".extern") or not _DEFINES.match(first):
        return None
    m = _FUNCTION.search(first)
    if m:
        return m.group(1)
    decl = re.sub(r"\[[^\]]*\]", "", re.split(r"[=;]", first)[0]).split()
    return decl[-1] if decl else None


def link_ptx(modules: Sequence[str], arch: str = "sm_90") -> str:
    """One PTX module holding every function of ``modules`` (each compiled alone, for
    ``arch``): one header, then each module's items in order, identical declarations once.

    Why: the CUDA driver JIT-compiles a module per load (its first load costs ~100 ms), so an
    entry keeps loading one module; its kernels are compiled (and cached) one by one, and
    PTX from one LLVM version and target differs between modules only in its items. Two
    modules defining one symbol differently is an internal error (kernels are named after
    their content, so it never happens by accident)."""
    if not modules:
        modules = [compile_ptx(f'target triple = "{NVPTX_TRIPLE}"\n', arch)]
    header: list[str] | None = None
    seen: set[str] = set()
    defined: dict[str, str] = {}
    body: list[str] = []
    for ptx in modules:
        head, items = _top_level(ptx)
        if header is None:
            header = head
        elif head != header:
            raise ValueError(f"PTX modules of different targets: {header} and {head}")
        for item in items:
            name = _defined_name(item)
            if name is not None and defined.setdefault(name, item) != item:
                raise ValueError(f"two PTX modules define {name} differently")
            if item in seen:
                continue
            seen.add(item)
            body.append(item)
    assert header is not None
    out = ["//", "// Generated by LLVM NVPTX Back-End, linked by kinac", "//", "", *header, ""]
    return "\n".join(out + [f"{item}\n" for item in body])


def ptxas_path() -> str | None:
    """The ``ptxas`` on PATH (or under ``$CUDA_HOME/bin``), if any."""
    exe = shutil.which("ptxas")
    if exe is None and os.environ.get("CUDA_HOME"):
        cand = os.path.join(os.environ["CUDA_HOME"], "bin", "ptxas")
        exe = cand if os.path.exists(cand) else None
    return exe


def ptx_resources(ptx: str, arch: str = "sm_90") -> dict[str, dict[str, int]]:
    """Per kernel: ``registers``, ``spill_stores``, ``spill_loads``, ``stack`` from ``ptxas -v``.

    Empty when ptxas is not installed; raises RuntimeError when ptxas rejects the PTX.
    """
    exe = ptxas_path()
    if exe is None:
        return {}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        p = subprocess.run(
            [exe, f"-arch={arch}", "-v", src, "-o", os.path.join(tmp, "k.cubin")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    if p.returncode != 0:
        raise RuntimeError(f"ptxas rejected the PTX:\n{p.stderr.strip()}")
    return parse_ptxas_report(p.stdout + p.stderr)


def parse_ptxas_report(text: str) -> dict[str, dict[str, int]]:
    """``ptxas -v``'s report, per entry function: ``registers``, ``spill_stores``,
    ``spill_loads``, ``stack``. Apart from :func:`ptx_resources` so a caller that runs ptxas
    itself (the attention tests, which also read its numbered notes) reads the same numbers."""
    out: dict[str, dict[str, int]] = {}
    current = ""
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        m = re.search(
            r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line
        )
        if m and current:
            out[current].update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        m = re.search(r"Used (\d+) registers", line)
        if m and current:
            out[current]["registers"] = int(m[1])
    return out
