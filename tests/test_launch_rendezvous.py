"""The rendezvous (kinac/rt/comm/rendezvous.py) in one process: ranks are threads with their
own sockets, as processes would be. The unique id and the barrier; torchrun's environment
parsed; and every failure a rank can cause reported to every other rank, naming it, within the
timeout: a rank that never joins, one whose connection closes (dies), one that returns without
calling, one that calls something else, one that is late, and a master that is not there."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from kinac.errors import KinaUsageError
from kinac.rt.comm.launch import free_port
from kinac.rt.comm.rendezvous import (
    UNIQUE_ID_BYTES,
    DistEnv,
    RankFailure,
    RendezvousClient,
    join,
)
from kinac.rt.comm.tcp import COMBINE, TcpComm


def _ranks(n: int, fn: Callable[[int, RendezvousClient], Any], timeout: float = 5.0) -> list[Any]:
    """Run ``fn(rank, client)`` on n threads; each result or the exception it raised."""
    port = free_port()
    out: list[Any] = [None] * n

    def body(r: int) -> None:
        client = None
        try:
            client = join(DistEnv(r, n, r, "127.0.0.1", port, timeout), combine=COMBINE)
            out[r] = fn(r, client)
        except Exception as e:  # noqa: BLE001 - the test reads it
            out[r] = e
        finally:
            if client is not None and not isinstance(out[r], BaseException):
                client.close()

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout * 4 + 10)
    assert not any(t.is_alive() for t in threads), "a rank hung"
    return out


def test_env_from_torchrun_variables() -> None:
    assert DistEnv.from_env({}) is None
    env = DistEnv.from_env(
        {"WORLD_SIZE": "4", "RANK": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "1234"}
    )
    assert env == DistEnv(2, 4, 2, "10.0.0.1", 1234, 60.0)
    env = DistEnv.from_env(
        {
            "WORLD_SIZE": "2",
            "RANK": "1",
            "LOCAL_RANK": "0",
            "MASTER_PORT": "9",
            "KINAC_DIST_TIMEOUT": "3",
        }
    )
    assert env is not None and (env.local_rank, env.master_addr, env.timeout_s) == (
        0,
        "127.0.0.1",
        3.0,
    )


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"WORLD_SIZE": "2", "MASTER_PORT": "1"}, "WORLD_SIZE is set but RANK is not"),
        ({"WORLD_SIZE": "2", "RANK": "2", "MASTER_PORT": "1"}, "RANK=2 is not below WORLD_SIZE=2"),
        ({"WORLD_SIZE": "two", "RANK": "0"}, "WORLD_SIZE='two' is not an integer"),
        ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "70000"}, "is not a TCP port"),
        ({"WORLD_SIZE": "2", "RANK": "0"}, "MASTER_PORT is not"),
        (
            {"WORLD_SIZE": "1", "RANK": "0", "KINAC_DIST_TIMEOUT": "-1"},
            "KINAC_DIST_TIMEOUT=-1 must be positive",
        ),
    ],
)
def test_bad_environment_is_a_usage_error(environ: dict[str, str], message: str) -> None:
    with pytest.raises(KinaUsageError, match=message.replace("(", r"\(")):
        DistEnv.from_env(environ)


def test_unique_id_and_barrier_reach_every_rank() -> None:
    ident = bytes(range(128))
    got = _ranks(4, lambda r, c: (c.unique_id(lambda: ident), c.barrier(), c.unique_id())[::2])  # type: ignore[func-returns-value]
    assert all(g[0] == ident for g in got)
    assert len(got[0][1]) == UNIQUE_ID_BYTES and all(g[1] == got[0][1] for g in got)
    assert got[0][1] != ident  # a second id is a fresh one (os.urandom without a maker)


def test_a_rank_that_never_joins_is_named() -> None:
    port = free_port()
    errs: list[BaseException] = []

    def body(r: int) -> None:
        try:
            c = join(DistEnv(r, 3, r, "127.0.0.1", port, 1.0))
            c.barrier()
        except RankFailure as e:
            errs.append(e)

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(errs) == 2
    assert all("rank 2 never joined the rendezvous" in str(e) for e in errs), errs


def test_a_rank_that_dies_mid_run_is_named() -> None:
    def fn(r: int, c: RendezvousClient) -> Any:
        comm = TcpComm(c, (2,), ("tp",))
        comm.all_reduce(np.ones(4, np.float32), tag=("all-reduce", "m.kina:3:5"))
        if r == 1:
            c.sock.close()  # the process died: no goodbye
            return "died"
        return comm.all_reduce(np.ones(4, np.float32), tag=("all-reduce", "m.kina:4:5"))

    got = _ranks(2, fn)
    assert got[1] == "died"
    assert isinstance(got[0], RankFailure)
    assert "rank 1 died: its connection to the rendezvous closed" in str(got[0])
    assert "its last call: all-reduce(sum) over tp of f32[4] at m.kina:3:5" in str(got[0])


def test_a_rank_that_returns_without_calling() -> None:
    def fn(r: int, c: RendezvousClient) -> Any:
        if r == 1:
            return "done"  # closes with a goodbye
        return TcpComm(c, (2,), ("tp",)).all_gather(
            np.ones(2, np.int64), tag=("all-gather", "a:1:1")
        )

    got = _ranks(2, fn)
    assert isinstance(got[0], RankFailure), got
    msg = str(got[0])
    assert "rank 0 waits in all-gather over tp of i64[2] at a:1:1" in msg
    assert "rank 1 returned without calling it" in msg


def test_mismatched_calls_list_every_rank() -> None:
    def fn(r: int, c: RendezvousClient) -> Any:
        comm = TcpComm(c, (4,), ("tp",))
        x = np.ones(8, np.float32)
        if r == 2:
            return comm.all_gather(x, tag=("all-gather", "m.kina:9:1"))
        return comm.all_reduce(x, tag=("all-reduce", "m.kina:7:3"))

    got = _ranks(4, fn)
    assert all(isinstance(g, RankFailure) for g in got), got
    msg = str(got[0])
    assert "collective mismatch over tp (ranks 0 1 2 3): their call #1 differs" in msg
    assert "rank 2: all-gather over tp of f32[8] at m.kina:9:1  <- differs" in msg
    assert "rank 0: all-reduce(sum) over tp of f32[8] at m.kina:7:3\n" in msg


def test_a_late_rank_times_out_naming_it() -> None:
    gate = threading.Event()

    def fn(r: int, c: RendezvousClient) -> Any:
        if r == 1:
            gate.wait(5)  # computing, in no collective
            return "late"
        try:
            return TcpComm(c, (2,), ("tp",)).all_reduce(np.ones(2, np.float32))
        finally:
            gate.set()

    got = _ranks(2, fn, timeout=0.5)
    assert isinstance(got[0], RankFailure)
    msg = str(got[0])
    assert "collective timeout: rank 1 did not reach call #1 within 0.5 s" in msg
    assert "rank 0: waits in all-reduce(sum) over tp of f32[2] (its call #1)" in msg


def test_no_master_is_reported_not_a_hang() -> None:
    with pytest.raises(
        RankFailure, match=r"rank 1 could not reach the rendezvous master \(rank 0\)"
    ):
        RendezvousClient(DistEnv(1, 2, 1, "127.0.0.1", free_port(), 0.3))


def test_a_rank_that_fails_tells_the_others_why() -> None:
    def fn(r: int, c: RendezvousClient) -> Any:
        if r == 1:
            c.abort("KinaRuntimeError: gather index 9 out of range at m.kina:4:7")
            return "failed"
        return TcpComm(c, (2,), ("tp",)).all_reduce(np.ones(2, np.float32))

    got = _ranks(2, fn)
    assert isinstance(got[0], RankFailure)
    assert (
        str(got[0]) == "rank 1 failed: KinaRuntimeError: gather index 9 out of range at m.kina:4:7"
    )


def test_a_master_gone_reads_the_same_whether_the_send_or_the_wait_finds_it() -> None:
    """Which socket call sees rank 0 die is a race (a broken pipe on the send, a closed
    connection on the wait): every rank's report names the master and the collective it was
    in either way (the fresh-clone CI run once got only "lost the rendezvous master (rank 0):
    Broken pipe")."""
    import threading

    from kinac.rt.comm.rendezvous import RankFailure, RendezvousClient

    class _Gone:
        def sendall(self, data: bytes) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    client = RendezvousClient.__new__(RendezvousClient)
    client.rank, client.sock = 1, _Gone()  # type: ignore[assignment]
    client._seq, client._lock = {}, threading.Lock()
    head = {"kind": "all-reduce", "op": "sum", "axis": "tp", "shape": [2], "dtype": "f32"}
    with pytest.raises(RankFailure) as failed:
        client.round("tp", (0, 1), head, b"\0" * 8)
    assert "rank 1 lost the rendezvous master (rank 0) while in all-reduce(sum) over tp" in str(
        failed.value
    )
