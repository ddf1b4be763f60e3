"""xDSL's operation formats are parsed on first use (:mod:`kinac.ir.lazy_formats`): the IR
printed in custom format after every host and GPU pass, and read back, is the same text as
with the formats parsed eagerly at import; and a build whose kernels are all cached still
imports no xDSL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PRINT = """
import json
from kinac.ir import lower_stages
from kinac.ir.gpu.pipeline import lower_stages_gpu
from kinac.ir.testing import block_graph
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, llvm, math, memref, scf, cf
from xdsl.parser import Parser
g = block_graph(2, 8, 16)
stages = {**lower_stages(g), **{"gpu " + k: v for k, v in lower_stages_gpu(g).items()}}
ctx = Context(allow_unregistered=True)
for d in (builtin.Builtin, func.Func, arith.Arith, llvm.LLVM, math.Math, memref.MemRef, scf.Scf, cf.Cf):
    ctx.load_dialect(d)
src = "func.func @f(%a: f32, %b: index) -> f32 {\\n  %c = arith.addf %a, %a fastmath<fast> : f32\\n  return %c : f32\\n}"
stages["read back"] = str(Parser(ctx, src).parse_module())
from xdsl.irdl.declarative_assembly_format import FormatProgram
print(json.dumps({"lazy": getattr(FormatProgram, "_kinac_lazy", False), "stages": stages}))
"""


def _start(eager: bool) -> subprocess.Popen[str]:
    env = {**os.environ, "KINAC_EAGER_XDSL_FORMATS": "1" if eager else "0"}
    return subprocess.Popen([sys.executable, "-c", PRINT], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env)  # fmt: skip


def _result(p: subprocess.Popen[str]) -> dict:  # type: ignore[type-arg]
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_lazy_formats_print_and_read_the_same_ir() -> None:
    # the two processes are independent: they run at once (the second core)
    lazy_p, eager_p = _start(False), _start(True)
    lazy, eager = _result(lazy_p), _result(eager_p)
    assert lazy["lazy"] and not eager["lazy"]
    assert len(lazy["stages"]) > 5 and "arith.addf" in lazy["stages"]["read back"]
    assert lazy["stages"] == eager["stages"]


def test_the_cached_path_imports_no_xdsl() -> None:
    code = "import sys, kinac.ir, kinac.ir.pieces, kinac.ir.host.stitch; print(any(m.startswith('xdsl') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr
