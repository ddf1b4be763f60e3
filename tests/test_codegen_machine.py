"""Target machines made once per process (kinac.codegen.llvm.shared_machine, the NVPTX one in
kinac.codegen.ptx) emit what a fresh machine emits: an edit's build compiles with machines
that compiled other modules before (a build's objects must equal a clean build's byte for
byte, tests/test_incremental_fuzz.py)."""

from __future__ import annotations

import pytest

from kinac.codegen import llvm as cg
from kinac.codegen import ptx
from kinac.codegen.ptx_testkernels import COPY_V4_LL

LOOP = """
define void @{name}(ptr noalias %x, ptr noalias %y, i64 %n) {{
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %j, %loop ]
  %px = getelementptr float, ptr %x, i64 %i
  %py = getelementptr float, ptr %y, i64 %i
  %a = load float, ptr %px
  %b = load float, ptr %py
  %c = {op} float %a, %b
  store float %c, ptr %py
  %j = add i64 %i, 1
  %done = icmp eq i64 %j, %n
  br i1 %done, label %exit, label %loop
exit:
  ret void
}}
"""


def test_a_reused_host_machine_emits_a_fresh_machines_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    target = cg.host_target()
    mods = [(LOOP.format(name=f"k{i}", op=op), opt) for i, op in enumerate(("fadd", "fmul"))
            for opt in (0, 3)]  # fmt: skip

    def fresh(text: str, opt: int) -> bytes:
        monkeypatch.setattr(cg, "_MACHINES", {})
        return cg.compile_object(text, target, opt)

    alone = [fresh(t, o) for t, o in mods]
    monkeypatch.setattr(cg, "_MACHINES", {})
    shared = [cg.compile_object(t, target, o) for t, o in [*mods, *reversed(mods)]]
    assert shared[: len(mods)] == alone and shared[len(mods) :][::-1] == alone
    assert len(cg._MACHINES) == 2  # one per -O level, not one per module
    assert cg.shared_machine(target, 3) is cg.shared_machine(target, 3)


def test_a_reused_nvptx_machine_emits_a_fresh_machines_ptx(monkeypatch: pytest.MonkeyPatch) -> None:
    other = LOOP.format(name="k", op="fadd")
    monkeypatch.setattr(ptx, "_MACHINES", {})
    alone = ptx.compile_ptx(COPY_V4_LL)
    ptx.compile_ptx(other)
    assert ptx.compile_ptx(COPY_V4_LL) == alone and len(ptx._MACHINES) == 1
