"""A rank whose program fails on it alone, on fake NCCL ranks (tests/nccl_fakes.py over the
simulator, the fake device of kinac/rt/comm/device_run.py): every rank must finish with the
right result or stop with an error naming the rank and the cause, and never pair other
collectives than its peers (with real NCCL that is a hang or a silent wrong result).

The failures are injected on rank 1 of a program on a mesh of 2 (the input's copy in, an
all-reduce, a second all-reduce, the outputs' all-gather, the output's copy out): a prepared
collective's bind refused, its first run failing before any collective, between two
collectives, after the last one, and its capture refused."""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle

from kinac.artifacts.sharded import Collective, DeviceProgram, MeshSpec, ParamLayout
from kinac.errors import KinaRuntimeError
from kinac.rt.comm import nccl, program_graph, simulate
from kinac.rt.comm.device_run import HostOps
from kinac.rt.comm.distributed import run_on_comm
from kinac.tir.graph import TType

MESH = MeshSpec("m", (2,), ("tp",))
WHOLE = ParamLayout(((), ()))
T = TType("f32", (4, 8))
PROGRAM = DeviceProgram(
    MESH,
    (("x", T, WHOLE),),
    ((2, T, WHOLE),),
    (
        Collective("all-reduce", "tp", 0, 1, -1, "sum", 128, "m.kina:2:3", "test"),
        Collective("all-reduce", "tp", 1, 2, -1, "max", 128, "m.kina:3:3", "test"),
    ),
    (),
)


class Injected(RuntimeError):
    """The fault injected on rank 1."""


