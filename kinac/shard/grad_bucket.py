"""Gradient bucketing: runs of all-reduces packed into a few large ones (PyTorch DDP's buckets).

Why a pass over the per-device program: data parallelism ends with one all-reduce per
gradient (and the loss), each a separate collective with its own latency (a NCCL launch, a
simulator round). Consecutive all-reduces over one mesh axis of one dtype are independent, so
they can travel as one buffer: a local *pack* segment flattens and concatenates them, one
all-reduce moves the bucket, an *unpack* segment slices it back into the original slots. The
sums are elementwise, so the values are exactly the unbucketed ones (a sum per element in
rank order either way). Buckets are filled in program order up to ``cap_bytes`` (one larger
tensor is a bucket by itself); an all-reduce whose input is made inside the run stays a step
of its own, after the buckets.
"""

from __future__ import annotations

from dataclasses import replace

from kinac.artifacts.sharded import Collective, DeviceProgram, RunSegment
from kinac.dtypes import ITEMSIZE
from kinac.tir.graph import Graph, Node, TType, make_node


def slot_types(program: DeviceProgram) -> dict[int, TType]:
    """The local type of every slot the program writes."""
    types: dict[int, TType] = {i: t for i, (_, t, _) in enumerate(program.params)}
    for step in program.steps:
        if isinstance(step, RunSegment):
            g = program.segments[step.segment]
            for slot, o in zip(step.outputs, g.outputs, strict=True):
                types[slot] = g.nodes[o].type
            continue
        t = types[step.src]
        shape = list(t.shape)
        n = program.mesh.axis_size(step.axis)
        if step.kind in ("slice", "reduce-scatter"):
            shape[step.dim] //= n
        elif step.kind == "all-gather":
            shape[step.dim] *= n
        elif step.kind == "all-to-all":
            shape[step.dim] //= n
            shape[step.dim if step.concat_dim < 0 else step.concat_dim] *= n
        types[step.dst] = TType(t.dtype, tuple(shape), t.device)
    return types


def bucket_all_reduces(program: DeviceProgram, cap_bytes: int) -> DeviceProgram:
    """``program`` with each run of consecutive all-reduces packed into buckets of at most
    ``cap_bytes`` per (axis, dtype); unchanged when no bucket would hold two tensors."""
    types = slot_types(program)
    steps: list[RunSegment | Collective] = []
    segments = list(program.segments)
    next_slot = max(types) + 1
    packed = 0  # buckets emitted (the step count alone cannot tell: 6 all-reduces in 2
    # buckets are 6 steps too, and the program came back unbucketed)
    k = 0
    while k < len(program.steps):
        run: list[Collective] = []
        while k < len(program.steps):
            s = program.steps[k]
            if not (isinstance(s, Collective) and s.kind == "all-reduce" and s.reduce_op == "sum"):
                break
            run.append(s)
            k += 1
        if not run:
            steps.append(program.steps[k])
            k += 1
            continue
        made = {s.dst for s in run}
        free = [s for s in run if s.src not in made]
        later = [s for s in run if s.src in made]
        buckets: list[list[Collective]] = []
        open_: dict[tuple[str, str], list[Collective]] = {}
        for s in free:
            t = types[s.src]
            key = (s.axis, t.dtype)
            size = t.numel * ITEMSIZE[t.dtype]
            cur = open_.get(key)
            if cur is None or sum(_bytes(types, c) for c in cur) + size > cap_bytes:
                cur = []
                buckets.append(cur)
                open_[key] = cur
            cur.append(s)
        for b in buckets:
            if len(b) == 1:
                steps.append(b[0])
                continue
            next_slot = _emit_bucket(b, types, steps, segments, next_slot, program.mesh.name)
            packed += 1
        steps.extend(later)
    if not packed:
        return program
    return replace(program, steps=tuple(steps), segments=tuple(segments))


def _bytes(types: dict[int, TType], s: Collective) -> int:
    t = types[s.src]
    return t.numel * ITEMSIZE[t.dtype]


def _emit_bucket(
    bucket: list[Collective],
    types: dict[int, TType],
    steps: list[RunSegment | Collective],
    segments: list[Graph],
    next_slot: int,
    name: str,
) -> int:
    """Pack, all-reduce, unpack one bucket; the next free slot."""
    ts = [types[s.src] for s in bucket]
    total = sum(t.numel for t in ts)
    flat = TType(ts[0].dtype, (total,), ts[0].device)
    nodes: list[Node] = [make_node("param", (), t, index=j) for j, t in enumerate(ts)]
    parts = []
    for j, t in enumerate(ts):
        nodes.append(make_node("reshape", (j,), TType(t.dtype, (t.numel,), t.device)))
        parts.append(len(nodes) - 1)
    nodes.append(make_node("concat", tuple(parts), flat, axis=0))
    params = tuple((f"s{s.src}", t) for s, t in zip(bucket, ts, strict=True))
    segments.append(Graph(f"{name}.pack{len(segments)}", params, tuple(nodes), (len(nodes) - 1,)))
    packed, reduced = next_slot, next_slot + 1
    steps.append(RunSegment(len(segments) - 1, tuple(s.src for s in bucket), (packed,)))
    nbytes = total * ITEMSIZE[flat.dtype]
    first = bucket[0]
    steps.append(
        Collective(
            "all-reduce",
            first.axis,
            packed,
            reduced,
            -1,
            "sum",
            nbytes,
            first.span,
            f"a bucket of {len(bucket)} partial sums over `{first.axis}`",
        )
    )
    nodes = [make_node("param", (), flat, index=0)]
    outs = []
    off = 0
    for t in ts:
        one = TType(t.dtype, (t.numel,), t.device)
        nodes.append(make_node("slice", (0,), one, axis=0, start=off, stop=off + t.numel))
        nodes.append(make_node("reshape", (len(nodes) - 1,), t))
        outs.append(len(nodes) - 1)
        off += t.numel
    segments.append(
        Graph(f"{name}.unpack{len(segments)}", (("bucket", flat),), tuple(nodes), tuple(outs))
    )
    steps.append(RunSegment(len(segments) - 1, (reduced,), tuple(s.dst for s in bucket)))
    return next_slot + 2
