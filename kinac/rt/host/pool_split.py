"""The split ``sgemm``/``dgemm`` of the host pool (:mod:`kinac.rt.host.pool`) as LLVM IR.

Why a module of its own: which blocks a product is cut into decides how evenly the pool's
threads share it (docs/host.md, "BLAS products split into equal shares per thread"), and the
rule has a history worth keeping next to it (the old rule stays for same-process A/Bs).
"""

from __future__ import annotations

# ?gemm split into blocks of rows (or of columns when there are fewer rows than columns)
_GEMM = """
%gemm_{t} = type {{ i32, i32, i32, i64, i64, i64, {ty}, ptr, i64, ptr, i64, {ty}, ptr, i64, i64, i1 }}
declare void @kinac_blas_{t}gemm(i32, i32, i32, i64, i64, i64, {ty}, ptr, i64, ptr, i64, {ty}, ptr, i64)

define internal void @kp_{t}gemm_block(ptr %a, i64 %i) {{
entry:
  %f = load %gemm_{t}, ptr %a
  %o = extractvalue %gemm_{t} %f, 0
  %ta = extractvalue %gemm_{t} %f, 1
  %tb = extractvalue %gemm_{t} %f, 2
  %m = extractvalue %gemm_{t} %f, 3
  %n = extractvalue %gemm_{t} %f, 4
  %k = extractvalue %gemm_{t} %f, 5
  %al = extractvalue %gemm_{t} %f, 6
  %pa = extractvalue %gemm_{t} %f, 7
  %lda = extractvalue %gemm_{t} %f, 8
  %pb = extractvalue %gemm_{t} %f, 9
  %ldb = extractvalue %gemm_{t} %f, 10
  %be = extractvalue %gemm_{t} %f, 11
  %pc = extractvalue %gemm_{t} %f, 12
  %ldc = extractvalue %gemm_{t} %f, 13
  %chunk = extractvalue %gemm_{t} %f, 14
  %rows = extractvalue %gemm_{t} %f, 15
  %lo = mul i64 %i, %chunk
  %total = select i1 %rows, i64 %m, i64 %n
  %end = add i64 %lo, %chunk
  %fits = icmp ult i64 %end, %total
  %hi = select i1 %fits, i64 %end, i64 %total
  %cnt = sub i64 %hi, %lo
  br i1 %rows, label %byrow, label %bycol
byrow:
  %tra = icmp eq i32 %ta, 112
  %lda_lo = mul i64 %lo, %lda
  %aoff = select i1 %tra, i64 %lo, i64 %lda_lo
  %a2 = getelementptr {ty}, ptr %pa, i64 %aoff
  %coff = mul i64 %lo, %ldc
  %c2 = getelementptr {ty}, ptr %pc, i64 %coff
  call void @kinac_blas_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %cnt, i64 %n, i64 %k, {ty} %al, ptr %a2, i64 %lda, ptr %pb, i64 %ldb, {ty} %be, ptr %c2, i64 %ldc)
  ret void
bycol:
  %trb = icmp eq i32 %tb, 112
  %ldb_lo = mul i64 %lo, %ldb
  %boff = select i1 %trb, i64 %ldb_lo, i64 %lo
  %b2 = getelementptr {ty}, ptr %pb, i64 %boff
  %c3 = getelementptr {ty}, ptr %pc, i64 %lo
  call void @kinac_blas_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %m, i64 %cnt, i64 %k, {ty} %al, ptr %pa, i64 %lda, ptr %b2, i64 %ldb, {ty} %be, ptr %c3, i64 %ldc)
  ret void
}}

define void @kinac_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %m, i64 %n, i64 %k, {ty} %al, ptr %pa, i64 %lda, ptr %pb, i64 %ldb, {ty} %be, ptr %pc, i64 %ldc) {{
entry:
  %mn = mul i64 %m, %n
  %mnk = mul i64 %mn, %k
  %small = icmp ult i64 %mnk, {min_flops}
  br i1 %small, label %direct, label %split
direct:
  call void @kinac_blas_{t}gemm(i32 %o, i32 %ta, i32 %tb, i64 %m, i64 %n, i64 %k, {ty} %al, ptr %pa, i64 %lda, ptr %pb, i64 %ldb, {ty} %be, ptr %pc, i64 %ldc)
  ret void
split:
{threads}
{orient}
  %total = select i1 %rows, i64 %m, i64 %n
{chunking}
  %nb0 = add i64 %total, %chunk
  %nb1 = sub i64 %nb0, 1
  %nblocks = udiv i64 %nb1, %chunk
  %args = alloca %gemm_{t}
  %s0 = insertvalue %gemm_{t} undef, i32 %o, 0
  %s1 = insertvalue %gemm_{t} %s0, i32 %ta, 1
  %s2 = insertvalue %gemm_{t} %s1, i32 %tb, 2
  %s3 = insertvalue %gemm_{t} %s2, i64 %m, 3
  %s4 = insertvalue %gemm_{t} %s3, i64 %n, 4
  %s5 = insertvalue %gemm_{t} %s4, i64 %k, 5
  %s6 = insertvalue %gemm_{t} %s5, {ty} %al, 6
  %s7 = insertvalue %gemm_{t} %s6, ptr %pa, 7
  %s8 = insertvalue %gemm_{t} %s7, i64 %lda, 8
  %s9 = insertvalue %gemm_{t} %s8, ptr %pb, 9
  %s10 = insertvalue %gemm_{t} %s9, i64 %ldb, 10
  %s11 = insertvalue %gemm_{t} %s10, {ty} %be, 11
  %s12 = insertvalue %gemm_{t} %s11, ptr %pc, 12
  %s13 = insertvalue %gemm_{t} %s12, i64 %ldc, 13
  %s14 = insertvalue %gemm_{t} %s13, i64 %chunk, 14
  %s15 = insertvalue %gemm_{t} %s14, i1 %rows, 15
  store %gemm_{t} %s15, ptr %args
  call void @kinac_parallel(ptr @kp_{t}gemm_block, ptr %args, i64 %nblocks)
  ret void
}}
"""


