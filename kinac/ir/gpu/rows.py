"""The passes of a row kernel over a row cached in registers (see :mod:`kinac.ir.gpu.kernels`).

Each thread of a row's ``T`` threads holds ``C`` chunks of ``V`` values. A reduction combines
the thread's values (masked past the row's end), then across the row's threads with butterfly
warp shuffles (every lane ends with the result), then, when ``T > 32``, across warps through
a shared-memory slot per warp between two barriers. A softmax is two such passes (max, then
the sum of ``exp(x - max)``, whose terms are kept for the output); its value at an index is
then one multiply by the row's reciprocal sum.
"""

from __future__ import annotations

from kinac.ir.dialects import kina_struct as st
from kinac.ir.dialects.kina import dtype_name, shape_of
from kinac.ir.gpu.emit import Builder, Ix, Val
from kinac.ir.gpu.plan import RowConfig
from kinac.ir.gpu.read import BodyReader, Lanes


class RowReducer:
    """The passes of a row kernel: each reduction (and softmax) over the cached row."""

    def __init__(self, sym: str, ix: str, b: Builder, r: BodyReader, cfg: RowConfig, tid: Ix, chunks: list[tuple[Val, list[Ix]]], lax: int | None) -> None:  # fmt: skip
        self.sym, self.ix, self.b, self.r, self.cfg, self.tid = sym, ix, b, r, cfg, tid
        self.chunks, self.lax = chunks, lax
        self.smem: str | None = None

    def fold(self, kind: str, dt: str, values: list[Lanes]) -> Val:
        """Combine the thread's chunk values, then across the row's threads."""
        sc, b = self.r.sc, self.b
        ident = sc.identity(kind, dt)
        acc = ident
        for (ok, _), vals in zip(self.chunks, values, strict=True):
            for v in dict.fromkeys(vals) if kind in ("max", "min") else vals:
                acc = sc.combine(kind, acc, b.select(ok, v, ident), dt)
        t_n = self.cfg.threads
        for off in (16, 8, 4, 2, 1):
            if off < t_n:
                acc = sc.combine(kind, acc, b.shfl_xor(acc, off), dt)
        if t_n > 32:
            acc = self.across_warps(kind, dt, acc)
        return acc

    def across_warps(self, kind: str, dt: str, acc: Val) -> Val:
        b, sc, ix = self.b, self.r.sc, self.ix
        if self.smem is None:
            self.smem = b.shared_array(f"smem_{self.sym}", "double", self.cfg.block // 32)
        warps = self.cfg.threads // 32
        ty = acc.ty
        slot = b.emit(f"getelementptr inbounds double, {b.sptr} {self.smem}, {ix} 0", b.sptr)
        warp = b.idiv(self.tid, 32, ix)
        lane = b.imod(self.tid, 32, ix)
        store_ty = "i8" if ty == "i1" else ty
        val = b.emit(f"zext i1 {acc.ref} to i8", "i8") if ty == "i1" else acc
        p = b.gep("double", slot, warp, ix, space="s")
        b.if_then(b.icmp("eq", lane, 0, ix), lambda: b.store(val, p, 8))
        b.barrier()
        first = b.imul(b.idiv(warp, warps, ix), warps, ix)
        out = sc.identity(kind, dt)
        for w in range(warps):
            q = b.gep("double", slot, b.iadd(first, w, ix), ix, space="s")
            x = b.load(store_ty, q, 8)
            x = b.emit(f"icmp ne i8 {x.ref}, 0", "i1") if ty == "i1" else x
            out = sc.combine(kind, out, x, dt)
        b.barrier()
        return out

    def reduce(self, op: st.ReduceOp) -> None:
        r, sc = self.r, self.r.sc
        kind = op.name.removeprefix("kina.reduce_")
        dt = dtype_name(op.x.type)
        vals = [r.read(op.x, idx, self.lax) for _, idx in self.chunks]
        acc = self.fold(kind, dt, vals)
        length = shape_of(op.x.type)[-1]
        if kind == "mean":
            acc = sc.binary("div", acc, sc.count(length, dt), dt)
        acc = sc.round(acc, dtype_name(op.result.type))
        r.special[op.result] = lambda idx, lax: r.uniform(acc)

    def softmax(self, op: st.SoftmaxOp) -> None:
        r, sc = self.r, self.r.sc
        dt = dtype_name(op.x.type)
        xs = [r.read(op.x, idx, self.lax) for _, idx in self.chunks]
        m = self.fold("max", dt, xs)
        es = [[sc.exp(sc.fbin("fsub", x, m)) for x in lanes] for lanes in xs]
        s = self.fold("sum", dt, es)
        inv = sc.fbin("fdiv", sc.f(1.0), s)
        cache = {tuple(i if isinstance(i, int) else i.ref for i in idx): e for (_, idx), e in zip(self.chunks, es, strict=True)}  # fmt: skip

        def value(idx: list[Ix], lax: int | None) -> Lanes:
            key = tuple(i if isinstance(i, int) else i.ref for i in idx)
            e = cache.get(key)
            if e is None:
                e = [sc.exp(sc.fbin("fsub", x, m)) for x in r.read(op.x, idx, lax)]
            return [sc.fbin("fmul", x, inv) for x in e]

        r.special[op.result] = value
