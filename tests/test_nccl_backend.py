"""The NCCL backend (kinac/rt/comm/nccl.py) without a GPU: a fake ``nccl.core`` records what
the backend asks of nccl4py. The dtype and op tables, the argument mapping (buffers passed
through, the caller's stream, the op), ncclCommSplit's colour and key on a 2x2 mesh, the
communicators created once per mesh and once per axis, the unique id exchanged through the
rendezvous; a real two-GPU run is marked gpu (skipped here)."""

from __future__ import annotations

import enum
import threading
import types
from typing import Any

import numpy as np
import pytest

from kinac.errors import KinaRuntimeError
from kinac.rt.comm import nccl
from kinac.rt.comm.launch import free_port
from kinac.rt.comm.rendezvous import DistEnv, join


class Op(enum.Enum):
    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


class FakeComm:
    def __init__(self, calls: list[Any], nranks: int, rank: int, uid: Any) -> None:
        self.calls, self.nranks, self.rank, self.uid = calls, nranks, rank, uid

    def split(self, colour: int, key: int) -> FakeComm:
        self.calls.append(("split", colour, key))
        return FakeComm(self.calls, -1, key, self.uid)

    def allreduce(self, s: Any, r: Any, op: Any, *, stream: Any = None) -> None:
        self.calls.append(("allreduce", s, r, op, stream))

    def allgather(self, s: Any, r: Any, *, stream: Any = None) -> None:
        self.calls.append(("allgather", s, r, stream))

    def reduce_scatter(self, s: Any, r: Any, op: Any, *, stream: Any = None) -> None:
        self.calls.append(("reduce_scatter", s, r, op, stream))

    def alltoall(self, s: Any, r: Any, *, stream: Any = None) -> None:
        self.calls.append(("alltoall", s, r, stream))


def fake_core(calls: list[Any]) -> Any:
    class UniqueId:
        def __init__(self, data: bytes) -> None:
            self.data = data

        @staticmethod
        def from_bytes(data: bytes) -> UniqueId:
            return UniqueId(data)

        def as_bytes(self) -> bytes:
            return self.data

    class Communicator:
        @staticmethod
        def init(nranks: int, rank: int, uid: Any) -> FakeComm:
            calls.append(("init", nranks, rank, uid.data))
            return FakeComm(calls, nranks, rank, uid)

    return types.SimpleNamespace(
        NcclRedOp=Op,
        UniqueId=UniqueId,
        Communicator=Communicator,
        get_unique_id=lambda: UniqueId(bytes(range(128))),
    )


def test_tables_cover_the_protocol() -> None:
    assert set(nccl.NCCL_OPS) == {"sum", "prod", "max", "min", "avg"}
    assert nccl.NCCL_DTYPES["bf16"] == "bfloat16" and nccl.NCCL_DTYPES["bool"] == "uint8"
    from kinac.dtypes import DTYPES  # every Kina dtype has a NCCL type

    assert set(DTYPES) <= set(nccl.NCCL_DTYPES)


def test_split_colour_and_key_and_sub_made_once() -> None:
    comms = [
        nccl.NcclComm(
            fake_core([]), FakeComm([], 4, r, None), (2, 2), ("dp", "tp"), ("dp", "tp"), r
        )
        for r in range(4)
    ]
    # colour: the other coordinate's index; key: the coordinate along the axis
    assert [c.split_key("tp") for c in comms] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [c.split_key("dp") for c in comms] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    calls: list[Any] = []
    c = nccl.NcclComm(
        fake_core(calls), FakeComm(calls, 4, 3, None), (2, 2), ("dp", "tp"), ("dp", "tp"), 3
    )
    tp = c.sub("tp")
    assert c.sub("tp") is tp and (tp.rank, tp.size, tp.axis) == (1, 2, "tp")
    assert calls == [("split", 1, 1)]  # once
    assert tp.sub("tp") is tp
    with pytest.raises(KinaRuntimeError, match="no mesh axis 'dp' in this communicator"):
        tp.sub("dp")


