"""The staging tests' fakes that ``benches/runtime_hostcost.py`` measures with too: the
``y = x * w`` GPU entry (``x`` on the host) built without a GPU, and a stand-in libcuda
compiled from C. One copy, so the bench times the very entry the tests check."""

from __future__ import annotations

import shutil
import subprocess
from collections import OrderedDict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

X, W = (3, 4), (4,)


def compile_stand_in(src: str, d: Path, name: str) -> Path | None:
    """``src`` (C) compiled as the shared library ``d/name``; None when there is no C compiler
    (the caller skips or exits, as suits it)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None
    (d / "fake.c").write_text(src, encoding="ascii")
    so = d / name
    subprocess.run([cc, "-O1", "-shared", "-fPIC", "-o", str(so), str(d / "fake.c")], check=True)
    return so


def stand_in_driver(monkeypatch: Any, lib: Path) -> Any:
    """tests/test_pinned.py's fake driver in place of cuda-python (returned), device 0 present,
    and the stand-in libcuda ``lib`` as the library the native paths load (``KINAC_LIBCUDA``)."""
    from test_pinned import FakeDriver

    from kinac.rt.cuda import device, driver

    fake = FakeDriver()
    monkeypatch.setattr(driver, "_api", fake)
    monkeypatch.setattr(driver, "OK", 0)
    monkeypatch.setattr(driver, "_initialised", True)
    monkeypatch.setattr(driver, "_libs", {})
    monkeypatch.setattr(device, "_devices", {0: object()})
    monkeypatch.setenv("KINAC_LIBCUDA", str(lib))
    return fake


def mul_entry(res: Any) -> Any:
    """A bare :class:`~kinac.rt.cuda.entry.GpuEntry` of ``y = x * w`` (``x`` [3, 4] on the
    host, ``w`` [4] and ``y`` on device 0) over the device memory resource ``res``, built
    field by field (no module to load): the caller sets ``_bind`` and the weights."""
    from kinac.artifacts.gpu import GpuLoweredEntry
    from kinac.artifacts.host import BufferSpec
    from kinac.rt.cuda import device
    from kinac.rt.cuda.entry import GpuEntry
    from kinac.rt.cuda.entry_support import DL_NAMES, array_nbytes
    from kinac.rt.cuda.tensor import DTYPES, contiguous_strides

    params = (BufferSpec("x", "f32", X), BufferSpec("w", "f32", W))
    outs = (BufferSpec("y", "f32", X),)
    lw = GpuLoweredEntry("mul", "", params, outs, ("cpu", "cuda:0"), ("cuda:0",), 0, 0, (), ())
    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.ordinal, e.pinned, e.resource = lw, 0, True, res
    e._out_specs = [(o.shape, DTYPES[DL_NAMES[o.dtype]], array_nbytes(o.dtype, o.shape),
                     contiguous_strides(o.shape)) for o in outs]  # fmt: skip
    e._host_outputs, e.use_graphs, e.max_graphs, e.status = [], True, 8, 0
    e.stream = device.Stream.wrap(0)
    e.capture_stream = e.stream
    e._imports, e._last_box, e._stager, e._allocs = {}, [None], None, []
    e._seen, e.volatile, e._stage, e._bound = [set() for _ in range(3)], set(), {}, OrderedDict()
    e.captures = e.replays = 0
    e.device = SimpleNamespace(enter=lambda: False, leave=lambda p: None)  # type: ignore[assignment]
    e._ctx_get = None
    return e
