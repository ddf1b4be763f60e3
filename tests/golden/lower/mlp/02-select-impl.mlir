builtin.module {
  func.func @mlp(%x: tensor<2x8x16xf32>, %w1: tensor<16x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x16xf32>, %b2: tensor<16xf32>) -> tensor<2x8x16xf32> {
    %0 = kina.matmul %x, %w1 {impl = "blas"} : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
    %1 = kina.add %0, %b1 : tensor<2x8x32xf32>, tensor<32xf32> -> tensor<2x8x32xf32>
    %2 = kina.gelu %1 : tensor<2x8x32xf32>
    %3 = kina.matmul %2, %w2 {impl = "blas"} : tensor<2x8x32xf32>, tensor<32x16xf32> -> tensor<2x8x16xf32>
    %4 = kina.add %3, %b2 : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
    func.return %4 : tensor<2x8x16xf32>
  }
}
