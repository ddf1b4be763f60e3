"""benches/collectives.py's measuring and table code, run on the CPU over fakes.

Why: the bench runs once per session on the H200, in a device call that costs minutes; a
typo in a variant or the table would cost that run. Here one size goes through ``_one_size``
(every variant, the host-time pairs, the graph fallback) over the fake bindings and host
memory, then ``_table`` renders it: the rows, the like-for-like ratio (kinac into a
preallocated buffer against the bare call) and the allocating row apart."""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle

from kinac.rt import cuda
from kinac.rt.comm import nccl
from kinac.rt.cuda import driver
from kinac.rt.cuda.tensor import Tensor

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "kinac_bench_collectives", ROOT / "benches" / "collectives.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Event:
    clock = 0.0

    def record(self, stream: Any) -> None:
        Event.clock += 1.0
        self.t = Event.clock

    def synchronize(self) -> None:
        pass

    def elapsed_ms(self, other: Event) -> float:
        return other.t - self.t


class Ops:
    """The bench's ``CudaOps`` over host memory."""

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Tensor:
        a = np.zeros(shape, dtype)
        return Tensor(a.ctypes.data, a.shape, a.dtype.name, owner=a)

    def view(self, buf: Tensor, shape: tuple[int, ...]) -> Tensor:
        return Tensor(buf.ptr, shape, buf.dtype, owner=buf)


def test_one_size_and_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", sys.path[:])  # the bench rewrites sys.path on import
    bench = _bench()
    monkeypatch.setattr(cuda, "Event", Event)
    monkeypatch.setattr(
        cuda,
        "capture",
        lambda seq, stream, name: types.SimpleNamespace(captured=False, fallback_reason="fake"),
    )
    monkeypatch.setattr(driver, "api", lambda: types.SimpleNamespace(cuMemsetD8=lambda *a: (0,)))
    monkeypatch.setattr(driver, "OK", 0)
    lib = FakeLib()
    for name in ("all_reduce", "all_gather", "reduce_scatter", "send", "recv", "group_end"):
        setattr(lib, name, lambda *a, _n=name: lib.calls.append((_n, *a)))
    ops = Ops()
    comm = nccl.NcclComm(lib, Handle(None), (1,), ("x",), ("x",), 0, alloc=ops.empty)
    stream = types.SimpleNamespace(handle=5, synchronize=lambda: None)
    args = argparse.Namespace(rounds=2, iters=3, small_iters=4)
    row = bench._one_size(1 << 20, comm, ops, stream, (None, None), args)
    assert row["errors"] == {
        "kinac_graph": "capture failed: fake",
        "bare_graph": "capture failed: fake",
    }
    for k in ("kinac", "bare", "kinac_alloc", "all-gather", "reduce-scatter", "all-to-all"):
        assert row[f"{k}_ms"] > 0 and row[f"{k}_host_ms"] > 0, k
    assert row["iters"] == 4 and comm.log == []
    kinds = {c[0] for c in lib.calls}
    assert kinds == {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "group_start",
        "send",
        "recv",
        "group_end",
    }
    # kinac's calls and the bare ones pass the same arguments (like for like)
    ar = [c for c in lib.calls if c[0] == "all_reduce"]
    assert ar[0][3:] == ar[-1][3:] == (1 << 18, 7, 0, comm.handle, 5)
    info = {"ranks": 1, "init_s": 0.5, "nccl_version": 22809, "rounds": 2, "iters": 3}
    host = bench.host_overhead(50, 2)
    assert set(host) >= {"bare all-reduce", "kinac all-reduce", "kinac all-to-all"}
    assert all(us > 0 for us in host.values())
    info |= {"small_iters": 4, "rows": [row], "scaling": {}, "host_overhead_us": host}
    table = bench._table(info)
    line = next(t for t in table.splitlines() if t.startswith("| 1 MiB"))
    assert line.count("|") == 13 and " / " in line
    assert "kinac (allocating)" in table and "- kinac_graph: capture failed: fake" in table
    assert "- kinac all-reduce: " in table
