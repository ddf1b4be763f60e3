"""The simulated Communicator's collectives against numpy: every collective on 1-D meshes of 2
and 4 devices and on a 2x2 mesh (the world and each axis's sub-communicators), in place and
out of place, in f32, bf16 (uint16 bit patterns) and i64.

Each rank's data is drawn from its own seed, so a collective that mixes up ranks, chunks or
groups gives a different answer; the oracle recomputes every rank's expected receive buffer
from the sends alone, with the groups derived from ``numpy.unravel_index`` (not from the
simulator's grouping code).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from kinac.artifacts.sharded import MeshSpec
from kinac.errors import KinaRuntimeError
from kinac.rt.comm import CommLog, simulate
from kinac.rt.comm.communicator import bf16_to_f32, f32_to_bf16

MESHES = [
    (MeshSpec("tp", (2,), ("tp",)), None),
    (MeshSpec("tp", (4,), ("tp",)), "tp"),
    (MeshSpec("grid", (2, 2), ("dp", "tp")), None),
    (MeshSpec("grid", (2, 2), ("dp", "tp")), "dp"),
    (MeshSpec("grid", (2, 2), ("dp", "tp")), "tp"),
]
IDS = ["2", "4-sub", "2x2-world", "2x2-dp", "2x2-tp"]
KINDS = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"]
DTYPES = ["f32", "bf16", "i64"]


def group_of(mesh: MeshSpec, rank: int, axis: str | None) -> list[int]:
    """The ranks sharing every coordinate but ``axis`` (all ranks for the world)."""
    if axis is None:
        return list(range(mesh.size))
    keep = [i for i, a in enumerate(mesh.axes) if a != axis]
    me = np.unravel_index(rank, mesh.shape)
    return [
        r
        for r in range(mesh.size)
        if all(np.unravel_index(r, mesh.shape)[i] == me[i] for i in keep)
    ]


def data(rank: int, dtype: str, rows: int) -> np.ndarray:
    """Uneven per-rank values (no two ranks alike; bf16 exactly representable inputs)."""
    rng = np.random.default_rng(100 + rank)
    if dtype == "i64":
        return rng.integers(-(10**12), 10**12, size=(rows, 3)).astype(np.int64)
    x = (rng.standard_normal((rows, 3)) * (rank + 1.5) + rank).astype(np.float32)
    return f32_to_bf16(x) if dtype == "bf16" else x


def reduce_sum(parts: list[np.ndarray], dtype: str) -> np.ndarray:
    """The oracle's sum: in rank order; bf16 widened by torch, summed in f32, rounded by torch."""
    if dtype == "bf16":
        ts = [torch.from_numpy(p.astype(np.int16)).view(torch.bfloat16).float() for p in parts]
        tacc = ts[0].clone()
        for t in ts[1:]:
            tacc += t
        return tacc.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    acc = parts[0].copy()
    for p in parts[1:]:
        acc += p
    return acc


def run(mesh: MeshSpec, axis: str | None, kind: str, dtype: str, in_place: bool) -> None:
    n_group = len(group_of(mesh, 0, axis))
    rows = 2 * n_group  # scatter kinds split axis 0 into n_group chunks of 2 rows

    def fn(comm: Any) -> tuple[np.ndarray, np.ndarray]:
        c = comm.sub(axis) if axis is not None else comm
        rank = comm.global_rank
        send = data(rank, dtype, rows)
        keep = send.copy()
        if kind == "all-reduce":
            got = c.all_reduce(send, send if in_place else np.empty_like(send))
        elif kind == "all-gather":
            recv = np.empty((rows * c.size, 3), send.dtype)
            if in_place:  # NCCL's in-place all-gather: send is this rank's chunk of recv
                recv[c.rank * rows : (c.rank + 1) * rows] = send
                send = recv[c.rank * rows : (c.rank + 1) * rows]
            got = c.all_gather(send, recv)
        elif kind == "reduce-scatter":
            k = rows // c.size
            recv = send[c.rank * k : (c.rank + 1) * k] if in_place else np.empty((k, 3), send.dtype)
            got = c.reduce_scatter(send, recv)
            assert got is recv
        else:
            got = c.all_to_all(send, send if in_place else np.empty_like(send))
        return keep, got

    out = simulate(mesh, fn, timeout_s=10.0)
    sends = [s for s, _ in out]
    for r, (_, got) in enumerate(out):
        members = group_of(mesh, r, axis)
        me = members.index(r)
        parts = [sends[m] for m in members]
        k = rows // len(members)
        if kind == "all-reduce":
            want = reduce_sum(parts, dtype)
        elif kind == "all-gather":
            want = np.concatenate(parts)
        elif kind == "reduce-scatter":
            want = reduce_sum([p[me * k : (me + 1) * k] for p in parts], dtype)
        else:
            want = np.concatenate([p[me * k : (me + 1) * k] for p in parts])
        assert got.dtype == sends[0].dtype
        if dtype == "f32" and kind in ("all-reduce", "reduce-scatter"):
            np.testing.assert_allclose(got, want, rtol=1e-6)
        else:
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("in_place", [False, True], ids=["out-of-place", "in-place"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("mesh", "axis"), MESHES, ids=IDS)
def test_collective_against_numpy(
    mesh: MeshSpec, axis: str | None, kind: str, dtype: str, in_place: bool
) -> None:
    run(mesh, axis, kind, dtype, in_place)


@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_reduction_ops(op: str) -> None:
    mesh = MeshSpec("tp", (4,), ("tp",))
    xs = [np.random.default_rng(r).uniform(0.5, 2.0, (5,)).astype(np.float32) for r in range(4)]
    got = simulate(mesh, lambda c: c.all_reduce(xs[c.rank], op=op), timeout_s=10.0)
    stack = np.stack(xs).astype(np.float64)
    want = {
        "sum": stack.sum(0),
        "prod": stack.prod(0),
        "max": stack.max(0),
        "min": stack.min(0),
        "avg": stack.mean(0),
    }[op]
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-6)


