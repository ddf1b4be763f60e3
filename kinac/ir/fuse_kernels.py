"""Pass ``fuse-kernels``: partition an entry into ``kina.kernel`` ops, one per buffer written.

A value gets its own buffer (is *materialised*) when it is a param, an output, the result of a
non-elementwise op (reduction, softmax, matmul, gather, concat), an elementwise value that
several ops use and that costs something to recompute, or a matmul operand that BLAS cannot
read in place. Every other value is recomputed inside the kernels that read it: elementwise
chains fuse into one loop nest, views become index arithmetic, and the input of a reduction,
a softmax or a norm is computed inside the loop that reduces it (read once or twice, never
once per output element). Each kernel's body clones the ops it recomputes, so the IR after
this pass shows exactly what each loop nest (or library call) does.
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from kinac.ir.dialects import kina as el
from kinac.ir.dialects import kina_struct as st
from kinac.ir.layout import as_blas_matrix
from kinac.ir.views import VIEWS, chain_layout, view_base

# A fused kernel body recomputes at most about this much per element (a chain of 1,500 lets
# becomes kernels of at most 256 adds or 64 tanhs); no model's fused chain comes near it.
MAX_FUSED_COST = 256
ELEMENTWISE = (el.UnaryOp, el.CastOp, el.BinaryOp, el.WhereOp, st.CreationOp)
_KIND = {
    st.ReduceOp: "reduce",
    st.MatmulOp: "matmul",
    st.SoftmaxOp: "softmax",
    st.GatherOp: "gather",
    st.ConcatOp: "concat",
    st.ScatterAddOp: "scatter_add",
}


def _expensive(op: Operation) -> bool:
    """Whether the primitive's definition says recomputing it per use costs (``expensive``)."""
    d = getattr(type(op), "DEF", None)
    return d is not None and "expensive" in d.traits


def kind_of(op: Operation) -> str:
    for cls, kind in _KIND.items():
        if isinstance(op, cls):
            return kind
    return "map"


def copy_op(op: Operation, body: Block, vmap: dict[SSAValue, SSAValue]) -> None:
    """Append to ``body`` a copy of the one-result ``op`` on ``vmap``'s values; map its result."""
    new = op.__class__.create(
        operands=[vmap[o] for o in op.operands],
        result_types=[r.type for r in op.results],
        properties=dict(op.properties),
    )
    body.add_op(new)
    vmap[op.results[0]] = new.results[0]


def _users(v: SSAValue) -> set[Operation]:
    return {u.operation for u in v.uses}


