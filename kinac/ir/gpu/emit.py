"""A small builder of LLVM IR text for GPU kernels (NVPTX, or a host emulation of it).

The GPU lowering writes LLVM IR as text rather than through xDSL's ``llvm`` dialect: kernels
need NVVM intrinsics (thread indices, warp shuffles, barriers), address spaces, vector loads
and ``ptx_kernel`` functions, which are one line each here. Values are :class:`Val` (an SSA
name or a literal, and its LLVM type). Straight-line code is memoised by the caller; LLVM's
``-O3`` does the rest (GVN, LICM, scheduling), so the builder stays naive.

Two *flavours* share every line but the target-specific ones: ``nvptx`` (global pointers in
address space 1, shared memory in 3, ``llvm.nvvm.*`` intrinsics) and ``emu``, the same kernel
for the host CPU with those intrinsics turned into calls of ``kemu_*`` functions, so the tests
can run generated kernels on a machine without a GPU (``tests/gpu_support.py``).
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kinac.codegen.target import NVPTX_TRIPLE as NVPTX_TRIPLE

NVPTX_LAYOUT = (
    "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"
)
FLAVOURS = ("nvptx", "emu")


@dataclass(frozen=True)
class Val:
    """An SSA value or literal (``ref``) of LLVM type ``ty``."""

    ref: str
    ty: str

    def __str__(self) -> str:
        return f"{self.ty} {self.ref}"


Ix = int | Val


def float_literal(v: float, ty: str) -> str:
    """LLVM's spelling of a float constant of type ``ty`` (``float`` literals are doubles
    holding a value exactly representable in f32)."""
    if ty == "float" and v == v:
        try:
            v = struct.unpack("<f", struct.pack("<f", v))[0]
        except OverflowError:
            v = math.copysign(math.inf, v)
    bits = struct.unpack("<Q", struct.pack("<d", v))[0]
    return f"0x{bits:016X}"


class Builder:
    """Appends instructions to one function; tracks the current basic block."""

    def __init__(self, flavour: str = "nvptx") -> None:
        assert flavour in FLAVOURS, flavour
        self.flavour = flavour
        self.lines: list[str] = []
        self.n = 0
        self.block = "entry"
        self.declares: dict[str, str] = {}  # function name -> its one declaration
        self.globals: list[str] = []
        # fmul results by register: (the product, its two factors), for Scalars.fbin's
        # explicit contraction (kinac.ir.gpu.scalar: which multiply an add fuses is ours)
        self.products: dict[str, tuple[Val, Val, Val]] = {}
        # (register, dtype) pairs known to hold a value exact in that f16/bf16 dtype (loads,
        # roundings): Scalars.round skips them (the bf16 rounding is ~10 instructions)
        self.exact: set[tuple[str, str]] = set()

    # ---- basics -------------------------------------------------------------------------
    @property
    def gptr(self) -> str:
        """The type of a pointer to global memory."""
        return "ptr addrspace(1)" if self.flavour == "nvptx" else "ptr"

    @property
    def sptr(self) -> str:
        """The type of a pointer to shared memory."""
        return "ptr addrspace(3)" if self.flavour == "nvptx" else "ptr"

    def fresh(self, prefix: str = "t") -> str:
        self.n += 1
        return f"%{prefix}{self.n}"

    def emit(self, rhs: str, ty: str, prefix: str = "t") -> Val:
        name = self.fresh(prefix)
        self.lines.append(f"  {name} = {rhs}")
        return Val(name, ty)

    def void(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")
        self.block = name

    def new_label(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def declare(self, decl: str) -> None:
        """Declare a function once; a second, different declaration of the same name is a bug
        of the emitter (LLVM would reject the module: ``invalid redefinition``)."""
        add_declaration(self.declares, decl)

    # ---- constants ----------------------------------------------------------------------
    @staticmethod
    def ci(v: int, ty: str = "i32") -> Val:
        if ty == "i1":
            return Val("true" if v else "false", ty)
        return Val(str(int(v)), ty)

    @staticmethod
    def cf(v: float, ty: str = "float") -> Val:
        return Val(float_literal(float(v), ty), ty)

    # ---- integer index arithmetic (folds constants) ---------------------------------------
    def ival(self, v: Ix, ty: str) -> Val:
        return self.ci(v, ty) if isinstance(v, int) else v

    def iadd(self, a: Ix, b: Ix, ty: str) -> Ix:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(a, int) and a == 0:
            return b
        if isinstance(b, int) and b == 0:
            return a
        x, y = self.ival(a, ty), self.ival(b, ty)
        return self.emit(f"add nsw {ty} {x.ref}, {y.ref}", ty)

    def imul(self, a: Ix, c: int, ty: str) -> Ix:
        if isinstance(a, int):
            return a * c
        if c == 0:
            return 0
        if c == 1:
            return a
        return self.emit(f"mul nsw {ty} {a.ref}, {c}", ty)

    def idiv(self, a: Ix, c: int, ty: str) -> Ix:
        if isinstance(a, int):
            return a // c
        if c == 1:
            return a
        return self.emit(f"udiv {ty} {a.ref}, {c}", ty)

    def imod(self, a: Ix, c: int, ty: str) -> Ix:
        if isinstance(a, int):
            return a % c
        if c == 1:
            return 0
        return self.emit(f"urem {ty} {a.ref}, {c}", ty)

    def icmp(self, pred: str, a: Ix, b: Ix, ty: str) -> Val:
        x, y = self.ival(a, ty), self.ival(b, ty)
        return self.emit(f"icmp {pred} {ty} {x.ref}, {y.ref}", "i1")

    def select(self, c: Val, a: Val, b: Val) -> Val:
        if c.ref == "true":
            return a
        if c.ref == "false":
            return b
        return self.emit(f"select i1 {c.ref}, {a.ty} {a.ref}, {b.ty} {b.ref}", a.ty)

    def and1(self, a: Val, b: Val) -> Val:
        if a.ref == "true":
            return b
        if b.ref == "true":
            return a
        return self.emit(f"and i1 {a.ref}, {b.ref}", "i1")

    def call(self, name: str, ret: str, args: Sequence[Val], decl_args: str = "") -> Val:
        params = decl_args or ", ".join(a.ty for a in args)
        self.declare(f"declare {ret} @{name}({params})")
        text = f"call {ret} @{name}({', '.join(str(a) for a in args)})"
        if ret == "void":
            self.void(text)
            return Val("", "void")
        return self.emit(text, ret)

    # ---- GPU intrinsics -------------------------------------------------------------------
    def sreg(self, which: str) -> Val:
        """``tid.x``, ``ctaid.x``, ``ntid.x`` or ``nctaid.x`` as an i32."""
        if self.flavour == "nvptx":
            return self.call(f"llvm.nvvm.read.ptx.sreg.{which}", "i32", [])
        code = {"tid.x": 0, "ctaid.x": 1, "ntid.x": 2, "nctaid.x": 3}[which]
        return self.call("kemu_sreg", "i32", [self.ci(code)])

    def shfl_xor(self, v: Val, offset: int) -> Val:
        """``shfl.sync.bfly`` over the full warp: the value of lane ``lane ^ offset``."""
        if v.ty == "float" or v.ty == "i32":
            suffix = "f32" if v.ty == "float" else "i32"
            if self.flavour == "nvptx":
                args = [self.ci(-1), v, self.ci(offset), self.ci(31)]
                return self.call(f"llvm.nvvm.shfl.sync.bfly.{suffix}", v.ty, args)
            return self.call(f"kemu_shfl_{suffix}", v.ty, [v, self.ci(offset)])
        if v.ty in ("double", "i64"):
            pair = self.emit(f"bitcast {v} to <2 x i32>", "<2 x i32>")
            halves = []
            for k in range(2):
                h = self.emit(f"extractelement <2 x i32> {pair.ref}, i32 {k}", "i32")
                halves.append(self.shfl_xor(h, offset))
            p = self.emit(
                f"insertelement <2 x i32> poison, i32 {halves[0].ref}, i32 0", "<2 x i32>"
            )
            p = self.emit(
                f"insertelement <2 x i32> {p.ref}, i32 {halves[1].ref}, i32 1", "<2 x i32>"
            )
            return self.emit(f"bitcast <2 x i32> {p.ref} to {v.ty}", v.ty)
        if v.ty == "i1":
            w = self.emit(f"zext i1 {v.ref} to i32", "i32")
            r = self.shfl_xor(w, offset)
            return self.emit(f"icmp ne i32 {r.ref}, 0", "i1")
        raise NotImplementedError(f"shuffle of {v.ty}")

    def barrier(self) -> None:
        if self.flavour == "nvptx":
            self.call("llvm.nvvm.barrier0", "void", [])
        else:
            self.call("kemu_barrier", "void", [])

    def shared_array(self, name: str, ty: str, n: int) -> str:
        """A kernel-private shared-memory array; returns its global name."""
        space = "addrspace(3) " if self.flavour == "nvptx" else ""
        init = "undef" if self.flavour == "nvptx" else "zeroinitializer"
        self.globals.append(f"@{name} = internal {space}global [{n} x {ty}] {init}, align 16")
        return f"@{name}"

    # ---- memory ---------------------------------------------------------------------------
    def gep(self, ty: str, base: Val, off: Ix, ix: str, space: str = "g") -> Val:
        pty = self.gptr if space == "g" else self.sptr
        if isinstance(off, int) and off == 0:
            return base
        o = self.ival(off, ix)
        return self.emit(f"getelementptr inbounds {ty}, {pty} {base.ref}, {ix} {o.ref}", pty)

    def load(self, ty: str, ptr: Val, align: int) -> Val:
        return self.emit(f"load {ty}, {ptr.ty} {ptr.ref}, align {align}", ty)

    def store(self, v: Val, ptr: Val, align: int) -> None:
        self.void(f"store {v}, {ptr.ty} {ptr.ref}, align {align}")

    def extract(self, vec: Val, i: int, elem: str) -> Val:
        return self.emit(f"extractelement {vec}, i32 {i}", elem)

    def pack(self, vals: Sequence[Val]) -> Val:
        ty = f"<{len(vals)} x {vals[0].ty}>"
        acc = Val("poison", ty)
        for i, v in enumerate(vals):
            acc = self.emit(f"insertelement {ty} {acc.ref}, {v}, i32 {i}", ty)
        return acc

    # ---- control flow -----------------------------------------------------------------------
    def if_then(self, cond: Val, body: Callable[[], None]) -> None:
        """``if cond: body()`` (effects only: values made inside do not escape)."""
        if cond.ref == "false":
            return
        if cond.ref == "true":
            body()
            return
        then, done = self.new_label("then"), self.new_label("endif")
        self.void(f"br i1 {cond.ref}, label %{then}, label %{done}")
        self.label(then)
        body()
        self.void(f"br label %{done}")
        self.label(done)

    def if_values(
        self, cond: Val, body: Callable[[], list[Val]], otherwise: Sequence[Val]
    ) -> list[Val]:
        """``body()`` if ``cond`` else ``otherwise``, as phis: a rarely taken path costs a
        branch, not its instructions (values made inside ``body`` must not be used after)."""
        pre = self.block
        then, done = self.new_label("then"), self.new_label("endif")
        self.void(f"br i1 {cond.ref}, label %{then}, label %{done}")
        self.label(then)
        vals = body()
        end = self.block
        self.void(f"br label %{done}")
        self.label(done)
        return [
            self.emit(f"phi {v.ty} [ {v.ref}, %{end} ], [ {o.ref}, %{pre} ]", v.ty)
            for v, o in zip(vals, otherwise, strict=True)
        ]

    def loop(
        self, n: Ix, ix: str, inits: Sequence[Val], body: Callable[[Val, list[Val]], list[Val]]
    ) -> list[Val]:
        """``for i in range(n)`` carrying ``inits``; ``body(i, carried)`` returns the next
        carried values. Returns the carried values after the loop (at least one iteration
        when ``n`` is a positive constant)."""
        pre = self.block
        head, bodyl, done = self.new_label("head"), self.new_label("body"), self.new_label("done")
        self.void(f"br label %{head}")
        self.label(head)
        at = len(self.lines)
        iv = Val(self.fresh("i"), ix)
        carried = [Val(self.fresh("c"), v.ty) for v in inits]
        nv = self.ival(n, ix)
        cond = self.emit(f"icmp slt {ix} {iv.ref}, {nv.ref}", "i1")
        self.void(f"br i1 {cond.ref}, label %{bodyl}, label %{done}")
        self.label(bodyl)
        nxt = body(iv, carried)
        inc = self.emit(f"add nsw {ix} {iv.ref}, 1", ix)
        end = self.block
        self.void(f"br label %{head}")
        phis = [f"  {iv.ref} = phi {ix} [ 0, %{pre} ], [ {inc.ref}, %{end} ]"]
        for c, v0, v1 in zip(carried, inits, nxt, strict=True):
            phis.append(f"  {c.ref} = phi {c.ty} [ {v0.ref}, %{pre} ], [ {v1.ref}, %{end} ]")
        self.lines[at:at] = phis
        self.label(done)
        return carried

    # ---- module assembly ----------------------------------------------------------------------
    def function(self, name: str, params: Sequence[str], kernel: bool = True) -> str:
        """The function's text, ``params`` being ``"TYPE ATTRS %name"`` strings. A GPU kernel
        starts with :func:`pdl_prologue` (nothing of the body runs before it)."""
        cc = "ptx_kernel " if kernel and self.flavour == "nvptx" else ""
        head = f"define {cc}void @{name}({', '.join(params)}) {{"
        pre: list[str] = []
        if kernel and self.flavour == "nvptx":
            glob, pre, decls = pdl_prologue(name)
            self.globals.append(glob)
            for d in decls:
                self.declare(d)
        return "\n".join([head, *pre, "entry:", *self.lines, "  ret void", "}"])


# Programmatic dependent launch (issue 14; the runtime side is kinac.rt.cuda.module): every
# generated kernel first waits for the grids it depends on (``griddepcontrol.wait``: they
# have completed and their writes are visible), then lets the next kernel of the stream be
# scheduled (``griddepcontrol.launch_dependents``: its blocks may start and reach their own
# wait). Launched without the programmatic attribute both are no-ops, so the PTX is the same
# whichever way the runtime launches it. They exist from sm_90 (PTX ISA 7.8): the kernels'
# LLVM IR does not know its architecture, so the pair sits behind ``__nvvm_reflect``
# (``__CUDA_ARCH`` >= 900), which LLVM's NVPTX pipeline folds at its start: sm_80 code has
# neither instruction, sm_90 code has them first, and the blocks merge back into the entry
# block before SROA (tests/test_pdl.py checks both, and that no kernel gains local memory).
PDL_MIN_ARCH = 900
PDL_DECLARES = (
    "declare i32 @__nvvm_reflect(ptr)",
    "declare void @llvm.nvvm.griddepcontrol.wait()",
    "declare void @llvm.nvvm.griddepcontrol.launch.dependents()",
)


def pdl_prologue(name: str) -> tuple[str, list[str], tuple[str, ...]]:
    """For kernel ``name``: the global its ``__nvvm_reflect`` query names (one per kernel, so
    kernels share a module), the blocks that precede its ``entry`` block, and their
    declarations. Nothing before them touches memory: a kernel never reads or writes global
    memory before its wait."""
    glob = (
        f"@{name}.cuda_arch = private unnamed_addr addrspace(4) constant [12 x i8] "
        'c"__CUDA_ARCH\\00", align 1'
    )
    arch = f"ptr addrspacecast (ptr addrspace(4) @{name}.cuda_arch to ptr)"
    lines = [
        "pdl:",
        f"  %pdl.arch = call i32 @__nvvm_reflect({arch})",
        f"  %pdl.on = icmp sge i32 %pdl.arch, {PDL_MIN_ARCH}",
        "  br i1 %pdl.on, label %pdl.wait, label %entry",
        "pdl.wait:",
        "  call void @llvm.nvvm.griddepcontrol.wait()",
        "  call void @llvm.nvvm.griddepcontrol.launch.dependents()",
        "  br label %entry",
    ]
    return glob, lines, PDL_DECLARES


def declared_name(decl: str) -> str:
    """The function a ``declare RET @NAME(ARGS)`` line declares."""
    m = re.search(r"@([\w.$]+)\(", decl)
    assert m is not None, decl
    return m.group(1)


def add_declaration(decls: dict[str, str], decl: str) -> None:
    """Add ``decl`` to ``decls`` (name -> line), once per name.

    Why: a module may declare each function only once, and kernels of several dtypes (an f64
    softmax next to an f32 cast) meet in one module; an intrinsic's name carries its type
    (``llvm.fma.f64``), so one name with two signatures means a caller passed registers of the
    wrong type, which must fail here, naming both, rather than deep inside LLVM's parser.
    """
    name = declared_name(decl)
    old = decls.setdefault(name, decl)
    if old != decl:
        raise ValueError(f"conflicting declarations of @{name}: `{old}` and `{decl}`")


def module_text(functions: Sequence[str], builders: Sequence[Builder], flavour: str) -> str:
    """A whole module: target header, globals, declarations (one per function name, whatever
    mix of dtypes the kernels use) and functions."""
    out: list[str] = []
    if flavour == "nvptx":
        out += [f'target triple = "{NVPTX_TRIPLE}"', f'target datalayout = "{NVPTX_LAYOUT}"', ""]
    decls: dict[str, str] = {}
    for b in builders:
        out.extend(b.globals)
        for decl in b.declares.values():
            add_declaration(decls, decl)
    out.extend(sorted(decls.values()))
    out.append("")
    out.extend(f + "\n" for f in functions)
    return "\n".join(out)
