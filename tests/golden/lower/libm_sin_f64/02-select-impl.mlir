builtin.module {
  func.func @sin_f64(%x: tensor<8xf64>) -> tensor<8xf64> {
    %0 = kina.sin %x : tensor<8xf64>
    func.return %0 : tensor<8xf64>
  }
}
