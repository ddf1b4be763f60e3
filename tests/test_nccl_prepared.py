"""Prepared NCCL collectives (kinac/rt/comm/nccl_prepared.py) and the program steps' layout
calls, on the CPU over the fake binding (tests/nccl_fakes.py: it reads the raw addresses and
moves the data with the simulator).

What issue 13's last host-cost gap needs pinned: a prepared call checks its buffers once, at
bind time (the check functions are counted), and each call is then exactly the bare binding
call with the same integers, no driver call, no log entry, on the simulator's results with new
data in the same buffers; a bad buffer, stream, kind or communicator is refused at bind time
with a one-line ``KinaRuntimeError`` (the CLI prints it as ``kinac: error: ...``), nothing
reaching NCCL; a destroyed communicator's prepared calls raise. A program step's collective
is checked at its first run and only compared afterwards. The eager API's log stays bounded."""

from __future__ import annotations

import threading
import types
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle, no_driver

from kinac.artifacts.sharded import Collective
from kinac.errors import KinaError, KinaRuntimeError
from kinac.rt.comm import device_run, nccl, nccl_calls, nccl_plan, simulate
from kinac.rt.comm.device_run import HostOps
from kinac.rt.comm.execute import collective_step
from kinac.rt.cuda.tensor import KDL_CUDA, Tensor

MESH = types.SimpleNamespace(shape=(2,), axes=("tp",))


def dev(a: np.ndarray, device: tuple[int, int] = (KDL_CUDA, 0)) -> Tensor:
    """A 'device' tensor over numpy memory (what the fake binding reads)."""
    return Tensor(a.ctypes.data, a.shape, a.dtype.name, device=device, owner=a)


def host(t: Tensor) -> np.ndarray:
    a = t.owner
    assert isinstance(a, np.ndarray)
    return a