_WORKERS = """  %w = load atomic i32, ptr @kp_workers monotonic, align 4
  %w64 = zext i32 %w to i64
  %threads = add i64 %w64, 1"""

# Balanced blocks (2026-12-02): as many blocks of about ``min_rows`` as fit, rounded down to a
# multiple of the thread count, so every thread gets the same share; one block without
# workers. Before, blocks were at least ``min_rows`` wide and the rest went to a last block:
# the block's [512,256] @ [256,704] products ran as 256 + 256 + 192 columns on two threads, so
# one thread did two blocks and the product took 2/3 of its single-threaded time, not 1/2.
_BALANCED = """  %want = mul i64 %threads, {blocks}
  %fit0 = add i64 %total, {min_rows_1}
  %fit = udiv i64 %fit0, {min_rows}
  %few = icmp ult i64 %fit, %want
  %nbw = select i1 %few, i64 %fit, i64 %want
  %over = icmp ugt i64 %nbw, %threads
  %extra = urem i64 %nbw, %threads
  %even = sub i64 %nbw, %extra
  %nbe = select i1 %over, i64 %even, i64 %nbw
  %solo = icmp ule i64 %threads, 1
  %nbs = select i1 %solo, i64 1, i64 %nbe
  %c0 = add i64 %total, %nbs
  %c1 = sub i64 %c0, 1
  %chunk0 = udiv i64 %c1, %nbs
  %chunk8 = add i64 %chunk0, 7
  %chunk = and i64 %chunk8, -8"""

# Rows when there are at least as many rows as columns, or enough for a block of ``min_rows``
# per thread: two threads on row blocks of [512,256] @ [256,704] took ~10% less wall time than
# on column blocks of the same size (same process, real-time priority, 2026-12-02), which ran
# slower side by side than one alone.
_ORIENT_BALANCED = """  %tall = icmp uge i64 %m, %n
  %per = mul i64 %threads, {min_rows}
  %deep = icmp uge i64 %m, %per
  %rows = or i1 %tall, %deep"""
_ORIENT_AT_LEAST = "  %rows = icmp uge i64 %m, %n"

# the rule until 2026-12-02 (``balanced=False``, for same-process A/Bs): a quarter of the rows
# per thread, rounded up to 8, and no thinner than ``min_rows``
_AT_LEAST = """  %want = mul i64 %threads, {blocks}
  %c0 = add i64 %total, %want
  %c1 = sub i64 %c0, 1
  %chunk0 = udiv i64 %c1, %want
  %chunk8 = add i64 %chunk0, 7
  %chunk9 = and i64 %chunk8, -8
  %thin = icmp ult i64 %chunk9, {min_rows}
  %chunk = select i1 %thin, i64 {min_rows}, i64 %chunk9"""


def gemm_ir(min_rows: int, min_flops: int, blocks: int, balanced: bool, threads: int | None) -> str:
    """``kinac_sgemm`` and ``kinac_dgemm`` splitting products on the pool (``balanced``: the
    rule of equal shares, else the one until 2026-12-02; ``threads``: split as for that many
    threads whatever the pool has, for tests)."""
    chunking = (_BALANCED if balanced else _AT_LEAST).format(
        blocks=blocks, min_rows=min_rows, min_rows_1=min_rows - 1
    )
    orient = _ORIENT_BALANCED.format(min_rows=min_rows) if balanced else _ORIENT_AT_LEAST
    workers = _WORKERS if threads is None else f"  %threads = add i64 0, {threads}"
    text = ""
    for t, ty in (("s", "float"), ("d", "double")):
        text += _GEMM.format(
            t=t, ty=ty, min_flops=min_flops, threads=workers, orient=orient, chunking=chunking
        )
    return text
