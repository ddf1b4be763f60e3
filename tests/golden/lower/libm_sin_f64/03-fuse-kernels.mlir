builtin.module {
  func.func @sin_f64(%x: tensor<8xf64>) -> tensor<8xf64> {
    %0 = "kina.kernel"(%x) <{kind = "map", impl = "loops", sym = "k0_map"}> ({
    ^bb0(%1: tensor<8xf64>):
      %2 = kina.sin %1 : tensor<8xf64>
      kina.yield %2 : tensor<8xf64>
    }) : (tensor<8xf64>) -> tensor<8xf64>
    func.return %0 : tensor<8xf64>
  }
}
