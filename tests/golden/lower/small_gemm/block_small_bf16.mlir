builtin.module {
  func.func @block(%x: tensor<4x128x256xbf16>, %wn1: tensor<256xbf16>, %wq: tensor<256x256xbf16>, %wk: tensor<256x128xbf16>, %wv: tensor<256x128xbf16>, %wo: tensor<256x256xbf16>, %wn2: tensor<256xbf16>, %wg: tensor<256x704xbf16>, %wu: tensor<256x704xbf16>, %wd: tensor<704x256xbf16>) -> tensor<4x128x256xbf16> {
    %0 = "kina.kernel"(%x, %wq, %wk, %wv, %wn1) <{kind = "matmul", impl = "tc", sym = "k2_matmul"}> ({
    ^bb0(%1: tensor<4x128x256xbf16>, %2: tensor<256x256xbf16>, %3: tensor<256x128xbf16>, %4: tensor<256x128xbf16>, %5: tensor<256xbf16>):
      %6 = kina.square %1 : tensor<4x128x256xbf16>
      %7 = kina.reduce_mean %6 {axis = 2 : i64, keepdims = 1 : i64} : tensor<4x128x256xbf16> -> tensor<4x128x1xbf16>
      %8 = kina.const {value = 1.000000e-06 : f64} : tensor<bf16>
      %9 = kina.add %7, %8 : tensor<4x128x1xbf16>, tensor<bf16> -> tensor<4x128x1xbf16>
      %10 = kina.sqrt %9 : tensor<4x128x1xbf16>
      %11 = kina.div %1, %10 : tensor<4x128x256xbf16>, tensor<4x128x1xbf16> -> tensor<4x128x256xbf16>
      %12 = kina.mul %11, %5 : tensor<4x128x256xbf16>, tensor<256xbf16> -> tensor<4x128x256xbf16>
      %13 = kina.matmul %12, %2 {impl = "tc"} : tensor<4x128x256xbf16>, tensor<256x256xbf16> -> tensor<4x128x256xbf16>
      %14 = kina.matmul %12, %3 {impl = "tc"} : tensor<4x128x256xbf16>, tensor<256x128xbf16> -> tensor<4x128x128xbf16>
      %15 = kina.matmul %12, %4 {impl = "tc"} : tensor<4x128x256xbf16>, tensor<256x128xbf16> -> tensor<4x128x128xbf16>
      %16 = kina.concat %13, %14, %15 {axis = 2 : i64} : tensor<4x128x256xbf16>, tensor<4x128x128xbf16>, tensor<4x128x128xbf16> -> tensor<4x128x512xbf16>
      kina.yield %16 : tensor<4x128x512xbf16>
    }) {prologue = "rms", tc = "{\22$t\22:\22ir.gpu.small_gemm_kernel.SmallGemmParams\22,\22args\22:[0,1,2,3,4],\22block_m\22:32,\22dtype\22:\22bf16\22,\22early_res\22:false,\22epilogue\22:\22\22,\22eps\22:9.98377799987793e-07,\22fold\22:true,\22k\22:256,\22ksplit\22:4,\22m\22:512,\22n_inputs\22:5,\22norm\22:true,\22ns\22:[256,128,128],\22prefetch\22:[\22w\22,\22wn\22]}"} : (tensor<4x128x256xbf16>, tensor<256x256xbf16>, tensor<256x128xbf16>, tensor<256x128xbf16>, tensor<256xbf16>) -> tensor<4x128x512xbf16>
    %17 = "kina.kernel"(%0) <{kind = "attention", impl = "flash", sym = "k7_attention"}> ({
    ^bb0(%18: tensor<4x128x512xbf16>):
      %19 = kina.slice %18 {axis = 2 : i64, start = 256 : i64, stop = 384 : i64} : tensor<4x128x512xbf16> -> tensor<4x128x128xbf16>
      %20 = kina.slice %18 {axis = 2 : i64, start = 0 : i64, stop = 256 : i64} : tensor<4x128x512xbf16> -> tensor<4x128x256xbf16>
      %21 = kina.slice %18 {axis = 2 : i64, start = 384 : i64, stop = 512 : i64} : tensor<4x128x512xbf16> -> tensor<4x128x128xbf16>
      %22 = kina.reshape %20 : tensor<4x128x256xbf16> -> tensor<4x128x4x64xbf16>
      %23 = kina.transpose %22 {perm = array<i64: 0, 2, 1, 3>} : tensor<4x128x4x64xbf16> -> tensor<4x4x128x64xbf16>
      %24 = kina.reshape %19 : tensor<4x128x128xbf16> -> tensor<4x128x2x64xbf16>
      %25 = kina.transpose %24 {perm = array<i64: 0, 2, 1, 3>} : tensor<4x128x2x64xbf16> -> tensor<4x2x128x64xbf16>
      %26 = kina.repeat_interleave %25 {axis = 1 : i64, repeats = 2 : i64} : tensor<4x2x128x64xbf16> -> tensor<4x4x128x64xbf16>
      %27 = kina.transpose %26 {perm = array<i64: 0, 1, 3, 2>} : tensor<4x4x128x64xbf16> -> tensor<4x4x64x128xbf16>
      %28 = kina.matmul %23, %27 {impl = "blas"} : tensor<4x4x128x64xbf16>, tensor<4x4x64x128xbf16> -> tensor<4x4x128x128xbf16>
      %29 = kina.const {value = 6.400000e+01 : f64} : tensor<bf16>
      %30 = kina.rsqrt %29 : tensor<bf16>
      %31 = kina.mul %28, %30 : tensor<4x4x128x128xbf16>, tensor<bf16> -> tensor<4x4x128x128xbf16>
      %32 = kina.iota {axis = 0 : i64} : tensor<128x128xi32>
      %33 = kina.iota {axis = 1 : i64} : tensor<128x128xi32>
      %34 = kina.ge %32, %33 : tensor<128x128xi32>, tensor<128x128xi32> -> tensor<128x128xi1>
      %35 = kina.full {value = 0.000000e+00 : f64} : tensor<128x128xbf16>
      %36 = kina.full {value = 0xfff0000000000000 : f64} : tensor<128x128xbf16>
      %37 = kina.where %34, %35, %36 : tensor<128x128xi1>, tensor<128x128xbf16>, tensor<128x128xbf16> -> tensor<128x128xbf16>
      %38 = kina.add %31, %37 : tensor<4x4x128x128xbf16>, tensor<128x128xbf16> -> tensor<4x4x128x128xbf16>
      %39 = kina.softmax %38 {axis = 3 : i64} : tensor<4x4x128x128xbf16>
      %40 = kina.reshape %21 : tensor<4x128x128xbf16> -> tensor<4x128x2x64xbf16>
      %41 = kina.transpose %40 {perm = array<i64: 0, 2, 1, 3>} : tensor<4x128x2x64xbf16> -> tensor<4x2x128x64xbf16>
      %42 = kina.repeat_interleave %41 {axis = 1 : i64, repeats = 2 : i64} : tensor<4x2x128x64xbf16> -> tensor<4x4x128x64xbf16>
      %43 = kina.matmul %39, %42 {impl = "blas"} : tensor<4x4x128x128xbf16>, tensor<4x4x128x64xbf16> -> tensor<4x4x128x64xbf16>
      %44 = kina.transpose %43 {perm = array<i64: 0, 2, 1, 3>} : tensor<4x4x128x64xbf16> -> tensor<4x128x4x64xbf16>
      %45 = kina.reshape %44 : tensor<4x128x4x64xbf16> -> tensor<4x128x256xbf16>
      kina.yield %45 : tensor<4x128x256xbf16>
    }) : (tensor<4x128x512xbf16>) -> tensor<4x128x256xbf16>
    %46 = "kina.kernel"(%17, %wo, %x) <{kind = "matmul", impl = "tc", sym = "k9_matmul"}> ({
    ^bb0(%47: tensor<4x128x256xbf16>, %48: tensor<256x256xbf16>, %49: tensor<4x128x256xbf16>):
      %50 = kina.matmul %47, %48 {impl = "tc"} : tensor<4x128x256xbf16>, tensor<256x256xbf16> -> tensor<4x128x256xbf16>
      %51 = kina.add %49, %50 : tensor<4x128x256xbf16>, tensor<4x128x256xbf16> -> tensor<4x128x256xbf16>
      kina.yield %51 : tensor<4x128x256xbf16>
    }) {epilogue = "residual", tc = "{\22$t\22:\22ir.gpu.small_gemm_kernel.SmallGemmParams\22,\22args\22:[0,1,2],\22block_m\22:16,\22dtype\22:\22bf16\22,\22early_res\22:true,\22epilogue\22:\22residual\22,\22eps\22:0.0,\22fold\22:false,\22k\22:256,\22ksplit\22:4,\22m\22:512,\22n_inputs\22:3,\22norm\22:false,\22ns\22:[256],\22prefetch\22:[\22w\22]}"} : (tensor<4x128x256xbf16>, tensor<256x256xbf16>, tensor<4x128x256xbf16>) -> tensor<4x128x256xbf16>
    %52 = "kina.kernel"(%46, %wg, %wu, %wn2) <{kind = "matmul", impl = "tc", sym = "k15_matmul"}> ({
    ^bb0(%53: tensor<4x128x256xbf16>, %54: tensor<256x704xbf16>, %55: tensor<256x704xbf16>, %56: tensor<256xbf16>):
      %57 = kina.square %53 : tensor<4x128x256xbf16>
      %58 = kina.reduce_mean %57 {axis = 2 : i64, keepdims = 1 : i64} : tensor<4x128x256xbf16> -> tensor<4x128x1xbf16>
      %59 = kina.const {value = 1.000000e-06 : f64} : tensor<bf16>
      %60 = kina.add %58, %59 : tensor<4x128x1xbf16>, tensor<bf16> -> tensor<4x128x1xbf16>
      %61 = kina.sqrt %60 : tensor<4x128x1xbf16>
      %62 = kina.div %53, %61 : tensor<4x128x256xbf16>, tensor<4x128x1xbf16> -> tensor<4x128x256xbf16>
      %63 = kina.mul %62, %56 : tensor<4x128x256xbf16>, tensor<256xbf16> -> tensor<4x128x256xbf16>
      %64 = kina.matmul %63, %54 {impl = "tc"} : tensor<4x128x256xbf16>, tensor<256x704xbf16> -> tensor<4x128x704xbf16>
      %65 = kina.matmul %63, %55 {impl = "tc"} : tensor<4x128x256xbf16>, tensor<256x704xbf16> -> tensor<4x128x704xbf16>
      %66 = kina.silu %64 : tensor<4x128x704xbf16>
      %67 = kina.mul %66, %65 : tensor<4x128x704xbf16>, tensor<4x128x704xbf16> -> tensor<4x128x704xbf16>
      kina.yield %67 : tensor<4x128x704xbf16>
    }) {prologue = "rms", epilogue = "swiglu", tc = "{\22$t\22:\22ir.gpu.small_gemm_kernel.SmallGemmParams\22,\22args\22:[0,1,2,3],\22block_m\22:64,\22dtype\22:\22bf16\22,\22early_res\22:false,\22epilogue\22:\22swiglu\22,\22eps\22:9.98377799987793e-07,\22fold\22:true,\22k\22:256,\22ksplit\22:2,\22m\22:512,\22n_inputs\22:4,\22norm\22:true,\22ns\22:[704,704],\22prefetch\22:[\22w\22,\22wn\22]}"} : (tensor<4x128x256xbf16>, tensor<256x704xbf16>, tensor<256x704xbf16>, tensor<256xbf16>) -> tensor<4x128x704xbf16>
    %68 = "kina.kernel"(%52, %wd, %46) <{kind = "matmul", impl = "tc", sym = "k16_matmul"}> ({
    ^bb0(%69: tensor<4x128x704xbf16>, %70: tensor<704x256xbf16>, %71: tensor<4x128x256xbf16>):
      %72 = kina.matmul %69, %70 {impl = "tc"} : tensor<4x128x704xbf16>, tensor<704x256xbf16> -> tensor<4x128x256xbf16>
      %73 = kina.add %71, %72 : tensor<4x128x256xbf16>, tensor<4x128x256xbf16> -> tensor<4x128x256xbf16>
      kina.yield %73 : tensor<4x128x256xbf16>
    }) {epilogue = "residual", tc = "{\22$t\22:\22ir.gpu.small_gemm_kernel.SmallGemmParams\22,\22args\22:[0,1,2],\22block_m\22:16,\22dtype\22:\22bf16\22,\22early_res\22:true,\22epilogue\22:\22residual\22,\22eps\22:0.0,\22fold\22:false,\22k\22:704,\22ksplit\22:4,\22m\22:512,\22n_inputs\22:3,\22norm\22:false,\22ns\22:[256],\22prefetch\22:[\22w\22]}"} : (tensor<4x128x704xbf16>, tensor<704x256xbf16>, tensor<4x128x256xbf16>) -> tensor<4x128x256xbf16>
    func.return %68 : tensor<4x128x256xbf16>
  }
}