def test_bf16_rounding_matches_torch() -> None:
    """Ties to even, subnormals, infinities and NaN as torch rounds them."""
    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.standard_normal(4096).astype(np.float32) * 1e3,
            np.array(
                [1 + 2**-8, 1 + 3 * 2**-8, 1e-40, -1e-39, np.inf, -np.inf, 3.4e38], np.float32
            ),
        ]
    )
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(f32_to_bf16(x), want)
    assert np.isnan(bf16_to_f32(f32_to_bf16(np.array([np.nan], np.float32)))).all()
    np.testing.assert_array_equal(bf16_to_f32(want), torch.from_numpy(x).to(torch.bfloat16).float())


def test_sub_communicator_ranks_and_sizes() -> None:
    mesh = MeshSpec("grid", (2, 3), ("dp", "tp"))
    got = simulate(
        mesh,
        lambda c: (c.rank, c.size, c.sub("dp").rank, c.sub("dp").size, c.sub("tp").rank),
        timeout_s=10.0,
    )
    assert got == [(r, 6, r // 3, 2, r % 3) for r in range(6)]


def test_log_counts_calls_and_bytes() -> None:
    mesh = MeshSpec("grid", (2, 2), ("dp", "tp"))
    log = CommLog()

    def fn(c: object) -> None:
        x = np.zeros((4, 8), np.float32)
        c.sub("tp").all_reduce(x)  # type: ignore[attr-defined]
        c.sub("tp").all_reduce(x)  # type: ignore[attr-defined]
        c.sub("dp").all_gather(x)  # type: ignore[attr-defined]
        c.barrier()  # type: ignore[attr-defined]

    simulate(mesh, fn, timeout_s=10.0, log=log)
    assert log.counts() == {("all-reduce", "tp"): 2, ("all-gather", "dp"): 1}
    assert log.bytes_per_device() == 2 * 128 + 256  # partials sent, the gathered result
    assert (
        "3 collectives per device" in log.summary()
        and "512 bytes moved per device (2,048 in all)" in log.summary()
    )


def test_bad_buffers_are_reported_with_rank_and_span() -> None:
    mesh = MeshSpec("tp", (4,), ("tp",))

    def fn(c: object) -> None:
        x = np.zeros((6, 2), np.float32)
        c.reduce_scatter(x, tag=("reduce-scatter", "m.kina:4:7"))  # type: ignore[attr-defined]

    with pytest.raises(
        KinaRuntimeError,
        match=r"rank \d: reduce-scatter over tp at m.kina:4:7: "
        r"4 ranks do not divide the send's first dim 6",
    ):
        simulate(mesh, fn, timeout_s=10.0)

    def wrong_recv(c: object) -> None:
        c.all_gather(np.zeros((2,), np.float32), np.zeros((4,), np.float32))  # type: ignore[attr-defined]

    with pytest.raises(KinaRuntimeError, match=r"receive buffer is f32\[4\], expected f32\[8\]"):
        simulate(mesh, wrong_recv, timeout_s=10.0)