def test_world_is_made_once_from_rank_zeros_unique_id() -> None:
    port = free_port()
    calls: list[list[Any]] = [[], []]
    made: list[Any] = [None, None]

    def body(r: int) -> None:
        c = join(DistEnv(r, 2, r, "127.0.0.1", port, 5.0))
        core = fake_core(calls[r])
        w = nccl.world((2,), ("tp",), c, core=core) if r == 0 else None
        if r == 1:
            uid = c.unique_id()
            core.Communicator.init(2, 1, core.UniqueId.from_bytes(uid))
        made[r] = w
        c.close()

    nccl.forget_worlds()
    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert calls[0] == [("init", 2, 0, bytes(range(128)))]
    assert calls[1] == [("init", 2, 1, bytes(range(128)))]
    w = made[0]
    assert nccl._WORLDS[(2,), ("tp",)] is w  # cached per mesh: a second world() is this one
    nccl.forget_worlds()


def test_collectives_map_buffers_ops_and_stream() -> None:
    calls: list[Any] = []
    c = nccl.NcclComm(
        fake_core(calls),
        FakeComm(calls, 2, 0, None),
        (2,),
        ("tp",),
        ("tp",),
        0,
        alloc=lambda s, d: np.zeros(s, d),
    )
    x = np.ones((4, 3), np.float32)
    r = np.empty_like(x)
    assert c.all_reduce(x, r, "max", stream=7) is r
    assert calls[-1] == ("allreduce", x, r, Op.MAX, 7)
    g = c.all_gather(x, stream=9)
    assert g.shape == (8, 3) and calls[-1][0] == "allgather" and calls[-1][3] == 9
    s = c.reduce_scatter(x, op="avg")
    assert s.shape == (2, 3) and calls[-1][3] is Op.AVG
    a = c.all_to_all(x)
    assert a.shape == (4, 3) and calls[-1][0] == "alltoall"
    bf = np.zeros(4, np.uint16)
    c.all_reduce(bf, bf)  # in place, bf16 as the host's uint16
    assert calls[-1][1] is calls[-1][2] is bf


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.all_reduce(np.ones(2, np.float32), op="mean"), "unknown reduction 'mean'"),
        (lambda c: c.all_reduce(np.ones(2, np.complex64)), "NCCL has no complex64 type"),
        (lambda c: c.all_reduce(np.ones(2, np.bool_), op="prod"), "'prod' is not defined on bool"),
        (lambda c: c.reduce_scatter(np.ones(3, np.float32)), "2 ranks do not divide"),
        (
            lambda c: c.all_gather(np.ones(2, np.float32), np.ones(2, np.float32)),
            r"expected f32\[4\]",
        ),
        (lambda c: c.all_gather(np.ones(2, np.float32)), "needs a receive buffer"),
    ],
)
def test_bad_calls_refused_before_nccl(call: Any, message: str) -> None:
    calls: list[Any] = []
    c = nccl.NcclComm(fake_core(calls), FakeComm(calls, 2, 0, None), (2,), ("tp",), ("tp",), 0)
    with pytest.raises(KinaRuntimeError, match=message):
        call(c)
    assert calls == []


def test_missing_nccl4py_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nccl", None)
    monkeypatch.setitem(sys.modules, "nccl.core", None)
    with pytest.raises(KinaRuntimeError, match=r"needs nccl4py: pip install 'kinac\[cu13\]'"):
        nccl.nccl_core()


def test_backend_choice_from_the_launch() -> None:
    from kinac.api_sharded import choose_backend

    assert choose_backend("cpu", {}) == "simulator"
    assert choose_backend("cuda", {}) == "simulator"
    assert choose_backend("cpu", {"WORLD_SIZE": "2"}) == "tcp"
    assert choose_backend("cuda", {"WORLD_SIZE": "2"}) == "nccl"


@pytest.mark.gpu
def test_two_gpu_all_reduce_through_nccl() -> None:  # pragma: no cover - needs 2 GPUs
    """Run under `kinac launch -n 2` on a machine with 2 GPUs (docs/distributed.md)."""
    import os

    env = DistEnv.from_env()
    if env is None or env.world_size < 2:
        pytest.skip("needs kinac launch -n 2 on two GPUs")
    pytest.importorskip("nccl.core")
    from kinac.rt import cuda
    from kinac.rt.comm.tcp import process_client

    dev = cuda.get_device(env.local_rank)
    res = cuda.default_resource()
    x = cuda.Tensor.from_numpy(np.full(1024, env.rank + 1, np.float32), res)
    r = cuda.Tensor.from_numpy(np.zeros(1024, np.float32), res)
    comm = nccl.world((env.world_size,), ("tp",), process_client(env))
    comm.all_reduce(x, r)
    dev.synchronize()
    assert np.all(r.numpy() == env.world_size * (env.world_size + 1) / 2), os.environ.get("RANK")