class _Fuser:
    def __init__(self, fn: func.FuncOp) -> None:
        self.block = fn.body.block
        ret = self.block.last_op
        assert isinstance(ret, func.ReturnOp)
        self.ret = ret
        self.ops = [o for o in self.block.ops if o is not ret]
        self.mat: set[SSAValue] = set(self.block.args)
        self._cost: dict[SSAValue, int] = {}
        self._order = {o: i for i, o in enumerate(self.ops)}

    def cost(self, v: SSAValue) -> int:
        """Rough cost of recomputing ``v`` per element, up to materialised values.

        Iterative (an explicit stack, each value once): an unmaterialised chain may be as long
        as the program (1,500 chained lets), deeper than Python's recursion limit."""
        stack = [v]
        while stack:
            u = stack[-1]
            if self._free(u) or u in self._cost:
                stack.pop()
                continue
            op = u.owner
            assert isinstance(op, Operation)
            todo = [o for o in op.operands if not self._free(o) and o not in self._cost]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            own = 0 if isinstance(op, VIEWS + (st.CreationOp,)) else 1
            own = 4 if _expensive(op) else own
            self._cost[u] = own + sum(0 if self._free(o) else self._cost[o] for o in op.operands)
        return 0 if self._free(v) else self._cost[v]

    def _free(self, v: SSAValue) -> bool:
        return v in self.mat or isinstance(v, BlockArgument)

    def decide(self) -> None:
        for op in self.ops:
            if not isinstance(op, ELEMENTWISE + VIEWS):
                self.mat.add(op.results[0])
        self.mat.update(self.ret.operands)
        for op in self.ops:
            v = op.results[0]
            # no need to forget costs here: those known are of values before ``v`` (program
            # order), which materialising ``v`` cannot change (keeps the pass linear)
            if isinstance(op, ELEMENTWISE + VIEWS) and len(_users(v)) >= 2:
                if self.cost(v) > 0:
                    self.mat.add(v)
        for op in self.ops:  # split huge fused bodies: LLVM's time grows faster than their size
            v = op.results[0]
            if isinstance(op, ELEMENTWISE) and self.cost(v) > MAX_FUSED_COST:
                self.mat.add(v)
        for op in self.ops:
            if isinstance(op, st.MatmulOp):  # it reads each operand element N or M times
                for u in (op.lhs, op.rhs):
                    self._cost.clear()
                    if self.cost(u) > 0:
                        self.mat.add(u)
            if isinstance(op, st.MatmulOp) and op.impl is not None and op.impl.data == "blas":
                for u in (op.lhs, op.rhs):
                    base, chain = view_base(u, self.mat)
                    lay = chain_layout(base, chain) if base in self.mat else None
                    if lay is None or as_blas_matrix(lay) is None:
                        self.mat.add(u)

    def cone(self, root: Operation) -> tuple[list[SSAValue], list[Operation]]:
        """The materialised inputs and the recomputed ops (program order) of ``root``."""
        inputs: list[SSAValue] = []
        seen: set[Operation] = set()
        stack = [root]
        while stack:
            op = stack.pop()
            if op in seen:
                continue
            seen.add(op)
            for u in op.operands:
                if u in self.mat:
                    if u not in inputs:
                        inputs.append(u)
                else:
                    owner = u.owner
                    assert isinstance(owner, Operation)
                    stack.append(owner)
        return inputs, sorted(seen, key=self._order.__getitem__)

    def kernel(self, v: SSAValue, n: int, done: dict[SSAValue, SSAValue]) -> Operation:
        root = v.owner
        assert isinstance(root, Operation)
        inputs, ops = self.cone(root)
        kind = kind_of(root)
        impl = "loops"
        if isinstance(root, st.MatmulOp) and root.impl is not None:
            impl = root.impl.data
        body = Block(arg_types=[u.type for u in inputs])
        vmap: dict[SSAValue, SSAValue] = dict(zip(inputs, body.args, strict=True))
        for op in ops:
            copy_op(op, body, vmap)
        body.add_op(st.YieldOp.create(operands=[vmap[v]]))
        return st.KernelOp.create(
            operands=[done.get(u, u) for u in inputs],
            result_types=[v.type],
            properties={
                "kind": StringAttr(kind),
                "impl": StringAttr(impl),
                "sym": StringAttr(f"k{n}_{kind}"),
            },
            regions=[Region(body)],
        )

    def run(self) -> None:
        self.decide()
        done: dict[SSAValue, SSAValue] = {}
        kernels: list[Operation] = []
        for op in self.ops:
            v = op.results[0]
            if v in self.mat:
                k = self.kernel(v, len(kernels), done)
                kernels.append(k)
                done[v] = k.results[0]
        outs: list[SSAValue] = []
        for v in self.ret.operands:
            r = done.get(v, v)
            if isinstance(r, BlockArgument) or r in outs:  # a param, or a second output: copy
                k = _copy_kernel(r, len(kernels))
                kernels.append(k)
                r = k.results[0]
            outs.append(r)
        self.block.insert_ops_before(kernels, self.ret)
        self.ret.operands = outs
        for op in reversed(self.ops):
            op.detach()
            op.erase()


def _copy_kernel(v: SSAValue, n: int) -> Operation:
    body = Block(arg_types=[v.type])
    body.add_op(st.YieldOp.create(operands=[body.args[0]]))
    return st.KernelOp.create(
        operands=[v],
        result_types=[v.type],
        properties={
            "kind": StringAttr("map"),
            "impl": StringAttr("loops"),
            "sym": StringAttr(f"k{n}_map"),
        },
        regions=[Region(body)],
    )


class FuseKernels(ModulePass):
    """Group each entry's ops into ``kina.kernel`` ops (see the module docstring)."""

    name = "fuse-kernels"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for f in op.ops:
            if isinstance(f, func.FuncOp) and f.body.blocks:
                _Fuser(f).run()
