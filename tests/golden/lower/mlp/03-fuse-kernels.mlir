builtin.module {
  func.func @mlp(%x: tensor<2x8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x16xf32>, %b2: tensor<16xf32>) -> tensor<2x8x16xf32> {
    %0 = "kina.kernel"(%x, %w1) <{kind = "matmul", impl = "blas", sym = "k0_matmul"}> ({
    ^bb0(%1: tensor<2x8x16xf32>, %2: tensor<16x32xf32>):
      %3 = kina.matmul %1, %2 {impl = "blas"} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
      kina.yield %3 : tensor<2x8x32xf32>
    }) : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
    %4 = "kina.kernel"(%0, %b1) <{kind = "map", impl = "loops", sym = "k1_map"}> ({
    ^bb0(%5: tensor<2x8x32xf32>, %6: tensor<32xf32>):
      %7 = kina.add %5, %6 : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
      %8 = kina.gelu %7 : tensor<2x8x32xf32>
      kina.yield %8 : tensor<2x8x32xf32>
    }) : (tensor<2x8x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
    %9 = "kina.kernel"(%4, %w2) <{kind = "matmul", impl = "blas", sym = "k2_matmul"}> ({
    ^bb0(%10: tensor<2x8x32xf32>, %11: tensor<32x16xf32>):
      %12 = kina.matmul %10, %11 {impl = "blas"} : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
      kina.yield %12 : tensor<2x8x16xf32>
    }) : (tensor<2x8x32xf32>, tensor<32x16xf32>) -> tensor<2x8x16xf32>
    %13 = "kina.kernel"(%9, %b2) <{kind = "map", impl = "loops", sym = "k3_map"}> ({
    ^bb0(%14: tensor<2x8x16xf32>, %15: tensor<16xf32>):
      %16 = kina.add %14, %15 : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
      kina.yield %16 : tensor<2x8x16xf32>
    }) : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
    func.return %13 : tensor<2x8x16xf32>
  }
}