class FaultyOps(HostOps):
    """The fake device, failing where ``fault`` says during the first run."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault, self.copies_done = fault, 0

    def copy_async(self, dst: int, src: int, nbytes: int, stream: Any) -> None:
        self.copies_done += 1
        if (self.fault, self.copies_done) in (("early", 1), ("late", 2)):  # x in, output out
            raise Injected(f"copy {self.copies_done} failed")
        super().copy_async(dst, src, nbytes, stream)

    def capture(self, sequence: Any, stream: Any, name: str = "") -> Any:
        if self.fault == "capture":
            raise Injected("capture refused")
        return super().capture(sequence, stream, name)


class FaultyLib(FakeLib):
    """Fake NCCL whose second all-reduce fails (between the program's collectives)."""

    fault = ""
    reduces = 0

    def all_reduce(self, s: int, r: int, n: int, dt: int, op: int, comm: Handle, st: int) -> None:
        self.reduces += 1
        if self.fault == "between" and self.reduces == 2:
            raise Injected("ncclAllReduce returned ncclSystemError")
        super().all_reduce(s, r, n, dt, op, comm, st)


class FaultyComm(nccl.NcclComm):
    """A communicator whose prepared calls are refused (a prepared collective's bind)."""

    def prepare(self, *a: Any, **kw: Any) -> Any:
        raise Injected("prepared all-reduce refused")


def _run(fault: str, x: np.ndarray, calls: int = 2) -> tuple[list[Any], list[str]]:
    """Two fake ranks, each calling the program ``calls`` times (rank 1 with ``fault``):
    every rank's outputs, and the warnings."""
    program_graph.forget()

    def rank(sim: Any) -> Any:
        mine = fault if sim.global_rank == 1 else ""
        ops = FaultyOps(mine)
        lib = FaultyLib(sim, MESH)
        lib.fault = mine
        kind = FaultyComm if mine == "prepare" else nccl.NcclComm
        comm = kind(lib, Handle(sim), (2,), ("tp",), ("tp",), sim.global_rank, ops.empty)
        return [run_on_comm(PROGRAM, (), [x], comm, ops)[0][0] for _ in range(calls)]

    try:
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            got = simulate(MESH, rank, timeout_s=2.0)
    finally:
        program_graph.forget()
    return got, [str(w.message) for w in warned]


@pytest.mark.parametrize("fault", ["", "prepare", "early", "capture"])
def test_a_failure_before_any_collective_or_after_all_still_gives_every_rank_the_result(
    fault: str,
) -> None:
    """Rank 1 cannot bind (a prepared collective refused), its first run fails before its
    first collective, or its capture is refused after a good first run: rank 1 warns and
    runs step by step (or replays its bound calls eagerly), rank 0 runs its graph, and their
    collectives still pair one for one: both ranks get the result (x + x, then the max of
    equal values) on both calls, within the simulator's 2 s deadline (a mismatch would be
    reported). Before the fix, a refused capture ran the program again step by step after
    its good first run: its all-reduce waited for a peer that had returned."""
    x = np.random.default_rng(7).standard_normal((4, 8)).astype(np.float32)
    got, warned = _run(fault, x)
    for per_rank in got:
        for out in per_rank:
            assert out.tobytes() == (x + x).tobytes()
    assert [w for w in warned if "Injected" in w] if fault else not warned, warned


@pytest.mark.parametrize("fault", ["between", "late"])
def test_a_first_run_failing_after_a_collective_stops_every_rank_naming_it(fault: str) -> None:
    """Rank 1's first run fails after it issued a collective (between the two all-reduces,
    or after the last collective): it must not run the program again step by step (its
    collectives would pair with its peers' next ones: with real NCCL a hang). The run stops
    with rank 1's error, naming the cause, within the deadline (before the fix: a collective
    mismatch report, or rank 1 waiting on a peer that had returned)."""
    with pytest.raises(KinaRuntimeError) as err:
        _run(fault, np.ones((4, 8), np.float32))
    text = str(err.value)
    assert text.startswith("rank 1: its sharded program's first run"), text
    assert "Injected" in text and "mismatch" not in text, text


class BlockingLib(FakeLib):
    """Fake NCCL of rank 0 whose peer never joins: a collective waits (as NCCL's kernels
    wait on the device) until ``ncclCommAbort``, or 5 s, then says the peer never came."""

    def __init__(self) -> None:
        super().__init__()
        self.aborted = threading.Event()

    def comm_init_rank_scalable(self, n: int, rank: int, nids: int, ids: Any, cfg: int) -> Handle:
        return Handle(None, tuple(range(n)))

    def all_reduce(self, s: int, r: int, n: int, dt: int, op: int, comm: Handle, st: int) -> None:
        if not self.aborted.wait(5.0):
            raise Injected("the peer never joined the all-reduce")

    def comm_abort(self, comm: Handle) -> None:
        self.calls.append(("abort",))
        self.aborted.set()


@pytest.mark.parametrize("how", ["fails", "dies"])
def test_a_rank_waiting_in_nccl_for_a_failed_peer_stops_naming_it(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Rank 0 (``run_nccl``) waits in an all-reduce that rank 1 will never join: rank 1 failed
    on its own and told the rendezvous, or died (its connection closed without a goodbye, as
    a killed process's does). The master pushes that to rank 0, whose watchdog
    aborts its NCCL communicator (``ncclCommAbort``): the wait ends and rank 0 stops with rank
    1's failure (a RankFailure, exit code 4), within a second; any later use of the aborted
    communicator raises the same. Before, rank 0 waited in NCCL until a launcher killed it
    (here: the fake's 5 s, then an error of its own)."""
    from kinac.rt.comm import tcp
    from kinac.rt.comm.distributed import run_nccl
    from kinac.rt.comm.launch import free_port
    from kinac.rt.comm.rendezvous import DistEnv, RankFailure, join

    port = free_port()
    monkeypatch.setattr(tcp, "_CLIENT", None)
    nccl.forget_worlds()

    def peer() -> None:  # rank 1: joins the world (the unique id), then fails on its own
        client = join(DistEnv(1, 2, 1, "127.0.0.1", port, 5.0))
        client.unique_id()
        time.sleep(0.2)  # rank 0 is in its all-reduce by now
        if how == "dies":
            client.sock.close()
            return
        client.abort("KinaRuntimeError: a runtime check failed at m.kina:2:3")
        client.close()

    threading.Thread(target=peer, daemon=True).start()
    lib = BlockingLib()
    t0 = time.monotonic()
    try:
        with pytest.raises(RankFailure) as err, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env = DistEnv(0, 2, 0, "127.0.0.1", port, 5.0)
            run_nccl(PROGRAM, (), [np.ones((4, 8), np.float32)], env, HostOps(), lib)
        world = nccl.world((2,), ("tp",), None)  # the aborted world: any use says why
        with pytest.raises(RankFailure, match="^rank 1 (failed|died)"):
            world.all_reduce(np.ones(4, np.float32))
    finally:
        nccl.forget_worlds()
        tcp.close_process_client()
    assert str(err.value) == (
        "rank 1 died: its connection to the rendezvous closed (its last call: unique-id over world)"
        if how == "dies"
        else "rank 1 failed: KinaRuntimeError: a runtime check failed at m.kina:2:3"
    )
    assert err.value.exit_code == 4 and ("abort",) in lib.calls
    assert time.monotonic() - t0 < 2.0
