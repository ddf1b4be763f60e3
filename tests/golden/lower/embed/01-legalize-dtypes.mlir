builtin.module {
  func.func @embed(%table: tensor<10x4xbf16>, %ids: tensor<2x3xi32>) -> tensor<2x3xf32> {
    %0 = kina.gather %table, %ids : tensor<10x4xbf16>, tensor<2x3xi32> -> tensor<2x3x4xbf16>
    %1 = kina.cast %0 : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
    %2 = kina.neg %1 : tensor<2x3x4xf32>
    %3 = kina.cast %2 : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
    %4 = kina.concat %0, %3 {axis = 2 : i64} : tensor<2x3x4xbf16>, tensor<2x3x4xbf16> -> tensor<2x3x8xbf16>
    %5 = kina.cast %4 : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
    %6 = kina.exp %5 : tensor<2x3x8xf32>
    %7 = kina.cast %6 : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
    %8 = kina.cast %7 : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
    %9 = kina.reduce_mean %8 {axis = 2 : i64, keepdims = 0 : i64} : tensor<2x3x8xf32> -> tensor<2x3xf32>
    %10 = kina.cast %9 : tensor<2x3xf32> -> tensor<2x3xbf16>
    %11 = kina.cast %10 : tensor<2x3xbf16> -> tensor<2x3xf32>
    func.return %11 : tensor<2x3xf32>
  }
}
