builtin.module {
  func.func @embed(%table: tensor<10x4xbf16>, %ids: tensor<2x3xi32>) -> tensor<2x3xf32> {
    %0 = kina.gather %table, %ids : tensor<10x4xbf16>, tensor<2x3xi32> -> tensor<2x3x4xbf16>
    %1 = kina.neg %0 : tensor<2x3x4xbf16>
    %2 = kina.concat %0, %1 {axis = 2 : i64} : tensor<2x3x4xbf16>, tensor<2x3x4xbf16> -> tensor<2x3x8xbf16>
    %3 = kina.exp %2 : tensor<2x3x8xbf16>
    %4 = kina.reduce_mean %3 {axis = 2 : i64, keepdims = 0 : i64} : tensor<2x3x8xbf16> -> tensor<2x3xbf16>
    %5 = kina.cast %4 : tensor<2x3xbf16> -> tensor<2x3xf32>
    func.return %5 : tensor<2x3xf32>
  }
}
