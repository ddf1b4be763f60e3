"""Build a ``kina`` dialect module from a concrete :class:`~kinac.tir.graph.Graph`.

The module holds one ``func.func`` named after the entry, taking the params as tensors and
returning the outputs; its body is one ``kina`` op per Graph node, in the Graph's SSA order.
This is the first IR the golden tests show.
"""

from __future__ import annotations

import re

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f64,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from kinac.ir.dialects.kina import FLOATS, tensor_type
from kinac.ir.dialects.kina_struct import OPS
from kinac.ir.host.stitch import symbol_name as symbol_name  # re-exported
from kinac.tir.graph import Graph, Node


def scalar_attr(value: float | int | bool, dtype: str) -> Attribute:
    """The attribute that carries a scalar of ``dtype`` (f64 for floats, i64 for ints)."""
    if dtype in FLOATS:
        return FloatAttr(float(value), f64)
    if dtype == "bool":
        return IntegerAttr(int(bool(value)), i1)
    return IntegerAttr(int(value), i64)


def _props(node: Node) -> dict[str, Attribute]:
    props: dict[str, Attribute] = {}
    for name, v in node.attrs:
        if name == "index":
            continue
        if name == "value":
            props[name] = scalar_attr(v, node.type.dtype)
        elif name == "perm":
            props[name] = DenseArrayBase.from_list(i64, list(v))
        elif name == "keepdims":
            props[name] = IntegerAttr(int(bool(v)), i64)
        elif isinstance(v, bool | int):
            props[name] = IntegerAttr(int(v), i64)
        else:
            raise ValueError(f"{node.op}: unsupported attribute {name}={v!r}")
    if node.op in ("to_device", "to_host"):
        props["device"] = StringAttr(node.type.device)
    return props


def graph_to_module(graph: Graph, verify: bool = True) -> ModuleOp:
    """The ``kina``-level module of ``graph`` (verified unless ``verify`` is False: the
    pipeline's per-piece lowerings skip it, as they skip it between passes; ~2 ms of an
    edit's new piece, half of building its module)."""
    nparams = len(graph.params)
    arg_types = [tensor_type(t.dtype, t.shape) for _, t in graph.params]
    block = Block(arg_types=arg_types)
    for arg, (pname, _) in zip(block.args, graph.params, strict=True):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$.-]*", pname):  # xDSL hints are ASCII only;
            arg.name_hint = pname  # a Kina name may not be (`日本`): the hint is cosmetic
    values: list[SSAValue] = []
    ops: list[Operation] = []
    for i, node in enumerate(graph.nodes):
        if node.type.device != "cpu":
            raise ValueError(
                f"{graph.name}: node {i} ({node.op}) is placed on {node.type.device}; "
                "the host back end runs cpu placements only"
            )
        if node.op == "param":
            assert i < nparams and node.attr("index") == i, "params come first, in order"
            values.append(block.args[i])
            continue
        if node.op == "reshard":  # the same value on one device (sharding is kinac.shard's)
            values.append(values[node.args[0]])
            continue
        cls = OPS.get(node.op)
        if cls is None:
            raise ValueError(f"op {node.op!r} has no host lowering (collectives are GPU-only)")
        op = cls.create(
            operands=[values[a] for a in node.args],
            result_types=[tensor_type(node.type.dtype, node.type.shape)],
            properties=_props(node),
        )
        ops.append(op)
        values.append(op.results[0])
    outs = [values[o] for o in graph.outputs]
    block.add_ops([*ops, func.ReturnOp(*outs)])
    ftype = (arg_types, [v.type for v in outs])
    module = ModuleOp([func.FuncOp(symbol_name(graph.name), ftype, Region(block))])
    if verify:
        module.verify()
    return module
