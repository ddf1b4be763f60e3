builtin.module {
  func.func @attention(%x: memref<512xf32>, %wq: memref<1024xf32>, %wk: memref<512xf32>, %wv: memref<512xf32>, %wo: memref<1024xf32>, %0: memref<512xf32>, %1: memref<6144xi8>, %2: memref<8xi64>) attributes {kinac.entry, kinac.arena_bytes = 6144 : i64} {
    %3 = arith.constant 0 : index
    %4 = memref.view %1[%3][] : memref<6144xi8> to memref<512xf32>
    func.call @k0_matmul(%4, %x, %wq) {kind = "matmul", impl = "blas"} : (memref<512xf32>, memref<512xf32>, memref<1024xf32>) -> ()
    %5 = arith.constant 2048 : index
    %6 = memref.view %1[%5][] : memref<6144xi8> to memref<256xf32>
    func.call @k1_matmul(%6, %x, %wk) {kind = "matmul", impl = "blas"} : (memref<256xf32>, memref<512xf32>, memref<512xf32>) -> ()
    %7 = arith.constant 3072 : index
    %8 = memref.view %1[%7][] : memref<6144xi8> to memref<256xf32>
    func.call @k2_matmul(%8, %x, %wv) {kind = "matmul", impl = "blas"} : (memref<256xf32>, memref<512xf32>, memref<512xf32>) -> ()
    %9 = arith.constant 4096 : index
    %10 = memref.view %1[%9][] : memref<6144xi8> to memref<512xf32>
    func.call @k3_matmul(%10, %6, %4) {kind = "matmul", impl = "blas"} : (memref<512xf32>, memref<256xf32>, memref<512xf32>) -> ()
    %11 = arith.constant 0 : index
    %12 = memref.view %1[%11][] : memref<6144xi8> to memref<512xf32>
    func.call @k4_softmax(%12, %10) {kind = "softmax", impl = "loops"} : (memref<512xf32>, memref<512xf32>) -> ()
    %13 = arith.constant 4096 : index
    %14 = memref.view %1[%13][] : memref<6144xi8> to memref<512xf32>
    func.call @k5_matmul(%14, %12, %8) {kind = "matmul", impl = "blas"} : (memref<512xf32>, memref<512xf32>, memref<256xf32>) -> ()
    func.call @k7_matmul(%0, %14, %wo) {kind = "matmul", impl = "blas"} : (memref<512xf32>, memref<512xf32>, memref<1024xf32>) -> ()
    func.return
  }
  func.func private @k0_matmul(%0: memref<512xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<1024xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    kbuf.gemm %1[%3], %2[%3], %0[%3] {m = 16 : i64, n = 32 : i64, k = 32 : i64, lda = 32 : i64, ldb = 32 : i64, ldc = 32 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<512xf32>, memref<1024xf32>, memref<512xf32>
    func.return
  }
  func.func private @k1_matmul(%0: memref<256xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<512xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    kbuf.gemm %1[%3], %2[%3], %0[%3] {m = 16 : i64, n = 16 : i64, k = 32 : i64, lda = 32 : i64, ldb = 16 : i64, ldc = 16 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<512xf32>, memref<512xf32>, memref<256xf32>
    func.return
  }
  func.func private @k2_matmul(%0: memref<256xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<512xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    kbuf.gemm %1[%3], %2[%3], %0[%3] {m = 16 : i64, n = 16 : i64, k = 32 : i64, lda = 32 : i64, ldb = 16 : i64, ldc = 16 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<512xf32>, memref<512xf32>, memref<256xf32>
    func.return
  }
  func.func private @k3_matmul(%0: memref<512xf32> {llvm.noalias}, %1: memref<256xf32> {llvm.noalias}, %2: memref<512xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    %4 = arith.constant 2 : index
    %5 = arith.constant 1 : index
    %6 = arith.constant 16 : index
    %7 = arith.constant 256 : index
    scf.for %8 = %3 to %4 step %5 {
      %9 = arith.muli %8, %6 : index
      %10 = arith.muli %8, %7 : index
      kbuf.gemm %2[%9], %1[%3], %0[%10] {m = 16 : i64, n = 16 : i64, k = 16 : i64, lda = 32 : i64, ldb = 16 : i64, ldc = 16 : i64, trans_a = 0 : i64, trans_b = 1 : i64} : memref<512xf32>, memref<256xf32>, memref<512xf32>
    }
    func.return
  }
  func.func private @k4_softmax(%0: memref<512xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}) {
    %2 = arith.constant 0 : index
    %3 = arith.constant 2 : index
    %4 = arith.constant 1 : index
    %5 = arith.constant 16 : index
    %6 = arith.constant 0xff800000 : f32
    %7 = arith.constant 256 : index
    %8 = arith.constant 1.600000e+01 : f32
    %9 = math.sqrt %8 : f32
    %10 = arith.constant 1.000000e+00 : f32
    %11 = arith.divf %10, %9 fastmath<contract> : f32
    %12 = arith.constant 0.000000e+00 : f32
    scf.for %13 = %2 to %3 step %4 {
      %14 = arith.muli %13, %7 : index
      scf.for %15 = %2 to %5 step %4 {
        %16 = arith.addi %15, %5 : index
        %17 = arith.divui %16, %5 : index
        %18 = arith.muli %17, %5 : index
        %19 = arith.muli %15, %5 : index
        %20 = arith.addi %14, %19 : index
        %21 = arith.index_cast %15 : index to i64
        %22 = arith.trunci %21 : i64 to i32
        %23 = scf.for %24 = %2 to %18 step %4 iter_args(%25 = %6) -> (f32) {
          %26 = arith.addi %20, %24 : index
          %27 = memref.load %1[%26] : memref<512xf32>
          %28 = arith.mulf %27, %11 fastmath<contract> : f32
          %29 = arith.index_cast %24 : index to i64
          %30 = arith.trunci %29 : i64 to i32
          %31 = arith.cmpi sge, %22, %30 : i32
          %32 = arith.select %31, %12, %6 : f32
          %33 = arith.addf %28, %32 fastmath<contract> : f32
          memref.store %33, %0[%26] : memref<512xf32>
          %34 = arith.maximumf %25, %33 : f32
          scf.yield %34 : f32
        }
        %35 = scf.for %36 = %2 to %18 step %4 iter_args(%37 = %12) -> (f32) {
          %38 = arith.addi %20, %36 : index
          %39 = memref.load %0[%38] : memref<512xf32>
          %40 = arith.subf %39, %23 fastmath<contract> : f32
          %41 = func.call @kinac_expf(%40) : (f32) -> f32
          memref.store %41, %0[%38] : memref<512xf32>
          %42 = arith.addf %37, %41 fastmath<reassoc,contract> : f32
          scf.yield %42 : f32
        }
        %43 = arith.divf %10, %35 fastmath<contract> : f32
        scf.for %44 = %2 to %18 step %4 {
          %45 = arith.addi %20, %44 : index
          %46 = memref.load %0[%45] : memref<512xf32>
          %47 = arith.mulf %46, %43 fastmath<contract> : f32
          memref.store %47, %0[%45] : memref<512xf32>
        }
        %48 = arith.mulf %12, %43 fastmath<contract> : f32
        scf.for %49 = %18 to %5 step %4 {
          %50 = arith.addi %20, %49 : index
          memref.store %48, %0[%50] : memref<512xf32>
        }
      }
    }
    func.return
  }
  func.func private @k5_matmul(%0: memref<512xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<256xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    %4 = arith.constant 2 : index
    %5 = arith.constant 1 : index
    %6 = arith.constant 256 : index
    %7 = arith.constant 16 : index
    scf.for %8 = %3 to %4 step %5 {
      %9 = arith.muli %8, %6 : index
      %10 = arith.muli %8, %7 : index
      kbuf.gemm %1[%9], %2[%3], %0[%10] {m = 16 : i64, n = 16 : i64, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldc = 32 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<512xf32>, memref<256xf32>, memref<512xf32>
    }
    func.return
  }
  func.func private @k7_matmul(%0: memref<512xf32> {llvm.noalias}, %1: memref<512xf32> {llvm.noalias}, %2: memref<1024xf32> {llvm.noalias}) {
    %3 = arith.constant 0 : index
    kbuf.gemm %1[%3], %2[%3], %0[%3] {m = 16 : i64, n = 32 : i64, k = 32 : i64, lda = 32 : i64, ldb = 32 : i64, ldc = 32 : i64, trans_a = 0 : i64, trans_b = 0 : i64} : memref<512xf32>, memref<1024xf32>, memref<512xf32>
    func.return
  }
  func.func private @kinac_expf(%0: f32) -> f32 {
    %1 = arith.constant -1.040000e+02 : f32
    %2 = arith.constant 8.875000e+01 : f32
    %3 = arith.maximumf %0, %1 : f32
    %4 = arith.minimumf %3, %2 : f32
    %5 = arith.constant 1.44269502 : f32
    %6 = arith.constant 5.000000e-01 : f32
    %7 = math.fma %4, %5, %6 : f32
    %8 = math.floor %7 : f32
    %9 = arith.constant -0.693359375 : f32
    %10 = math.fma %8, %9, %4 : f32
    %11 = arith.constant 0.000212194442 : f32
    %12 = math.fma %8, %11, %10 : f32
    %13 = arith.constant 0.000198756912 : f32
    %14 = arith.constant 0.00139819994 : f32
    %15 = math.fma %13, %12, %14 : f32
    %16 = arith.constant 0.00833345205 : f32
    %17 = math.fma %15, %12, %16 : f32
    %18 = arith.constant 0.0416657962 : f32
    %19 = math.fma %17, %12, %18 : f32
    %20 = arith.constant 0.166666657 : f32
    %21 = math.fma %19, %12, %20 : f32
    %22 = arith.constant 5.000000e-01 : f32
    %23 = math.fma %21, %12, %22 : f32
    %24 = arith.mulf %12, %12 : f32
    %25 = math.fma %23, %24, %12 : f32
    %26 = arith.constant 1.000000e+00 : f32
    %27 = arith.addf %25, %26 : f32
    %28 = arith.constant -1.250000e+02 : f32
    %29 = arith.cmpf olt, %8, %28 : f32
    %30 = arith.constant 6.400000e+01 : f32
    %31 = arith.constant 0.000000e+00 : f32
    %32 = arith.select %29, %30, %31 : f32
    %33 = arith.addf %8, %32 : f32
    %34 = arith.constant 0x4B00007E : f32
    %35 = arith.addf %33, %34 : f32
    %36 = arith.bitcast %35 : f32 to i32
    %37 = arith.constant 23 : i32
    %38 = arith.shli %36, %37 : i32
    %39 = arith.bitcast %38 : i32 to f32
    %40 = arith.mulf %27, %39 : f32
    %41 = arith.constant 1.08420217e-19 : f32
    %42 = arith.constant 2.000000e+00 : f32
    %43 = arith.select %29, %41, %42 : f32
    %44 = arith.mulf %40, %43 : f32
    %45 = arith.cmpf olt, %0, %1 : f32
    %46 = arith.constant 0.000000e+00 : f32
    %47 = arith.select %45, %46, %44 : f32
    %48 = arith.cmpf ogt, %0, %2 : f32
    %49 = arith.constant 0x7f800000 : f32
    %50 = arith.select %48, %49, %47 : f32
    func.return %50 : f32
  }
}
