"""benches/collectives.py's measuring and table code, run on the CPU over fakes.

Why: the bench runs on the H200 in a device call that costs minutes, and on 2 and 4 GPUs
(``kinac launch -n N``) on a machine never lent yet; a typo in a variant, the world-size
arithmetic or the table would cost that run. Here two simulated ranks (threads) run the bench's
``run`` as two launched ranks would, over the fake bindings (which read the raw addresses and
move the data with the simulator) and host memory: every collective and the barrier, kinac's
prepared calls against the bare ones, rank 0 alone writing the table."""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle

from kinac.rt.comm import nccl, simulate
from kinac.rt.cuda.tensor import Tensor

ROOT = Path(__file__).resolve().parent.parent


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location(
        "kinac_bench_collectives", ROOT / "benches" / "collectives.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclass looks its module up
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


def _rig(bench: Any, sim: Any, m: Any, lib: FakeLib) -> Any:
    """One fake rank's rig: the simulator rank as NCCL (through the fake binding, which reads
    the raw addresses), host memory as the device, counting events, no graph capture."""
    ops = Ops()
    comm = nccl.NcclComm(
        lib, Handle(sim), tuple(m.shape), ("x",), ("x",), sim.global_rank, alloc=ops.empty
    )
    fake_cuda = types.SimpleNamespace(
        Event=Event,
        capture=lambda seq, stream, name: types.SimpleNamespace(
            captured=False, fallback_reason="fake"
        ),
    )
    return bench.Rig(
        env=types.SimpleNamespace(rank=sim.global_rank, world_size=sim.size),
        client=types.SimpleNamespace(barrier=sim.barrier),
        lib=lib,
        ops=ops,
        cuda=fake_cuda,
        stream=types.SimpleNamespace(handle=5, synchronize=lambda: None),
        memset=lambda t, n: None,
        comm=comm,
    )


def test_two_fake_ranks_run_the_bench_and_rank_zero_writes_the_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``kinac launch -n 2 -- python3 benches/collectives.py --gpu``'s path on two simulated
    ranks: the launch's world size sizes every collective's buffers, kinac's prepared calls
    pass NCCL exactly the bare call's arguments (like for like), only rank 0 writes."""
    monkeypatch.setattr(sys, "path", sys.path[:])  # the bench rewrites sys.path on import
    bench = _bench()
    m = types.SimpleNamespace(shape=(2,), axes=("x",))
    argv = ["--gpu", "--max-mib", "1", "--rounds", "1", "--iters", "1", "--small-iters", "2"]
    argv += ["--no-scaling", "--host-calls", "20"]
    libs: list[FakeLib] = []

    def rank(sim: Any) -> int:
        lib = FakeLib(sim, m)
        libs.append(lib)
        out = tmp_path / f"rank{sim.global_rank}"
        parsed = bench.parse_args([*argv, "--out", str(out)])
        return int(bench.run(parsed, _rig(bench, sim, m, lib)))

    assert simulate(m, rank) == [0, 0]
    assert (tmp_path / "rank0" / "nccl_bench.md").exists()
    assert not (tmp_path / "rank1").exists()  # rank 0 alone writes
    info = json.loads((tmp_path / "rank0" / "nccl_bench.json").read_text())
    assert info["ranks"] == 2
    kinds = [r["kind"] for r in info["rows"]]
    assert kinds == ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "barrier"]
    for row in info["rows"]:
        assert row["kinac_ms"] > 0 and row["nccl_ms"] > 0, row
        assert set(row["errors"]) == {"kinac_graph", "nccl_graph"}  # no capture on the CPU
    count = (1 << 20) // 4
    for lib in libs:  # per kind: kinac's calls and the bare ones, argument for argument
        by = {
            k: {c[1:] for c in lib.calls if c[0] == k}
            for k in ("all_reduce", "all_gather", "reduce_scatter", "send")
        }
        assert {c[2] for c in by["all_reduce"]} == {count, 1}  # the tensors, the barrier
        assert len(by["all_reduce"]) == 3  # kinac = NCCL = the API call; and the barrier's
        assert len(by["all_gather"]) == 1 and next(iter(by["all_gather"]))[2] == count // 2
        assert len(by["reduce_scatter"]) == 1
        assert next(iter(by["reduce_scatter"]))[2] == count // 2
        assert len(by["send"]) == 2  # one per peer, the same for kinac's and the bare group
    table = (tmp_path / "rank0" / "nccl_bench.md").read_text()
    line = next(t for t in table.splitlines() if t.startswith("| all-gather | 1 MiB"))
    assert line.count("|") == 12
    # busbw at 2 ranks: algbw x 1/2 for all-gather
    cells = [c.strip() for c in line.split("|")[1:-1]]
    bus, alg = (float(v) for v in cells[8].split(" / ")[0:1] + cells[9].split(" / ")[0:1])
    assert bus == pytest.approx(alg / 2, abs=0.1)
    assert "kinac API us" in table and "- kinac prepared all-reduce: " in table


def test_the_scaling_row_and_host_overhead_render(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", sys.path[:])
    bench = _bench()
    host = bench.host_overhead(50, 2)
    assert {"kinac prepared all-reduce", "NCCL all-reduce (bare binding call)"} <= set(host)
    assert all(us > 0 for us in host.values())
    line = bench.scaling_line(2, {"block_sharded_ms": 1.5, "train_step_ms": 2.0})
    assert line.startswith("| 2 | 1.500 (-) | - |") and line.count("|") == 8


def test_runs_at_several_world_sizes_join_into_one_table(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``scripts/multi_gpu.sh``'s last step: the 1-, 2- and 4-rank runs' JSON into the scaling
    table and the bus bandwidth by world size."""
    monkeypatch.setattr(sys, "path", sys.path[:])
    bench = _bench()
    for n in (4, 1, 2):
        row = {"kind": "all-reduce", "bytes": 1 << 20, "kinac_ms": 0.01, "nccl_ms": 0.01}
        sc = {"block_sharded_ms": 1.0 / n, "train_step_ms": 2.0}
        info = {"ranks": n, "rows": [row | {"errors": {}}], "scaling": sc}
        (tmp_path / f"n{n}").mkdir()
        (tmp_path / f"n{n}" / "nccl_bench.json").write_text(json.dumps(info))
    out = tmp_path / "joined"
    dirs = [str(tmp_path / f"n{n}") for n in (4, 1, 2)]
    assert bench.main(["--join", *dirs, "--out", str(out)]) == 0
    text = (out / "nccl_scaling.md").read_text()
    lines = text.splitlines()
    assert [t.split("|")[1].strip() for t in lines if t.startswith("| ") and "(-)" in t] == [
        "1",
        "2",
        "4",
    ]
    # busbw of 1 MiB in 10 us: algbw 104.9 GB/s, x 0 / 1 / 1.5 for all-reduce at 1 / 2 / 4
    (bw,) = [t for t in lines if t.startswith("| all-reduce | 1 MiB")]
    assert bw.endswith("| 0.0 / 0.0 (1.00) | 104.9 / 104.9 (1.00) | 157.3 / 157.3 (1.00) |")


def test_without_a_gpu_the_bench_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "path", sys.path[:])
    bench = _bench()
    from kinac.rt import cuda

    if cuda.available():  # pragma: no cover - a GPU machine measures instead
        pytest.skip("a GPU is here")
    for k in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(k, raising=False)
    code = bench.main(["--gpu", "--no-scaling"])
    err = capsys.readouterr().err
    assert code != 0 and err.startswith("kinac: error: ") and "Traceback" not in err
