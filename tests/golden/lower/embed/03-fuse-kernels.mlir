builtin.module {
  func.func @embed(%table: tensor<10x4xbf16>, %ids: tensor<2x3xi32>) -> tensor<2x3xf32> {
    %0 = "kina.kernel"(%table, %ids) <{kind = "gather", impl = "loops", sym = "k0_gather"}> ({
    ^bb0(%1: tensor<10x4xbf16>, %2: tensor<2x3xi32>):
      %3 = kina.gather %1, %2 : tensor<10x4xbf16>, tensor<2x3xi32> -> tensor<2x3x4xbf16>
      kina.yield %3 : tensor<2x3x4xbf16>
    }) : (tensor<10x4xbf16>, tensor<2x3xi32>) -> tensor<2x3x4xbf16>
    %4 = "kina.kernel"(%0) <{kind = "concat", impl = "loops", sym = "k1_concat"}> ({
    ^bb0(%5: tensor<2x3x4xbf16>):
      %6 = kina.cast %5 : tensor<2x3x4xbf16> -> tensor<2x3x4xf32>
      %7 = kina.neg %6 : tensor<2x3x4xf32>
      %8 = kina.cast %7 : tensor<2x3x4xf32> -> tensor<2x3x4xbf16>
      %9 = kina.concat %5, %8 {axis = 2 : i64} : tensor<2x3x4xbf16>, tensor<2x3x4xbf16> -> tensor<2x3x8xbf16>
      kina.yield %9 : tensor<2x3x8xbf16>
    }) : (tensor<2x3x4xbf16>) -> tensor<2x3x8xbf16>
    %10 = "kina.kernel"(%4) <{kind = "reduce", impl = "loops", sym = "k2_reduce"}> ({
    ^bb0(%11: tensor<2x3x8xbf16>):
      %12 = kina.cast %11 : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
      %13 = kina.exp %12 : tensor<2x3x8xf32>
      %14 = kina.cast %13 : tensor<2x3x8xf32> -> tensor<2x3x8xbf16>
      %15 = kina.cast %14 : tensor<2x3x8xbf16> -> tensor<2x3x8xf32>
      %16 = kina.reduce_mean %15 {axis = 2 : i64, keepdims = 0 : i64} : tensor<2x3x8xf32> -> tensor<2x3xf32>
      kina.yield %16 : tensor<2x3xf32>
    }) : (tensor<2x3x8xbf16>) -> tensor<2x3xf32>
    %17 = "kina.kernel"(%10) <{kind = "map", impl = "loops", sym = "k3_map"}> ({
    ^bb0(%18: tensor<2x3xf32>):
      %19 = kina.cast %18 : tensor<2x3xf32> -> tensor<2x3xbf16>
      %20 = kina.cast %19 : tensor<2x3xbf16> -> tensor<2x3xf32>
      kina.yield %20 : tensor<2x3xf32>
    }) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    func.return %17 : tensor<2x3xf32>
  }
}
