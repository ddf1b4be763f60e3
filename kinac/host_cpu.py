"""The host CPU that object code is compiled for, detected once per machine and remembered.

Why: the ``host_target`` input query runs on every build, the no-op one included, and asking
LLVM for the host CPU means importing ``llvmlite.binding`` (~30-120 ms, most of a no-op
build's import time). The answer can only change when the CPU, the operating system or
llvmlite does, so it is memoised in the cache's settings under a key made of cheap facts that
change with them:

* the first processor's ``vendor_id``, ``cpu family``, ``model``, ``model name``, ``stepping``
  and ``flags`` lines of ``/proc/cpuinfo`` (a different CPU, a VM that hides AVX-512, a
  microcode update that drops a flag), or, off Linux, :func:`os.uname`'s machine;
* :func:`os.uname`'s system and machine;
* llvmlite's shared library, by path, size and modification time (a reinstall or an upgrade
  changes what LLVM calls the CPU and which features it knows).

A cache shared by different machines (a network cache of CI shards) holds one entry per
machine; a process without a cache detects every time.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

_CPU_FIELDS = ("vendor_id", "cpu family", "model", "model name", "stepping", "flags", "features")
SETTING_PREFIX = "host_target:"


def _first_cpu() -> str:
    """The identifying lines of the first processor in ``/proc/cpuinfo`` ("" if none)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            text = f.read(1 << 16)
    except OSError:
        return ""
    block = text.split("\n\n", 1)[0]
    keep = []
    for line in block.splitlines():
        name, _, value = line.partition(":")
        if name.strip().lower() in _CPU_FIELDS:
            keep.append(f"{name.strip()}={value.strip()}")
    return "\n".join(keep)


def _llvmlite_identity() -> str:
    """llvmlite's shared library, by path, size and mtime, found without importing llvmlite."""
    spec = importlib.util.find_spec("llvmlite")
    if spec is None or not spec.submodule_search_locations:
        return "none"
    pkg = Path(next(iter(spec.submodule_search_locations)))
    for lib in sorted((pkg / "binding").glob("*llvmlite*")):
        if lib.suffix in (".so", ".dylib", ".dll"):
            st = lib.stat()
            return f"{lib}:{st.st_size}:{st.st_mtime_ns}"
    return str(pkg)


def host_facts() -> str:
    """The cheap facts the detected host target is keyed on (see the module docstring)."""
    u = os.uname()
    return "\n".join((u.sysname, u.machine, _first_cpu(), _llvmlite_identity()))


def host_target(store: Any | None) -> Any:
    """The host's :class:`~kinac.codegen.target.TargetSpec`: from ``store``'s settings when
    these facts were seen before, else detected by LLVM (and remembered in ``store``)."""
    from kinac.codegen.target import TargetSpec
    from kinac.rules.codec import digest

    key = SETTING_PREFIX + digest(host_facts().encode())
    if store is not None:
        got = store.load_setting(key)
        if isinstance(got, list) and len(got) == 4 and all(isinstance(x, str) for x in got):
            return TargetSpec(*got)
    from kinac.codegen.llvm import host_target as detect

    spec = detect()
    if store is not None:
        store.save_setting(key, [spec.triple, spec.cpu, spec.features, spec.kind])
    return spec
