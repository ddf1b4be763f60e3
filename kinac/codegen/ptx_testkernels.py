"""Small hand-made kernels for testing and benchmarking the CUDA runtime.

Until the code generator produces kernels, the runtime is exercised with these: hand-written
PTX for sm_90 (fill, axpy, scale-add, an empty 8-argument kernel for launch overhead) and one
kernel built from hand-written LLVM IR through llvmlite's NVPTX back end (a 16-byte-vector,
grid-stride copy for the bandwidth bench), which also checks the llvmlite -> PTX -> driver path
the generated kernels will take.  llvmlite is imported only inside :func:`copy_v4_ptx`.
"""

from __future__ import annotations

PTX_HEADER = """.version 8.0
.target sm_90
.address_size 64
"""

# fill_u32(ptr, n, value): ptr[i] = value for i < n (grid-stride)
FILL_U32 = """
.visible .entry fill_u32(.param .u64 p_ptr, .param .u64 p_n, .param .u32 p_val)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [p_ptr];
    ld.param.u64 %rd2, [p_n];
    ld.param.u32 %r1, [p_val];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd3, %r2, %r3;
    cvt.u64.u32 %rd4, %r4;
    add.u64 %rd5, %rd3, %rd4;
    mul.wide.u32 %rd6, %r5, %r3;
$fill_loop:
    setp.ge.u64 %p1, %rd5, %rd2;
    @%p1 bra $fill_done;
    shl.b64 %rd7, %rd5, 2;
    add.u64 %rd8, %rd1, %rd7;
    st.global.u32 [%rd8], %r1;
    add.u64 %rd5, %rd5, %rd6;
    bra.uni $fill_loop;
$fill_done:
    ret;
}
"""

# axpy_f32(y, x, a, n): y[i] = a * x[i] + y[i]
AXPY_F32 = """
.visible .entry axpy_f32(.param .u64 p_y, .param .u64 p_x, .param .f32 p_a, .param .u64 p_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [p_y];
    ld.param.u64 %rd2, [p_x];
    ld.param.f32 %f1, [p_a];
    ld.param.u64 %rd3, [p_n];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd4, %r2, %r3;
    cvt.u64.u32 %rd5, %r4;
    add.u64 %rd6, %rd4, %rd5;
    mul.wide.u32 %rd7, %r5, %r3;
$axpy_loop:
    setp.ge.u64 %p1, %rd6, %rd3;
    @%p1 bra $axpy_done;
    shl.b64 %rd8, %rd6, 2;
    add.u64 %rd9, %rd1, %rd8;
    add.u64 %rd10, %rd2, %rd8;
    ld.global.f32 %f2, [%rd10];
    ld.global.f32 %f3, [%rd9];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd9], %f4;
    add.u64 %rd6, %rd6, %rd7;
    bra.uni $axpy_loop;
$axpy_done:
    ret;
}
"""

# scale_add_f32(y, s, b, n): y[i] = y[i] * s + b
SCALE_ADD_F32 = """
.visible .entry scale_add_f32(.param .u64 p_y, .param .f32 p_s, .param .f32 p_b, .param .u64 p_n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [p_y];
    ld.param.f32 %f1, [p_s];
    ld.param.f32 %f2, [p_b];
    ld.param.u64 %rd2, [p_n];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd3, %r2, %r3;
    cvt.u64.u32 %rd4, %r4;
    add.u64 %rd5, %rd3, %rd4;
    mul.wide.u32 %rd6, %r5, %r3;
$sa_loop:
    setp.ge.u64 %p1, %rd5, %rd2;
    @%p1 bra $sa_done;
    shl.b64 %rd7, %rd5, 2;
    add.u64 %rd8, %rd1, %rd7;
    ld.global.f32 %f3, [%rd8];
    fma.rn.f32 %f4, %f3, %f1, %f2;
    st.global.f32 [%rd8], %f4;
    add.u64 %rd5, %rd5, %rd6;
    bra.uni $sa_loop;
$sa_done:
    ret;
}
"""

# noop8: eight parameters of mixed types, no work: measures launch overhead
NOOP8 = """
.visible .entry noop8(.param .u64 a0, .param .u64 a1, .param .u64 a2, .param .u64 a3,
    .param .u32 a4, .param .u32 a5, .param .f32 a6, .param .u64 a7)
{
    ret;
}
"""

