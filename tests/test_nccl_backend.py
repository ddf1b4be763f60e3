"""The NCCL backend (kinac/rt/comm/nccl.py) without a GPU: a fake ``nccl.bindings.nccl`` over
host memory (tests/nccl_fakes.py) reads the raw addresses, counts and codes the backend passes
and computes each collective with the simulator. The tables, the argument mapping (addresses of
the caller's buffers, the caller's stream, the op and dtype codes), all-to-all as grouped
send/recv, ncclCommSplit's colour and key on a 2x2 mesh, communicators created once per mesh
and axis, the unique id through the rendezvous, every collective equal to the simulator's on
every axis of a 2x2 mesh; a real two-GPU run is marked gpu (skipped here)."""

from __future__ import annotations

import threading
import types
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle

from kinac.errors import KinaRuntimeError
from kinac.rt.comm import nccl, simulate
from kinac.rt.comm.device_run import HostOps
from kinac.rt.comm.launch import free_port
from kinac.rt.comm.rendezvous import DistEnv, join


def mesh(shape: tuple[int, ...], axes: tuple[str, ...]) -> Any:
    return types.SimpleNamespace(shape=shape, axes=axes)


def comm_of(sim: Any, m: Any, lib: FakeLib | None = None, **kw: Any) -> nccl.NcclComm:
    """The NCCL communicator of simulator rank ``sim`` over a fake library."""
    lib = lib or FakeLib(sim, m)
    axes = tuple(m.axes)
    return nccl.NcclComm(
        lib, Handle(sim), tuple(m.shape), axes, axes, sim.global_rank, alloc=HostOps().empty, **kw
    )


