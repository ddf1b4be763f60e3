"""``lower_stages`` on entries that call libm (task O, 2026-12-02e).

The host's scalar algebra calls libm (``func.call @sin`` with a ``kinac.libm`` attribute, made in
``kinac/ir/host/scalar_algebra.py``) from ``kina-to-loops`` on, but only ``loops-to-llvm``
declared the externals, so the module did not verify after the passes in between and
``lower_stages`` (which verifies after each pass) failed for any f64 ``sin``/``cos``/``log1p``
and for f32 ``sin``/``cos`` (their rare path): ``'@sin' could not be found in symbol table``.
Now the pass that makes a libm call declares it (``func.func private``, marked ``kinac.libm``),
``expand-math`` drops a declaration whose calls it erased, and ``loops-to-llvm`` turns each
declaration into its one LLVM ``declare``. The LLVM IR is unchanged (compared before/after, see
``docs/measurements/host-libm-decls-2026-12-02e.txt``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import goldens
import pytest
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr, f64
from xdsl.ir import Block, Region

from kinac.ir import lower_graph, lower_stages
from kinac.ir.from_graph import graph_to_module
from kinac.ir.host.expand_math import ExpandMath
from kinac.ir.host.kernels import lower_kernel, split_graph
from kinac.ir.host.kina_to_loops import KinaToLoops
from kinac.ir.host.llvm_to_text import module_to_llvm_ir
from kinac.ir.host.loops_to_llvm import LoopsToLLVM
from kinac.ir.host.pipeline import KINA_PASSES, print_ir
from kinac.ir.host.scalar_algebra import LIBM, libm_declarations
from kinac.ir.testing import GraphBuilder
from kinac.tir.graph import Graph

GOLDEN = Path(__file__).parent / "golden" / "lower" / "libm_sin_f64"
_DECLARE = re.compile(r'^declare [^@]*@"([^"]+)"', re.M)


def _unary(op: str, dtype: str, n: int = 8) -> Graph:
    g = GraphBuilder(f"{op}_{dtype}")
    return g.build(g.unary(op, g.param("x", dtype, (n,))))


def _pow(dtype: str) -> Graph:
    g = GraphBuilder(f"pow_{dtype}")
    a, b = g.param("a", dtype, (8,)), g.param("b", dtype, (8,))
    return g.build(g.binary("pow", a, b))


def _mixed() -> Graph:
    """Kernels calling libm (f64 and f32 ``sin``) and an f64 tanh/erf (loops-to-llvm's own)."""
    g = GraphBuilder("mixed")
    x, z = g.param("x", "f64", (4, 8)), g.param("z", "f32", (8,))
    y = g.unary("exp", g.unary("cos", g.unary("sin", x)))
    s = g.reduce("reduce_sum", g.unary("erf", g.unary("tanh", y)), -1)
    return g.build(s, g.unary("log1p", x), g.unary("sin", z))


# graph, and the libm functions its LLVM IR declares (llvm.* intrinsics aside)
CASES: dict[str, tuple[Callable[[], Graph], set[str]]] = {
    "exp_f64": (lambda: _unary("exp", "f64"), set()),
    "log_f64": (lambda: _unary("log", "f64"), set()),
    "sin_f64": (lambda: _unary("sin", "f64"), {"sin"}),
    "cos_f64": (lambda: _unary("cos", "f64"), {"cos"}),
    "log1p_f64": (lambda: _unary("log1p", "f64"), {"log1p"}),
    "pow_f64": (lambda: _pow("f64"), set()),
    "sin_f32": (lambda: _unary("sin", "f32"), {"sin"}),
    "cos_bf16": (lambda: _unary("cos", "bf16", 40), {"cos"}),
    "mixed": (_mixed, {"sin", "cos", "tanh", "erf", "log1p"}),
}


def _libm_decls(text: str) -> list[str]:
    """The ``func.func`` declarations marked ``kinac.libm`` in a printed module."""
    return re.findall(r"func\.func private @(\w+)\([^)]*\) -> \S+ attributes \{kinac\.libm", text)


def _called(text: str) -> set[str]:
    return set(re.findall(r"func\.call @(\w+)\([^)]*\) \{kinac\.libm", text))


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_pass_verifies_and_agrees_with_lower_graph(name: str) -> None:
    make, libm = CASES[name]
    stages = lower_stages(make())  # verifies the module after each pass
    ir = stages["llvm-ir"]
    declared = [n for n in _DECLARE.findall(ir) if not n.startswith("llvm.")]
    assert sorted(declared) == sorted(libm)  # each once
    assert ir == lower_graph(make()).llvm_ir
    assert set(lower_graph(make()).library_calls) == libm
    for stage in ("kina-to-loops", "expand-math"):
        text = stages[stage]
        decls = _libm_decls(text)
        assert len(decls) == len(set(decls)), f"{stage}: a libm function declared twice"
        assert set(decls) == _called(text), f"{stage}: declarations {decls} vs calls"
    assert set(_libm_decls(stages["expand-math"])) == libm - {"tanh", "erf"}
    assert '"func.func"' not in stages["loops-to-llvm"]  # declarations converted, not kept


@pytest.mark.parametrize("name", ["sin_f64", "sin_f32", "mixed"])
def test_kernels_compiled_alone_declare_their_libm_calls(name: str) -> None:
    make, libm = CASES[name]
    entry = split_graph(make())
    calls: set[str] = set()
    for k in entry.kernels:
        code = lower_kernel(k)
        declared = [n for n in _DECLARE.findall(code.llvm_ir) if not n.startswith("llvm.")]
        assert len(declared) == len(set(declared))
        assert set(code.library_calls) == set(declared)
        calls |= set(declared)
    assert calls == libm


def test_declarations_follow_the_calls() -> None:
    """A missing declaration is added (once), an unused one (its call erased) dropped."""
    block = Block(arg_types=[f64])
    call = func.CallOp("log1p", [block.args[0]], [f64])
    call.attributes[LIBM] = StringAttr("log1p")
    block.add_ops([call, func.ReturnOp(call.results[0])])
    user = func.FuncOp("user", ([f64], [f64]), Region(block))
    dead = func.FuncOp.external("cos", [f64], [f64])
    dead.attributes[LIBM] = StringAttr("cos")
    other = func.FuncOp.external("kinac_other", [f64], [f64])  # not libm's: left alone
    m = ModuleOp([user, dead, other])
    for _ in range(2):
        libm_declarations(m)
        names = [o.sym_name.data for o in m.ops if isinstance(o, func.FuncOp)]
        assert names == ["user", "kinac_other", "log1p"]
        m.verify()
    decl = list(m.ops)[-1]
    assert isinstance(decl, func.FuncOp) and LIBM in decl.attributes and not decl.body.blocks


def test_expand_math_drops_the_declaration_of_a_dropped_rare_path() -> None:
    """A rare path's loop that reads the buffer it writes cannot run twice, so ``expand-math``
    drops the call (``kinac/ir/host/rare_loops.py``): its declaration goes too, and the LLVM IR
    declares no ``sin`` (an in-place kernel: its input buffer made its output)."""
    m = graph_to_module(_unary("sin", "f32"))
    ctx = Context()
    for p in (*KINA_PASSES, KinaToLoops):
        p().apply(ctx, m)
    kernel = next(o for o in m.ops if isinstance(o, func.FuncOp) and o.sym_name.data == "k0_map")
    out, x = kernel.body.block.args[:2]
    x.replace_all_uses_with(out)
    assert _libm_decls(print_ir(m)) == ["sin"]
    ExpandMath().apply(ctx, m)
    m.verify()
    text = print_ir(m)
    assert not _libm_decls(text) and not _called(text) and "@sin(" not in text
    LoopsToLLVM().apply(ctx, m)
    assert not [n for n in _DECLARE.findall(module_to_llvm_ir(m)) if not n.startswith("llvm.")]


def _stage_file(i: int, stage: str) -> str:
    return f"{i:02d}-{stage}.{'ll' if stage == 'llvm-ir' else 'mlir'}"


def test_golden_stages_of_an_f64_sin() -> None:
    """The IR after every pass of an f64 ``sin`` map: the declaration from ``kina-to-loops`` on."""
    stages = lower_stages(_unary("sin", "f64"))
    files = [_stage_file(i, stage) for i, stage in enumerate(stages)]
    for file, (stage, text) in zip(files, stages.items(), strict=True):
        goldens.compare(GOLDEN / file, text, f"sin_f64: IR after {stage}")
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(files), goldens.HOW
