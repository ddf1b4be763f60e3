builtin.module {
  func.func @attention(%x: tensor<1x16x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<32x16xf32>, %wv: tensor<32x16xf32>, %wo: tensor<32x32xf32>) -> tensor<1x16x32xf32> {
    %0 = "kina.kernel"(%x, %wq) <{kind = "matmul", impl = "blas", sym = "k0_matmul"}> ({
    ^bb0(%1: tensor<1x16x32xf32>, %2: tensor<32x32xf32>):
      %3 = kina.matmul %1, %2 {impl = "blas"} : tensor<1x16x32xf32>, tensor<32x32xf32> -> tensor<1x16x32xf32>
      kina.yield %3 : tensor<1x16x32xf32>
    }) : (tensor<1x16x32xf32>, tensor<32x32xf32>) -> tensor<1x16x32xf32>
    %4 = "kina.kernel"(%x, %wk) <{kind = "matmul", impl = "blas", sym = "k1_matmul"}> ({
    ^bb0(%5: tensor<1x16x32xf32>, %6: tensor<32x16xf32>):
      %7 = kina.matmul %5, %6 {impl = "blas"} : tensor<1x16x32xf32>, tensor<32x16xf32> -> tensor<1x16x16xf32>
      kina.yield %7 : tensor<1x16x16xf32>
    }) : (tensor<1x16x32xf32>, tensor<32x16xf32>) -> tensor<1x16x16xf32>
    %8 = "kina.kernel"(%x, %wv) <{kind = "matmul", impl = "blas", sym = "k2_matmul"}> ({
    ^bb0(%9: tensor<1x16x32xf32>, %10: tensor<32x16xf32>):
      %11 = kina.matmul %9, %10 {impl = "blas"} : tensor<1x16x32xf32>, tensor<32x16xf32> -> tensor<1x16x16xf32>
      kina.yield %11 : tensor<1x16x16xf32>
    }) : (tensor<1x16x32xf32>, tensor<32x16xf32>) -> tensor<1x16x16xf32>
    %12 = "kina.kernel"(%4, %0) <{kind = "matmul", impl = "blas", sym = "k3_matmul"}> ({
    ^bb0(%13: tensor<1x16x16xf32>, %14: tensor<1x16x32xf32>):
      %15 = kina.reshape %14 : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
      %16 = kina.transpose %15 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
      %17 = kina.reshape %13 : tensor<1x16x16xf32> -> tensor<1x16x1x16xf32>
      %18 = kina.transpose %17 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x16x1x16xf32> -> tensor<1x1x16x16xf32>
      %19 = kina.repeat_interleave %18 {axis = 1 : i64, repeats = 2 : i64} : tensor<1x1x16x16xf32> -> tensor<1x2x16x16xf32>
      %20 = kina.transpose %19 {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x16x16xf32> -> tensor<1x2x16x16xf32>
      %21 = kina.matmul %16, %20 {causal = "scores", impl = "blas"} : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32> -> tensor<1x2x16x16xf32>
      kina.yield %21 : tensor<1x2x16x16xf32>
    }) : (tensor<1x16x16xf32>, tensor<1x16x32xf32>) -> tensor<1x2x16x16xf32>
    %22 = "kina.kernel"(%12) <{kind = "softmax", impl = "loops", sym = "k4_softmax"}> ({
    ^bb0(%23: tensor<1x2x16x16xf32>):
      %24 = kina.const {value = 1.600000e+01 : f64} : tensor<f32>
      %25 = kina.rsqrt %24 : tensor<f32>
      %26 = kina.mul %23, %25 : tensor<1x2x16x16xf32>, tensor<f32> -> tensor<1x2x16x16xf32>
      %27 = kina.iota {axis = 0 : i64} : tensor<16x16xi32>
      %28 = kina.iota {axis = 1 : i64} : tensor<16x16xi32>
      %29 = kina.ge %27, %28 : tensor<16x16xi32>, tensor<16x16xi32> -> tensor<16x16xi1>
      %30 = kina.full {value = 0.000000e+00 : f64} : tensor<16x16xf32>
      %31 = kina.full {value = 0xfff0000000000000 : f64} : tensor<16x16xf32>
      %32 = kina.where %29, %30, %31 : tensor<16x16xi1>, tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
      %33 = kina.add %26, %32 : tensor<1x2x16x16xf32>, tensor<16x16xf32> -> tensor<1x2x16x16xf32>
      %34 = kina.softmax %33 {axis = 3 : i64} : tensor<1x2x16x16xf32>
      kina.yield %34 : tensor<1x2x16x16xf32>
    }) : (tensor<1x2x16x16xf32>) -> tensor<1x2x16x16xf32>
    %35 = "kina.kernel"(%22, %8) <{kind = "matmul", impl = "blas", sym = "k5_matmul"}> ({
    ^bb0(%36: tensor<1x2x16x16xf32>, %37: tensor<1x16x16xf32>):
      %38 = kina.reshape %37 : tensor<1x16x16xf32> -> tensor<1x16x1x16xf32>
      %39 = kina.transpose %38 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x16x1x16xf32> -> tensor<1x1x16x16xf32>
      %40 = kina.repeat_interleave %39 {axis = 1 : i64, repeats = 2 : i64} : tensor<1x1x16x16xf32> -> tensor<1x2x16x16xf32>
      %41 = kina.matmul %36, %40 {causal = "weights", impl = "blas"} : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32> -> tensor<1x2x16x16xf32>
      %42 = kina.transpose %41 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x16x16xf32> -> tensor<1x16x2x16xf32>
      %43 = kina.reshape %42 : tensor<1x16x2x16xf32> -> tensor<1x16x32xf32>
      kina.yield %43 : tensor<1x16x32xf32>
    }) : (tensor<1x2x16x16xf32>, tensor<1x16x16xf32>) -> tensor<1x16x32xf32>
    %44 = "kina.kernel"(%35, %wo) <{kind = "matmul", impl = "blas", sym = "k7_matmul"}> ({
    ^bb0(%45: tensor<1x16x32xf32>, %46: tensor<32x32xf32>):
      %47 = kina.matmul %45, %46 {impl = "blas"} : tensor<1x16x32xf32>, tensor<32x32xf32> -> tensor<1x16x32xf32>
      kina.yield %47 : tensor<1x16x32xf32>
    }) : (tensor<1x16x32xf32>, tensor<32x32xf32>) -> tensor<1x16x32xf32>
    func.return %44 : tensor<1x16x32xf32>
  }
}