class Counted:
    """Counts the calls of the plan module's checks (the buffer resolution, the device
    check) per thread (a simulated rank): a prepared call must not make any."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by: dict[int, int] = {}
        for name in ("buffer_of", "check_device", "resolve"):
            real = getattr(nccl_plan, name)
            monkeypatch.setattr(nccl_plan, name, self.wrap(real))

    @property
    def n(self) -> int:
        return self.by.get(threading.get_ident(), 0)

    def wrap(self, f: Any) -> Any:
        def counted(*a: Any, **k: Any) -> Any:
            me = threading.get_ident()
            self.by[me] = self.by.get(me, 0) + 1
            return f(*a, **k)

        return counted


def test_prepared_calls_are_checked_once_then_the_bindings_call_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    no_driver(monkeypatch)
    checks = Counted(monkeypatch)

    def rank(sim: Any) -> list[bool]:
        lib = FakeLib(sim, MESH)
        made: list[tuple[tuple[int, ...], int]] = []

        def alloc(shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Tensor:
            made.append((tuple(shape), stream))
            return dev(np.zeros(shape, dtype))

        c = nccl.NcclComm(lib, Handle(sim), (2,), ("tp",), ("tp",), sim.global_rank, alloc)
        stream = types.SimpleNamespace(handle=17)  # a kinac Stream: its int handle
        x = dev(np.zeros((4, 3), np.float32))
        chunk = dev(host(x)[2 * sim.global_rank : 2 * sim.global_rank + 2])
        outs = {  # all-gather in place: the send is this rank's chunk of the receive
            "all-reduce": (x, dev(np.zeros((4, 3), np.float32)), "max"),
            "all-gather": (chunk, x, "sum"),
            "reduce-scatter": (x, dev(np.zeros((2, 3), np.float32)), "sum"),
            "all-to-all": (x, dev(np.zeros((4, 3), np.float32)), "sum"),
        }
        seen = []
        for kind, (send, recv, op) in outs.items():
            before = checks.n
            p = c.prepare(kind, send, recv, op, stream=stream, tag=(kind, "m.kina:2:3"))
            assert checks.n > before and (p.kind, p.recv, p.stream) == (kind, recv, 17)
            assert p.entry is not None and p.entry.span == "m.kina:2:3"
            checked, planned = checks.n, c.plans_made
            for k in range(3):
                data = np.random.default_rng(10 * k + sim.global_rank).standard_normal((4, 3))
                host(x)[...] = data.astype(np.float32)
                kw = {"op": op} if kind in ("all-reduce", "reduce-scatter") else {}
                want = getattr(sim, kind.replace("-", "_"))(host(send).copy(), **kw)
                n = len(lib.calls)
                assert p() is None
                calls = lib.calls[n:]
                if kind == "all-to-all":  # one group: a send and a receive per peer
                    assert [t[0] for t in calls] == [
                        "group_start",
                        *["send", "recv"] * 2,
                        "group_end",
                    ]
                    assert calls[1] == ("send", x.ptr, 6, 7, 0, 17)
                    assert calls[4] == ("recv", recv.ptr + 24, 6, 7, 1, 17)
                else:  # the one NCCL call, the integers a bare caller would pass
                    count = {"all-gather": 6, "reduce-scatter": 6}.get(kind, 12)
                    assert [t[1:5] for t in calls] == [(send.ptr, recv.ptr, count, 7)]
                    assert calls[0][-1] == 17
                seen.append(host(recv).tobytes() == want.tobytes())
            assert (checks.n, c.plans_made) == (checked, planned)  # nothing checked again
        assert c.log == [] and made == []  # no log entry, nothing allocated
        # no receive buffer: allocated once, at bind time, on the bound stream
        p = c.prepare("all-reduce", x, stream=stream)
        assert made == [((4, 3), 17)] and host(p.recv).shape == (4, 3)
        for _ in range(3):
            p()
        assert made == [((4, 3), 17)]
        # the barrier: the one-element all-reduce, its buffer made on its stream
        b = c.prepare("barrier", stream=5)
        b()
        _, s, r, n, dt, op, st = lib.calls[-1]
        assert (s == r, n, dt, op, st) == (True, 1, 2, 0, 5)
        assert made[-1] == ((1,), 5)
        return seen

    assert simulate(MESH, rank) == [[True] * 12] * 2


def test_a_bad_buffer_is_refused_at_bind_time_in_one_line() -> None:
    lib = FakeLib()
    c = nccl.NcclComm(lib, Handle(None), (2,), ("tp",), ("tp",), 0, device=0)
    base = np.zeros(8, np.float32)
    x, r = dev(base[:4]), dev(np.zeros(4, np.float32))
    shifted = dev(base[1:5])  # overlaps x by three elements
    bad = [
        (lambda: c.prepare("all-reduce", x, shifted), "overlaps the send buffer"),
        (lambda: c.prepare("all-to-all", x, x), "all-to-all has no in-place form"),
        (lambda: c.prepare("all-gather", dev(base[1:3]), dev(base[:4])), "overlaps"),
        (lambda: c.prepare("all-reduce", x, dev(np.zeros(3, np.float32))), "expected f32"),
        (lambda: c.prepare("all-reduce", x, dev(np.zeros(4, np.int32))), r"is i32\[4\]"),
        (lambda: c.prepare("all-reduce", x, r, stream="s0"), "str is not a CUDA stream"),
        (lambda: c.prepare("all-reduce", x, r, stream=-1), "-1 is not a CUDA stream handle"),
        (lambda: c.prepare("all-reduce", Tensor.host(np.ones(4, np.float32)), r), "host memory"),
        (
            lambda: c.prepare("all-reduce", x, dev(np.zeros(4, np.float32), (KDL_CUDA, 1))),
            "is on GPU 1, this communicator's GPU is 0",
        ),
        (lambda: c.prepare("all-gather", x, dev(np.zeros(8, np.float32)), "max"), "no reduction"),
        (lambda: c.prepare("all-reduce", x, r, "mean"), "unknown reduction 'mean'"),
        (lambda: c.prepare("broadcast", x, r), "no collective 'broadcast' to prepare"),
        (lambda: c.prepare("all-reduce"), "no send buffer"),
        (lambda: c.prepare("barrier", x), "a barrier takes no buffers"),
        (lambda: c.prepare("all-reduce", x), "needs a receive buffer"),  # no allocator
    ]
    for call, message in bad:
        with pytest.raises(KinaRuntimeError, match=message) as e:
            call()
        assert isinstance(e.value, KinaError) and "\n" not in str(e.value)  # kinac: error: ...
        assert str(e.value).startswith("rank 0: prepared "), str(e.value)
    assert lib.calls == []  # nothing reached NCCL
    # NCCL's in-place forms are not overlaps
    lib.all_reduce = lambda *a: lib.calls.append(a)  # type: ignore[method-assign]
    lib.all_gather = lib.reduce_scatter = lib.all_reduce  # type: ignore[method-assign,assignment]
    c.prepare("all-reduce", x, x)()
    c.prepare("all-gather", dev(base[4:]), dev(base))()  # this rank's chunk (any chunk passes)
    c.prepare("reduce-scatter", dev(base), dev(base[4:]))()
    assert len(lib.calls) == 3
    p = c.prepare("all-reduce", x, r)
    c.destroy()  # the handle is freed: its prepared calls refuse, and so does preparing
    with pytest.raises(KinaRuntimeError, match="was destroyed"):
        p()
    with pytest.raises(KinaRuntimeError, match="was destroyed"):
        c.prepare("all-reduce", x, r)
    assert len(lib.calls) == 4 and lib.calls[-1][0] == "destroy"  # no collective reached NCCL


class TensorOps(HostOps):
    """The fake device with kinac tensors over host memory (what a GPU rank's buffers are),
    so that the program steps take the prepared path."""

    def empty(self, shape: tuple[int, ...], dtype: Any, stream: int = 0) -> Any:  # a Tensor
        return dev(super().empty(shape, dtype))

    def view(self, buf: Any, shape: tuple[int, ...], offset: int = 0) -> Any:  # a Tensor
        return Tensor(buf.ptr + offset, tuple(shape), buf.dtype, device=buf.device, owner=buf)


def _step(kind: str, dim: int, op: str = "sum", cat: int = -1) -> Collective:
    return Collective(kind, "tp", 0, 1, dim, op, 0, "m.kina:1:1", "test", cat)


@pytest.mark.parametrize(
    "st",
    [_step("all-reduce", -1, "max"), _step("all-gather", 1), _step("reduce-scatter", 0)]
    + [_step("all-to-all", 1, cat=2)],
    ids=lambda s: f"{s.kind}-{s.dim}",
)
def test_a_program_step_is_checked_at_its_first_run_only(
    st: Collective, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run's send buffer is new (a segment's output): the step's layout call compares
    its layout and calls NCCL; the results equal the host runner's on every run."""
    checks = Counted(monkeypatch)

    def rank(sim: Any) -> list[Any]:
        ops = TensorOps()
        lib = FakeLib(sim, MESH)
        c = nccl.NcclComm(lib, Handle(sim), (2,), ("tp",), ("tp",), sim.global_rank, ops.empty)
        same, checked = [], 0
        for k in range(3):
            a = np.random.default_rng(10 * k + sim.global_rank).standard_normal((4, 6, 8))
            a = a.astype(np.float32)
            if k == 1:
                checked = checks.n
            got = device_run.device_collective(st, dev(a), c, ops)
            want = collective_step(st, a, sim)
            same.append(read(got).tobytes() == want.tobytes())
        after = checks.n - checked
        # another layout for the same step (a buffer of another shape): checked again
        a = np.random.default_rng(7).standard_normal((2, 6, 8)).astype(np.float32)
        got = device_run.device_collective(st, dev(a), c, ops)
        same.append(read(got).tobytes() == collective_step(st, a, sim).tobytes())
        return [same, c.plans_made, after, len(c.log)]

    got = simulate(MESH, rank)
    assert all(same == [True] * 4 for same, *_ in got)
    assert all(plans == 2 for _, plans, _, _ in got)  # one plan for three runs, one for (2 6 8)
    assert all(n_log == 4 for *_, n_log in got)  # the program's log: an entry per run
    if st.kind == "all-reduce" or st.dim == 0:  # no dim move: nothing resolved after run 1
        assert all(after == 0 for _, _, after, _ in got)


def read(t: Tensor) -> np.ndarray:
    """The bytes a tensor over host memory addresses, as an array."""
    import ctypes

    n = int(np.prod(t.shape)) * 4
    return np.frombuffer((ctypes.c_char * n).from_address(t.ptr), np.float32).reshape(t.shape)  # type: ignore[call-overload]


def test_the_eager_log_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A direct caller's loop of eager collectives grew the log by an entry per call, without
    bound; now it keeps the newest ``LOG_CAP // 2`` past ``LOG_CAP``."""
    monkeypatch.setattr(nccl_calls, "LOG_CAP", 8)
    lib = FakeLib()
    lib.all_reduce = lambda *a: None  # type: ignore[method-assign]
    c = nccl.NcclComm(lib, Handle(None), (2,), ("tp",), ("tp",), 0)
    sub_log = c.log
    x, r = dev(np.ones(4, np.float32)), dev(np.zeros(4, np.float32))
    lens = []
    for k in range(40):
        c.all_reduce(x, r, tag=("all-reduce", f"m.kina:{k}:1"))
        lens.append(len(c.log))
    assert max(lens) == 8 and c.log is sub_log  # trimmed in place (splits share the list)
    assert [e.span for e in c.log][-1] == "m.kina:39:1"
