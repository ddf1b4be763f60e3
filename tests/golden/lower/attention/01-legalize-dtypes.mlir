builtin.module {
  func.func @attention(%x: tensor<1x16x32xf32>, %wq: tensor<32x32xf32>, %wk: tensor<32x16xf32>, %wv: tensor<32x16xf32>, %wo: tensor<32x32xf32>) -> tensor<1x16x32xf32> {
    %0 = kina.matmul %x, %wq : tensor<1x16x32xf32>, tensor<32x32xf32> -> tensor<1x16x32xf32>
    %1 = kina.reshape %0 : tensor<1x16x32xf32> -> tensor<1x16x2x16xf32>
    %2 = kina.transpose %1 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x16x2x16xf32> -> tensor<1x2x16x16xf32>
    %3 = kina.matmul %x, %wk : tensor<1x16x32xf32>, tensor<32x16xf32> -> tensor<1x16x16xf32>
    %4 = kina.reshape %3 : tensor<1x16x16xf32> -> tensor<1x16x1x16xf32>
    %5 = kina.transpose %4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x16x1x16xf32> -> tensor<1x1x16x16xf32>
    %6 = kina.repeat_interleave %5 {axis = 1 : i64, repeats = 2 : i64} : tensor<1x1x16x16xf32> -> tensor<1x2x16x16xf32>
    %7 = kina.matmul %x, %wv : tensor<1x16x32xf32>, tensor<32x16xf32> -> tensor<1x16x16xf32>
    %8 = kina.reshape %7 : tensor<1x16x16xf32> -> tensor<1x16x1x16xf32>
    %9 = kina.transpose %8 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x16x1x16xf32> -> tensor<1x1x16x16xf32>
    %10 = kina.repeat_interleave %9 {axis = 1 : i64, repeats = 2 : i64} : tensor<1x1x16x16xf32> -> tensor<1x2x16x16xf32>
    %11 = kina.const {value = 1.600000e+01 : f64} : tensor<f32>
    %12 = kina.rsqrt %11 : tensor<f32>
    %13 = kina.transpose %6 {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x16x16xf32> -> tensor<1x2x16x16xf32>
    %14 = kina.matmul %2, %13 : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32> -> tensor<1x2x16x16xf32>
    %15 = kina.mul %14, %12 : tensor<1x2x16x16xf32>, tensor<f32> -> tensor<1x2x16x16xf32>
    %16 = kina.iota {axis = 0 : i64} : tensor<16x16xi32>
    %17 = kina.iota {axis = 1 : i64} : tensor<16x16xi32>
    %18 = kina.ge %16, %17 : tensor<16x16xi32>, tensor<16x16xi32> -> tensor<16x16xi1>
    %19 = kina.full {value = 0.000000e+00 : f64} : tensor<16x16xf32>
    %20 = kina.full {value = 0xfff0000000000000 : f64} : tensor<16x16xf32>
    %21 = kina.where %18, %19, %20 : tensor<16x16xi1>, tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
    %22 = kina.add %15, %21 : tensor<1x2x16x16xf32>, tensor<16x16xf32> -> tensor<1x2x16x16xf32>
    %23 = kina.softmax %22 {axis = 3 : i64} : tensor<1x2x16x16xf32>
    %24 = kina.matmul %23, %10 : tensor<1x2x16x16xf32>, tensor<1x2x16x16xf32> -> tensor<1x2x16x16xf32>
    %25 = kina.transpose %24 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x16x16xf32> -> tensor<1x16x2x16xf32>
    %26 = kina.reshape %25 : tensor<1x16x2x16xf32> -> tensor<1x16x32xf32>
    %27 = kina.matmul %26, %wo : tensor<1x16x32xf32>, tensor<32x32xf32> -> tensor<1x16x32xf32>
    func.return %27 : tensor<1x16x32xf32>
  }
}