def test_tables_cover_the_protocol() -> None:
    assert set(nccl.NCCL_OPS) == {"sum", "prod", "max", "min", "avg"}
    assert nccl.NCCL_DTYPES["bf16"] == "bfloat16" and nccl.NCCL_DTYPES["bool"] == "uint8"
    # ncclDataType_t / ncclRedOp_t as nccl.h (and nccl4py's NcclDataType) number them
    assert nccl.NCCL_TYPE_CODES["float32"] == 7 and nccl.NCCL_TYPE_CODES["bfloat16"] == 9
    assert nccl.NCCL_OP_CODES == {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
    from kinac.dtypes import DTYPES  # every Kina dtype has a NCCL type

    assert set(DTYPES) <= set(nccl.NCCL_DTYPES)
    assert all(nccl.NCCL_DTYPES[d] in nccl.NCCL_TYPE_CODES for d in DTYPES)


def test_split_colour_and_key_and_sub_made_once() -> None:
    lib = FakeLib()
    comms = [
        nccl.NcclComm(lib, Handle(None), (2, 2), ("dp", "tp"), ("dp", "tp"), r) for r in range(4)
    ]
    # colour: the other coordinate's index; key: the coordinate along the axis
    assert [c.split_key("tp") for c in comms] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert [c.split_key("dp") for c in comms] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    c = comms[3]
    tp = c.sub("tp")
    assert c.sub("tp") is tp and (tp.rank, tp.size, tp.axis) == (1, 2, "tp")
    assert lib.calls == [("split", 1, 1)]  # once
    assert tp.sub("tp") is tp
    with pytest.raises(KinaRuntimeError, match="no mesh axis 'dp' in this communicator"):
        tp.sub("dp")


def test_world_is_made_once_from_rank_zeros_unique_id() -> None:
    port = free_port()
    libs = [FakeLib(uid=bytes(range(128))), FakeLib(uid=b"\xff" * 128)]
    made: list[Any] = [None, None]

    def body(r: int) -> None:
        c = join(DistEnv(r, 2, r, "127.0.0.1", port, 5.0))
        made[r] = nccl.world((2,), ("tp",), c, lib=libs[r])
        c.close()

    nccl.forget_worlds()
    ts = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    # rank 0 made the id; both initialised with rank 0's bytes, no config
    assert libs[0].calls == [("get_unique_id",), ("init", 2, 0, 1, bytes(range(128)), 0)]
    assert libs[1].calls == [("init", 2, 1, 1, bytes(range(128)), 0)]
    w = nccl._WORLDS[(2,), ("tp",)]
    assert w in made  # cached per mesh (both threads share this process's cache)
    nccl.forget_worlds()


def test_collectives_pass_the_buffers_addresses_codes_and_stream() -> None:
    m = mesh((1,), ("tp",))

    def rank(sim: Any) -> list[Any]:
        lib = FakeLib(sim, m)
        c = comm_of(sim, m, lib)
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        r = np.empty_like(x)
        assert c.all_reduce(x, r, "max", stream=7) is r
        s = types.SimpleNamespace(handle=9)  # a kinac Stream: its handle
        g = c.all_gather(x, stream=s)
        rs = c.reduce_scatter(x, op="avg")
        bf = np.arange(4, dtype=np.uint16)  # bf16 as the host's uint16: NCCL's bf16
        c.all_reduce(bf, bf)  # in place
        a = c.all_to_all(x)
        return [lib.calls, x, r, g, rs, a]

    calls, x, r, g, rs, a = simulate(m, rank)[0]
    p = x.ctypes.data
    assert calls[0] == ("all_reduce", p, r.ctypes.data, 12, 7, 2, 7)  # f32 = 7, max = 2
    assert calls[1] == ("all_gather", p, g.ctypes.data, 12, 7, 9)
    assert calls[2] == ("reduce_scatter", p, rs.ctypes.data, 12, 7, 4, 0)  # avg = 4
    assert calls[3][0] == "all_reduce" and calls[3][1] == calls[3][2] and calls[3][4] == 9
    assert [c[0] for c in calls[4:]] == ["group_start", "send", "recv", "group_end"]
    for got in (r, g, rs, a):
        assert got.tobytes() == x.tobytes()  # one rank: every collective is the identity


def test_all_to_all_is_one_send_and_recv_per_peer_at_chunk_offsets() -> None:
    lib = FakeLib()
    c = nccl.NcclComm(lib, Handle(None), (4,), ("ep",), ("ep",), 2)
    x = np.zeros((8, 3), np.float64)
    r = np.zeros_like(x)
    lib.group_end = lambda: lib.calls.append(("group_end",))  # type: ignore[method-assign]
    c.all_to_all(x, r, stream=5)
    step = 2 * 3 * 8  # two rows of three f64 per peer
    sends = [k for k in lib.calls if k[0] == "send"]
    recvs = [k for k in lib.calls if k[0] == "recv"]
    assert sends == [("send", x.ctypes.data + j * step, 6, 8, j, 5) for j in range(4)]
    assert recvs == [("recv", r.ctypes.data + j * step, 6, 8, j, 5) for j in range(4)]
    assert lib.calls[0] == ("group_start",) and lib.calls[-1] == ("group_end",)


CASES = [
    ("all-reduce", "sum", np.float32),
    ("all-reduce", "max", np.int32),
    ("all-reduce", "avg", np.float64),
    ("all-reduce", "sum", np.uint16),  # bf16
    ("all-gather", "sum", np.float32),
    ("reduce-scatter", "sum", np.float32),
    ("reduce-scatter", "min", np.int64),
    ("all-to-all", "sum", np.float16),
]


@pytest.mark.parametrize(("kind", "op", "dtype"), CASES)
def test_each_collective_equals_the_simulators_on_every_axis(
    kind: str, op: str, dtype: Any
) -> None:
    """On a 2x2 mesh, over dp, tp and the world: NcclComm through the fake library (raw
    addresses and codes) gives the bytes the simulator gives on the same sends."""
    m = mesh((2, 2), ("dp", "tp"))
    method = kind.replace("-", "_")
    kw = {"op": op} if kind in ("all-reduce", "reduce-scatter") else {}

    def data(r: int, j: int) -> np.ndarray:
        rng = np.random.default_rng(100 * j + r)
        if dtype == np.uint16:
            return (rng.standard_normal((4, 3)).astype(np.float32).view(np.uint32) >> 16).astype(
                np.uint16
            )
        return (rng.standard_normal((4, 3)) * 10).astype(dtype)

    def rank(sim: Any) -> list[bytes]:
        c = comm_of(sim, m)
        out = []
        for j, group in enumerate(("tp", "dp", None)):
            x = data(sim.global_rank, j)
            mine = c if group is None else c.sub(group)
            ref = sim if group is None else sim.sub(group)
            got = getattr(mine, method)(x, **kw)
            want = getattr(ref, method)(x, **kw)
            assert got.shape == want.shape and got.dtype == want.dtype
            out.append(got.tobytes() == want.tobytes())
        return out

    assert simulate(m, rank) == [[True, True, True]] * 4


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
        (
            lambda c: c.all_reduce(np.ones(2, np.float32), np.ones(2, np.float64)),
            r"receive buffer is f64\[2\], expected f32\[2\]",
        ),
        (lambda c: c.all_reduce(np.ones((2, 2), np.float32).T), "contiguous"),
    ],
)
def test_bad_calls_refused_before_nccl(call: Any, message: str) -> None:
    lib = FakeLib()
    c = nccl.NcclComm(lib, Handle(None), (2,), ("tp",), ("tp",), 0)
    with pytest.raises(KinaRuntimeError, match=message):
        call(c)
    assert lib.calls == []
    with pytest.raises(KinaRuntimeError, match="needs a receive buffer"):
        c.all_gather(np.ones(2, np.float32))  # no allocator given