NOOP8_ARGS = ("ptr", "ptr", "ptr", "ptr", "u32", "i32", "f32", "u64")

# noop0: no parameters, no work (the reference "empty kernel launch")
NOOP0 = """
.visible .entry noop0()
{
    ret;
}
"""


def hand_kernels_ptx() -> str:
    """One PTX module with fill_u32, axpy_f32, scale_add_f32, noop8 and noop0."""
    return PTX_HEADER + FILL_U32 + AXPY_F32 + SCALE_ADD_F32 + NOOP8 + NOOP0


# copy_v4(dst, src, n): dst[i] = src[i] for i < n 16-byte vectors; four vectors in flight per
# thread per iteration (i, i+T, i+2T, i+3T with T the grid's thread count), then a tail loop.
COPY_V4_LL = r"""
target triple = "nvptx64-nvidia-cuda"
target datalayout = "e-p3:32:32-p4:32:32-p5:32:32-p6:32:32-p7:32:32-i64:64-i128:128-v16:16-v32:32-n16:32:64"

declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()

define ptx_kernel void @copy_v4(ptr addrspace(1) noalias %dst, ptr addrspace(1) noalias readonly %src, i64 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %ctaid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %ntid = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
  %nctaid = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()
  %tid64 = zext i32 %tid to i64
  %ctaid64 = zext i32 %ctaid to i64
  %ntid64 = zext i32 %ntid to i64
  %nctaid64 = zext i32 %nctaid to i64
  %blk = mul i64 %ctaid64, %ntid64
  %start = add i64 %blk, %tid64
  %t = mul i64 %nctaid64, %ntid64
  %t2 = shl i64 %t, 1
  %t3 = add i64 %t2, %t
  %t4 = shl i64 %t, 2
  br label %main

main:
  %i = phi i64 [ %start, %entry ], [ %inext, %body ]
  %last = add i64 %i, %t3
  %ok = icmp ult i64 %last, %n
  br i1 %ok, label %body, label %tail

body:
  %i1 = add i64 %i, %t
  %i2 = add i64 %i, %t2
  %s0 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %src, i64 %i
  %s1 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %src, i64 %i1
  %s2 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %src, i64 %i2
  %s3 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %src, i64 %last
  %v0 = load <4 x i32>, ptr addrspace(1) %s0, align 16
  %v1 = load <4 x i32>, ptr addrspace(1) %s1, align 16
  %v2 = load <4 x i32>, ptr addrspace(1) %s2, align 16
  %v3 = load <4 x i32>, ptr addrspace(1) %s3, align 16
  %d0 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %dst, i64 %i
  %d1 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %dst, i64 %i1
  %d2 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %dst, i64 %i2
  %d3 = getelementptr inbounds <4 x i32>, ptr addrspace(1) %dst, i64 %last
  store <4 x i32> %v0, ptr addrspace(1) %d0, align 16
  store <4 x i32> %v1, ptr addrspace(1) %d1, align 16
  store <4 x i32> %v2, ptr addrspace(1) %d2, align 16
  store <4 x i32> %v3, ptr addrspace(1) %d3, align 16
  %inext = add i64 %i, %t4
  br label %main

tail:
  %j = phi i64 [ %i, %main ], [ %jnext, %tbody ]
  %tok = icmp ult i64 %j, %n
  br i1 %tok, label %tbody, label %done

tbody:
  %sj = getelementptr inbounds <4 x i32>, ptr addrspace(1) %src, i64 %j
  %vj = load <4 x i32>, ptr addrspace(1) %sj, align 16
  %dj = getelementptr inbounds <4 x i32>, ptr addrspace(1) %dst, i64 %j
  store <4 x i32> %vj, ptr addrspace(1) %dj, align 16
  %jnext = add i64 %j, %t
  br label %tail

done:
  ret void
}
"""


def copy_v4_ptx(arch: str = "sm_90", ptx_features: str = "+ptx80") -> str:
    """PTX of ``copy_v4`` compiled by llvmlite's NVPTX back end (O3)."""
    import llvmlite.binding as llvm

    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    mod = llvm.parse_assembly(COPY_V4_LL)
    mod.verify()
    from kinac.codegen.target import NVPTX_TRIPLE

    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    tm = target.create_target_machine(cpu=arch, features=ptx_features, opt=3)
    return str(tm.emit_assembly(mod))
