"""The ``kina`` dialect's verifiers catch ill-typed ops at the op (not as wrong numbers)."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, StringAttr, i64
from xdsl.ir import Block
from xdsl.utils.exceptions import VerifyException

from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import tensor_type
from kinac.ir.from_graph import graph_to_module
from kinac.ir.testing import GraphBuilder, block_graph


def _op(cls: type, operands: list[tuple[str, tuple[int, ...]]], result: tuple[str, tuple[int, ...]], **props: object) -> None:  # fmt: skip
    blk = Block(arg_types=[tensor_type(d, s) for d, s in operands])
    op = cls.create(operands=list(blk.args), result_types=[tensor_type(*result)], properties=props)  # type: ignore[attr-defined]
    blk.add_op(op)
    op.verify()


def I(v: int) -> IntegerAttr:  # noqa: E743 - short on purpose
    return IntegerAttr(v, i64)


BAD = [
    (el.ExpOp, [("i32", (3,))], ("i32", (3,)), {}, "takes a float tensor"),  # type: ignore[attr-defined]
    (el.AddOp, [("f32", (3,)), ("f64", (3,))], ("f32", (3,)), {}, "cast first"),
    (el.AddOp, [("f32", (3,)), ("f32", (4,))], ("f32", (3,)), {}, "do not broadcast"),
    (el.LtOp, [("f32", (3,)), ("f32", (3,))], ("f32", (3,)), {}, "yields bool"),  # type: ignore[attr-defined]
    (el.WhereOp, [("f32", (3,)), ("f32", (3,)), ("f32", (3,))], ("f32", (3,)), {}, "must be i1"),
    (st.MatmulOp, [("f32", (2, 3)), ("f32", (4, 5))], ("f32", (2, 5)), {}, "do not contract"),
    (st.ReduceSumOp, [("f32", (2, 3))], ("f32", (3,)), {"axis": I(1), "keepdims": I(0)}, "does not match"),
    (st.TransposeOp, [("f32", (2, 3))], ("f32", (3, 2)), {"perm": DenseArrayBase.from_list(i64, [0, 0])}, "not a permutation"),
    (st.ReshapeOp, [("f32", (2, 3))], ("f32", (7,)), {}, "element counts differ"),
    (st.SliceOp, [("f32", (4,))], ("f32", (2,)), {"axis": I(0), "start": I(3), "stop": I(5)}, "bad range"),
    (st.GatherOp, [("f32", (5, 2)), ("f32", (3,))], ("f32", (3, 2)), {}, "int index"),
    (st.SoftmaxOp, [("f32", (2, 3))], ("f32", (2, 3)), {"axis": I(2)}, "axis out of range"),
    (st.MatmulOp, [("f32", (2, 3)), ("f32", (3, 5))], ("f32", (2, 5)), {"impl": StringAttr("gpu")}, "unknown impl"),
]  # fmt: skip


@pytest.mark.parametrize(("cls", "ins", "out", "props", "msg"), BAD)
def test_verifiers_reject(cls: type, ins: list, out: tuple, props: dict, msg: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(VerifyException, match=msg):
        _op(cls, ins, out, **props)


def test_every_graph_op_has_a_kina_op_with_a_docstring() -> None:
    from kinac.ir.testing import BINARY, COMPARE, REDUCE, UNARY

    names = set(UNARY + BINARY + COMPARE + REDUCE)
    names |= {"cast", "where", "const", "full", "iota", "matmul", "transpose", "reshape"}
    names |= {"broadcast_to", "concat", "slice", "gather", "softmax", "repeat_interleave"}
    names |= {"to_device", "to_host"}
    assert names <= set(st.OPS)
    for cls in (*st.OPS.values(), st.KernelOp, st.YieldOp):
        assert cls.__doc__ and cls.__doc__.strip(), cls


def test_models_build_verified_modules() -> None:
    m = graph_to_module(block_graph(2, 8, 16, 4, 2, 24))
    assert sum(1 for _ in m.walk()) > 40
    g = GraphBuilder("dev")
    x = g.param("x", "f32", (2,))
    m = graph_to_module(g.build(g.to_device(x, "cpu")))
    assert any(isinstance(o, st.ToDeviceOp) for o in m.walk())


def test_device_placements_other_than_cpu_are_refused() -> None:
    g = GraphBuilder("gpu")
    x = g.param("x", "f32", (2,))
    with pytest.raises(ValueError, match="placed on cuda:0"):
        graph_to_module(g.build(g.to_device(x, "cuda:0")))
