"""The process-group communicator (kinac/rt/comm/tcp.py) against the simulator: every
collective on meshes of 2 and 4 and 2x2 (world and per-axis), every reduction, f32, bf16
(uint16 bit patterns), f16 and i64, in and out of place, must be bit-identical to the
threaded simulator's (which tests/test_comm_collectives.py checks against numpy and torch).
Ranks are threads here, each with its own socket to the relay, as processes would be
(tests/test_launch_processes.py runs real processes)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from kinac.artifacts.sharded import MeshSpec
from kinac.errors import KinaRuntimeError
from kinac.rt.comm import simulate
from kinac.rt.comm.communicator import f32_to_bf16
from kinac.rt.comm.launch import free_port
from kinac.rt.comm.rendezvous import DistEnv, join
from kinac.rt.comm.tcp import COMBINE, TcpComm

MESHES = [
    (MeshSpec("tp", (2,), ("tp",)), None),
    (MeshSpec("tp", (4,), ("tp",)), "tp"),
    (MeshSpec("grid", (2, 2), ("dp", "tp")), None),
    (MeshSpec("grid", (2, 2), ("dp", "tp")), "dp"),
    (MeshSpec("grid", (2, 2), ("dp", "tp")), "tp"),
]
IDS = ["2", "4-sub", "2x2-world", "2x2-dp", "2x2-tp"]


def on_processes(mesh: MeshSpec, fn: Any) -> list[Any]:
    """``fn(comm)`` on every rank, each rank a client of the relay (thread per rank)."""
    port, n = free_port(), mesh.size
    out: list[Any] = [None] * n

    def body(r: int) -> None:
        c = join(DistEnv(r, n, r, "127.0.0.1", port, 10.0), combine=COMBINE)
        try:
            out[r] = fn(TcpComm(c, tuple(mesh.shape), tuple(mesh.axes)))
        except Exception as e:  # noqa: BLE001
            out[r] = e
        finally:
            c.close()

    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert not any(t.is_alive() for t in ts)
    return out


def data(rank: int, dtype: str, rows: int) -> np.ndarray:
    rng = np.random.default_rng(7 + rank)
    if dtype == "i64":
        return rng.integers(-(10**12), 10**12, size=(rows, 3)).astype(np.int64)
    x = (rng.standard_normal((rows, 3)) * (rank + 1.5) + rank).astype(np.float32)
    return f32_to_bf16(x) if dtype == "bf16" else x.astype(np.float16) if dtype == "f16" else x


def program(comm: Any) -> list[np.ndarray]:
    """Every collective, every op, every dtype, in and out of place, on one communicator."""
    r = getattr(comm, "global_rank", 0)
    outs = []
    for dtype in ("f32", "bf16", "f16", "i64"):
        x = data(r, dtype, 4)
        ops = ("sum", "prod", "max", "min") + (("avg",) if dtype != "i64" else ())
        for op in ops:
            outs.append(comm.all_reduce(x, op=op))
            outs.append(comm.reduce_scatter(x, op=op))
        outs.append(comm.all_gather(x))
        outs.append(comm.all_to_all(x))
        y = x.copy()
        outs.append(comm.all_reduce(y, y).copy())  # in place
        big = np.zeros((x.shape[0] * comm.size, 3), x.dtype)
        c = x.shape[0]
        big[comm.rank * c : (comm.rank + 1) * c] = x
        outs.append(comm.all_gather(big[comm.rank * c : (comm.rank + 1) * c], big).copy())
    comm.barrier()
    return outs


@pytest.mark.parametrize(("mesh", "axis"), MESHES, ids=IDS)
def test_bit_identical_to_the_simulator(mesh: MeshSpec, axis: str | None) -> None:
    pick = (lambda c: c) if axis is None else (lambda c: c.sub(axis))
    want = simulate(mesh, lambda c: program(pick(c)))
    got = on_processes(mesh, lambda c: program(pick(c)))
    for r in range(mesh.size):
        assert not isinstance(got[r], Exception), got[r]
        assert len(got[r]) == len(want[r])
        for a, b in zip(got[r], want[r], strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.tobytes() == b.tobytes()


def test_bad_calls_are_reported_before_any_traffic() -> None:
    def fn(comm: TcpComm) -> Any:
        with pytest.raises(KinaRuntimeError, match="unknown reduction 'mean'"):
            comm.all_reduce(np.ones(2, np.float32), op="mean")
        with pytest.raises(KinaRuntimeError, match="2 ranks do not divide the send's first dim 3"):
            comm.reduce_scatter(np.ones(3, np.float32))
        with pytest.raises(
            KinaRuntimeError, match=r"receive buffer is f32\[2\], expected f32\[4\]"
        ):
            comm.all_gather(np.ones(2, np.float32), np.ones(2, np.float32))
        with pytest.raises(KinaRuntimeError, match="no mesh axis 'dp'"):
            comm.sub("dp")
        return comm.all_reduce(np.ones(2, np.float32))  # the group still works

    got = on_processes(MeshSpec("tp", (2,), ("tp",)), fn)
    assert all(np.array_equal(g, [2.0, 2.0]) for g in got), got


def test_the_mesh_must_match_the_world() -> None:
    port = free_port()
    c = join(DistEnv(0, 1, 0, "127.0.0.1", port, 5.0), combine=COMBINE)
    try:
        with pytest.raises(
            KinaRuntimeError, match=r"mesh \[2\] \(tp\) has 2 devices but WORLD_SIZE is 1"
        ):
            TcpComm(c, (2,), ("tp",))
        one = TcpComm(c, (1,), ("tp",))
        assert one.all_reduce(np.arange(3.0)).tolist() == [0.0, 1.0, 2.0]
    finally:
        c.close()