def test_device_barrier_is_a_one_element_all_reduce_on_the_stream() -> None:
    lib = FakeLib()
    lib.all_reduce = lambda *a: lib.calls.append(("all_reduce", *a))  # type: ignore[method-assign]
    host: list[int] = []
    made: list[tuple[tuple[int, ...], int]] = []

    def alloc(shape: tuple[int, ...], dtype: str, stream: int = 0) -> np.ndarray:
        made.append((shape, stream))
        return np.zeros(shape, dtype)

    c = nccl.NcclComm(
        lib, "h", (2,), ("tp",), ("tp",), 0, alloc=alloc, barrier=lambda: host.append(1)
    )
    c.barrier(stream=3)
    c.barrier(stream=3)
    (_, p, r, n, dt, op, h, st), second = lib.calls
    assert (p == r, n, dt, op, h, st) == (True, 1, 2, 0, "h", 3) and second == lib.calls[0]
    # its buffer is made once, on the barrier's stream (it was on stream 0: the pool could
    # hand it memory still in use by work queued there, unordered with stream 3)
    assert made == [((1,), 3)]
    assert host == []  # the device barrier does not wait on the host
    c.host_barrier()
    assert host == [1]


def test_stream_handles() -> None:
    assert nccl.stream_handle(None) == 0 and nccl.stream_handle(5) == 5
    assert nccl.stream_handle(types.SimpleNamespace(handle=7)) == 7

    class Cs:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 11)

    assert nccl.stream_handle(Cs()) == 11


def test_missing_nccl4py_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nccl", None)
    monkeypatch.setitem(sys.modules, "nccl.bindings", None)
    monkeypatch.setitem(sys.modules, "nccl.core", None)
    with pytest.raises(KinaRuntimeError, match=r"needs nccl4py: pip install 'kinac\[cu13\]'"):
        nccl.nccl_lib()
    with pytest.raises(KinaRuntimeError, match=r"needs nccl4py"):
        nccl.nccl_core()


def test_backend_choice_from_the_launch() -> None:
    from kinac.api_mesh import choose_backend

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
    pytest.importorskip("nccl.bindings.nccl")
    from kinac.rt import cuda
    from kinac.rt.comm.tcp import process_client

    dev = cuda.get_device(0)  # kinac launch gives each rank one GPU
    res = cuda.default_resource()
    x = cuda.Tensor.from_numpy(np.full(1024, env.rank + 1, np.float32), res)
    r = cuda.Tensor.from_numpy(np.zeros(1024, np.float32), res)
    comm = nccl.world((env.world_size,), ("tp",), process_client(env))
    comm.all_reduce(x, r)
    dev.synchronize()
    assert np.all(r.numpy() == env.world_size * (env.world_size + 1) / 2), os.environ.get("RANK")
