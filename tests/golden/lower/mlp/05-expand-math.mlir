builtin.module {
  func.func @mlp(%x: memref<256xf32>, %w1: memref<512xf32>, %b1: memref<32xf32>, %w2: memref<512xf32>, %b2: memref<16xf32>, %0: memref<256xf32>, %1: memref<4096xi8>, %2: memref<8xi64>) attributes {kinac.entry, kinac.arena_bytes = 4096 : i64} {
    %3 = arith.constant 0 : index
    %4 = memref.view %1[%3][] : memref<4096xi8> to memref<512xf32>
    func.call @k0_matmul(%4, %x, %w1) {kind = "matmul", impl = "blas"} : (memref<512xf32>, memref<256xf32>, memref<512xf32>) -> ()
    %5 = arith.constant 2048 : index
    %6 = memref.view %1[%5][] : memref<4096xi8> to memref<512xf32>
    func.call @k1_map(%6, %4, %b1) {kind = "map", impl = "loops"} : (memref<512xf32>, memref<512xf32>, memref<32xf32>) -> ()
    %7 = arith.constant 0 : index
    %8 = memref.view %1[%7][] : memref<4096xi8> to memref<256xf32>
    func.call @k2_matmul(%8, %6, %w2) {kind = "matmul", impl = "blas"} : (memref<256xf32>, memref<512xf32>, memref<512xf32>) -> ()
    func.call @k3_map(%0, %8, %b2) {kind = "map", impl = "loops"} : (memref<256xf32>, memref<256xf32>, memref<16xf32>) -> ()
    func.return
  }
  func.func private @k0_matmul(%0: memref<512xf32> {llvm.noalias}, %1: memref<256xf32> {llvm.noalias}, %2: memref<512xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    kbuf.gemm %1[%3], %2[%3], %0[%3] {m = 16 : i64, n = 32 : i64, k = 16 : i64, lda = 16 : i64, ldb = 32 : i64, ldc = 32 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<256xf32>, memref<512xf32>, memref<512xf32>
    func.return
  }
  func.func private @k1_map(%0: memref<512xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<32xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    %4 = arith.constant 2 : index
    %5 = arith.constant 1 : index
    %6 = arith.constant 8 : index
    %7 = arith.constant 32 : index
    %8 = arith.constant 256 : index
    %9 = arith.constant 5.000000e-01 : f32
    %10 = arith.constant 0.707106769 : f32
    %11 = arith.constant 1.000000e+00 : f32
    scf.for %12 = %3 to %4 step %5 {
      %13 = arith.muli %12, %8 : index
      scf.for %14 = %3 to %6 step %5 {
        %15 = arith.muli %14, %7 : index
        %16 = arith.addi %13, %15 : index
        scf.for %17 = %3 to %7 step %5 {
          %18 = arith.addi %16, %17 : index
          %19 = memref.load %1[%18] : memref<512xf32>
          %20 = memref.load %2[%17] : memref<32xf32>
          %21 = arith.addf %19, %20 fastmath<contract> : f32
          %22 = arith.mulf %21, %9 fastmath<contract> : f32
          %23 = arith.mulf %21, %10 fastmath<contract> : f32
          %24 = func.call @kinac_erff(%23) : (f32) -> f32
          %25 = arith.addf %11, %24 fastmath<contract> : f32
          %26 = arith.mulf %22, %25 fastmath<contract> : f32
          memref.store %26, %0[%18] : memref<512xf32>
        }
      }
    }
    func.return
  }
  func.func private @k2_matmul(%0: memref<256xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<512xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    kbuf.gemm %1[%3], %2[%3], %0[%3] {m = 16 : i64, n = 16 : i64, k = 32 : i64, lda = 32 : i64, ldb = 16 : i64, ldc = 16 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<512xf32>, memref<512xf32>, memref<256xf32>
    func.return
  }
  func.func private @k3_map(%0: memref<256xf32> {llvm.noalias}, %1: memref<256xf32> {llvm.noalias}, %2: memref<16xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    %4 = arith.constant 2 : index
    %5 = arith.constant 1 : index
    %6 = arith.constant 8 : index
    %7 = arith.constant 16 : index
    %8 = arith.constant 128 : index
    scf.for %9 = %3 to %4 step %5 {
      %10 = arith.muli %9, %8 : index
      scf.for %11 = %3 to %6 step %5 {
        %12 = arith.muli %11, %7 : index
        %13 = arith.addi %10, %12 : index
        scf.for %14 = %3 to %7 step %5 {
          %15 = arith.addi %13, %14 : index
          %16 = memref.load %1[%15] : memref<256xf32>
          %17 = memref.load %2[%14] : memref<16xf32>
          %18 = arith.addf %16, %17 fastmath<contract> : f32
          memref.store %18, %0[%15] : memref<256xf32>
        }
      }
    }
    func.return
  }
  func.func private @kinac_erff(%0: f32) -> f32 {
    %1 = arith.constant -4.000000e+00 : f32
    %2 = arith.maximumf %0, %1 : f32
    %3 = arith.constant 4.000000e+00 : f32
    %4 = arith.minimumf %2, %3 : f32
    %5 = arith.mulf %4, %4 : f32
    %6 = arith.constant -2.72614237e-10 : f32
    %7 = arith.constant 2.77068146e-08 : f32
    %8 = math.fma %6, %5, %7 : f32
    %9 = arith.constant -2.10102394e-06 : f32
    %10 = math.fma %8, %5, %9 : f32
    %11 = arith.constant -5.69250624e-05 : f32
    %12 = math.fma %10, %5, %11 : f32
    %13 = arith.constant -0.000734990637 : f32
    %14 = math.fma %12, %5, %13 : f32
    %15 = arith.constant -2.954600e-03 : f32
    %16 = math.fma %14, %5, %15 : f32
    %17 = arith.constant -0.0160960332 : f32
    %18 = math.fma %16, %5, %17 : f32
    %19 = arith.mulf %4, %18 : f32
    %20 = arith.constant -1.45660715e-05 : f32
    %21 = arith.constant -0.000213374049 : f32
    %22 = math.fma %20, %5, %21 : f32
    %23 = arith.constant -0.00168282702 : f32
    %24 = math.fma %22, %5, %23 : f32
    %25 = arith.constant -0.00737332925 : f32
    %26 = math.fma %24, %5, %25 : f32
    %27 = arith.constant -0.0142647391 : f32
    %28 = math.fma %26, %5, %27 : f32
    %29 = arith.divf %19, %28 : f32
    func.return %29 : f32
  }
}
