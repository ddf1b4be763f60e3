"""The host CPU is detected once per machine and remembered in the cache, so a no-op build
imports no llvmlite (it was ~120 ms of one under load: ``kinac.host_cpu``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kinac import host_cpu
from kinac.cli import main
from kinac.rules.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _counting_detect(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    import kinac.codegen.llvm as llvm

    calls: list[Any] = []
    real = llvm.host_target

    def detect() -> Any:
        calls.append(1)
        return real()

    monkeypatch.setattr(llvm, "host_target", detect)
    return calls


def test_detected_once_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinac.codegen.llvm import host_target as real

    calls = _counting_detect(monkeypatch)
    store = Store(tmp_path / "c")
    first = host_cpu.host_target(store)
    assert first == real() and len(calls) == 1
    store.close()
    again = Store(tmp_path / "c")  # another process, same machine
    assert host_cpu.host_target(again) == first and len(calls) == 1
    # other CPU facts (another machine sharing the cache, a new llvmlite): detected again
    monkeypatch.setattr(host_cpu, "host_facts", lambda: "another machine")
    assert host_cpu.host_target(again) == first and len(calls) == 2
    assert host_cpu.host_target(again) == first and len(calls) == 2
    again.close()
    assert host_cpu.host_target(None) == first and len(calls) == 3  # no cache: every time


def test_the_facts_name_the_cpu_and_llvmlite() -> None:
    facts = host_cpu.host_facts()
    assert os.uname().machine in facts and "llvmlite" in facts
    if Path("/proc/cpuinfo").exists():
        assert "flags=" in facts or "features=" in facts.lower()


def test_a_no_op_build_imports_no_llvmlite_xdsl_or_z3(tmp_path: Path) -> None:
    ws = tmp_path / "mlp"
    shutil.copytree(ROOT / "workspaces" / "mlp", ws, ignore=shutil.ignore_patterns(".kinac-*"))
    cache = str(tmp_path / "cache")
    assert main(["build", str(ws), "--cache-dir", cache]) == 0
    code = (
        "import sys\nfrom kinac.cli import main\n"
        f"assert main(['build', {str(ws)!r}, '--cache-dir', {cache!r}]) == 0\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'llvmlite', 'xdsl', 'z3'}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    assert "0 queries run" in p.stderr, p.stderr
    assert p.stdout.split("\n")[-2] == "[]", p.stdout
