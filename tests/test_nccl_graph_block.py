"""The Megatron block's NCCL program (``block_small`` on a mesh of one, target='cuda', as
tests/test_nccl_gpu.py runs it) bound as one graph, without a GPU: its real lowered segments
(GpuLoweredEntry: checks, output placement, params) under the GPU device's binding rules
(:meth:`kinac.rt.comm.device_run.CudaOps.bind_segment`) on host buffers. On the H200
(2026-12-02 02:22) this program silently ran step by step: the binding unwrapped a GpuEntry's
own ``.device`` (its GPU) as if it were host_segment's wrapper, so every real entry was "not a
GPU entry"; the fakes' segments have no ``.device`` and never showed it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from nccl_fakes import FakeLib, Handle

from kinac.rt.comm import nccl, program_graph, simulate
from kinac.rt.comm.device_run import CudaOps, HostOps, unbindable
from kinac.rt.comm.gpu_rank import device_segment

sys.path.insert(0, str(Path(__file__).parent))


class _Gpu:
    """What a GpuEntry's ``.device`` is (kinac.rt.cuda.device.Device): entered to bind."""

    def enter(self) -> None:
        return None

    def leave(self, pushed: Any) -> None:
        pass


def _entry(lowered: Any, ptx: str, bound: list[Any]) -> Any:
    """A GpuEntry as ``load_gpu_entry`` makes it, but for the driver: its lowering, its GPU
    as ``.device`` (set by ``__init__``), and ``_bind`` recording the addresses it gets."""
    from kinac.rt.cuda.entry import GpuEntry

    e = GpuEntry.__new__(GpuEntry)
    e.lowered, e.device = lowered, _Gpu()  # type: ignore[assignment]
    e.status = 1 if lowered.has_status else 0
    e._host_outputs = [d == "cpu" for d in lowered.output_devices]

    def bind(key: tuple[int, ...]) -> tuple[Any, list[Any]]:
        bound.append((lowered.name, key))
        return (lambda stream: None), []

    e._bind = bind  # type: ignore[method-assign]
    return e


class _WithChecks:
    """A lowering whose steps read back a status word (a gather's index check)."""

    has_status = True

    def __init__(self, lowered: Any) -> None:
        self._lowered = lowered

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lowered, name)


class _BindingOps(HostOps):
    """The fake device's buffers, the GPU's segment binding (its conditions, its unwrapping)."""

    bind_segment = CudaOps.bind_segment


@pytest.fixture(scope="module")
def block(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[Any], list[Any], list[Any]]:
    """The block's program, its segments as run_nccl gets them, its arguments, and the
    binding log the segments write into."""
    from test_shard_propagate import MEGATRON, annotated_block
    from test_simulate_transformer import DIMS, _inputs

    import kinac
    import kinac.rt.cuda.entry as entry_mod

    tmp = tmp_path_factory.mktemp("block")
    mp = pytest.MonkeyPatch()
    bound: list[Any] = []
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1"}
    for k, v in {**env, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}.items():
        mp.setenv(k, v)
    mp.setattr(entry_mod, "load_gpu_entry", lambda lo, ptx: _entry(lo, ptx, bound))
    try:
        src = annotated_block(tmp / "s", MEGATRON, "(mesh tp [1])")
        fn = kinac.compile(
            src, "block_small", target="cuda", mesh=1, cache_dir=str(tmp / "c"), backend="nccl"
        )
        args = list(_inputs())
        (program, segments), _ = fn._prepared(*args, **DIMS)
    finally:
        mp.undo()
    return program, [device_segment(s) for s in segments], args, bound


def _bind(program: Any, segs: list[Any], args: list[Any]) -> Any:
    """``program_graph.bound`` on a fake NCCL world of one, the GPU's binding rules."""
    program_graph.forget()

    def rank(sim: Any) -> Any:
        ops = _BindingOps()
        axes = tuple(program.mesh.axes)
        comm = nccl.NcclComm(
            FakeLib(sim, program.mesh), Handle(sim), tuple(program.mesh.shape), axes, axes,
            sim.global_rank, alloc=ops.empty,
        )  # fmt: skip
        return program_graph.bound(
            program, segs, comm, ops, args
        ), program_graph.last_fallback_reason

    try:
        ((pg, why),) = simulate(program.mesh, rank)
    finally:
        program_graph.forget()
    return pg, why


def test_block_small_cuda_segments_bind_as_one_graph(block: Any) -> None:
    """Every condition on the real lowered segments holds (no runtime checks, outputs on the
    device, no in-place update, buffers of the lowering's shapes and dtypes, 16-byte
    aligned), so the program binds: each of its three segments bound once, the first on the
    graph's input buffers, each output into a buffer of the graph's, no fallback recorded."""
    program, segs, args, bound = block
    assert [s.lowered.name for s in segs] == ["block.seg0", "block.seg1", "block.seg2"]
    assert all(device_segment(s) is s for s in segs)  # a GpuEntry is its own device form
    for s in segs:
        lw = s.lowered
        assert not lw.has_status and set(lw.output_devices) == {"cuda:0"}
        bufs = [np.empty(p.shape, np.float32) for p in (*lw.params, *lw.outputs)]
        assert unbindable(s, bufs) is None
    bound.clear()
    pg, why = _bind(program, segs, args)
    assert pg is not None, why
    assert why == ""
    assert [name for name, _ in bound] == ["block.seg0", "block.seg1", "block.seg2"]
    kept = {int(b.ctypes.data) for b in pg.keep if isinstance(b, np.ndarray)}
    assert set(bound[0][1]) <= kept  # the inputs' device buffers
    for (_, key), lo in zip(bound, [s.lowered for s in segs], strict=True):
        assert set(key[len(lo.params) :]) <= kept  # each output its own buffer


def test_a_fallback_records_its_reason(block: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A segment with runtime checks is left to the step-by-step runner, silently (a
    documented fallback) but with the reason recorded; so is ``KINAC_PROGRAM_GRAPH=0``."""
    program, segs, args, _ = block
    checked = _WithChecks(segs[1].lowered)
    with_checks = [segs[0], _entry(checked, "", []), segs[2]]
    pg, why = _bind(program, with_checks, args)
    assert pg is None
    assert why == "not graphable: block.seg1: runtime checks (8 status slots to read back)"
    monkeypatch.setenv(program_graph.ENV, "0")
    assert _bind(program, segs, args) == (None, "KINAC_PROGRAM_GRAPH=0")
