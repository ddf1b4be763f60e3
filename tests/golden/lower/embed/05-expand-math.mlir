builtin.module {
  func.func @embed(%table: memref<40xi16>, %ids: memref<6xi32>, %0: memref<6xf32>, %1: memref<192xi8>, %2: memref<8xi64>) attributes {kinac.entry, kinac.arena_bytes = 192 : i64} {
    %3 = arith.constant 0 : index
    %4 = memref.view %1[%3][] : memref<192xi8> to memref<24xi16>
    func.call @k0_gather(%4, %table, %ids, %2) {kind = "gather", impl = "loops"} : (memref<24xi16>, memref<40xi16>, memref<6xi32>, memref<8xi64>) -> ()
    %5 = arith.constant 64 : index
    %6 = memref.view %1[%5][] : memref<192xi8> to memref<48xi16>
    func.call @k1_concat(%6, %4) {kind = "concat", impl = "loops"} : (memref<48xi16>, memref<24xi16>) -> ()
    %7 = arith.constant 0 : index
    %8 = memref.view %1[%7][] : memref<192xi8> to memref<6xf32>
    func.call @k2_reduce(%8, %6) {kind = "reduce", impl = "loops"} : (memref<6xf32>, memref<48xi16>) -> ()
    func.call @k3_map(%0, %8) {kind = "map", impl = "loops"} : (memref<6xf32>, memref<6xf32>) -> ()
    func.return
  }
  func.func private @k0_gather(%0: memref<24xi16> {llvm.noalias}, %1: memref<40xi16> {llvm.noalias}, %2: memref<6xi32> {llvm.noalias}, %3: memref<8xi64> {llvm.noalias}) {
    %4 = arith.constant 0 : index
    %5 = arith.constant 2 : index
    %6 = arith.constant 1 : index
    %7 = arith.constant 3 : index
    %8 = arith.constant 0 : i32
    %9 = arith.constant 10 : i32
    %10 = arith.constant 1 : i64
    %11 = arith.constant 0 : i64
    %12 = arith.constant 10 : i64
    %13 = arith.constant 4 : index
    %14 = arith.constant 16 : i32
    %15 = arith.constant 12 : index
    scf.for %16 = %4 to %5 step %6 {
      %17 = arith.muli %16, %7 : index
      %18 = arith.muli %16, %15 : index
      scf.for %19 = %4 to %7 step %6 {
        %20 = arith.addi %17, %19 : index
        %21 = memref.load %2[%20] : memref<6xi32>
        %22 = arith.cmpi slt, %21, %8 : i32
        %23 = arith.cmpi sge, %21, %9 : i32
        %24 = arith.ori %22, %23 : i1
        %25 = arith.extsi %21 : i32 to i64
        %26 = arith.index_cast %20 : index to i64
        scf.if %24 {
          memref.store %10, %3[%4] : memref<8xi64>
          memref.store %11, %3[%6] : memref<8xi64>
          memref.store %26, %3[%5] : memref<8xi64>
          memref.store %25, %3[%7] : memref<8xi64>
          memref.store %12, %3[%13] : memref<8xi64>
        }
        %27 = arith.select %24, %8, %21 : i32
        %28 = arith.index_cast %27 : i32 to index
        %29 = arith.muli %28, %13 : index
        %30 = arith.muli %19, %13 : index
        %31 = arith.addi %18, %30 : index
        scf.for %32 = %4 to %13 step %6 {
          %33 = arith.addi %29, %32 : index
          %34 = memref.load %1[%33] : memref<40xi16>
          %35 = arith.extui %34 : i16 to i32
          %36 = arith.shli %35, %14 : i32
          %37 = arith.bitcast %36 : i32 to f32
          %38 = arith.addi %31, %32 : index
          %39 = arith.bitcast %37 : f32 to i32
          %40 = arith.shrui %39, %14 : i32
          %41 = arith.trunci %40 : i32 to i16
          memref.store %41, %0[%38] : memref<24xi16>
        }
      }
    }
    func.return
  }
  func.func private @k1_concat(%0: memref<48xi16> {llvm.noalias}, %1: memref<24xi16> {llvm.noalias}) {
    %2 = arith.constant 0 : index
    %3 = arith.constant 2 : index
    %4 = arith.constant 1 : index
    %5 = arith.constant 3 : index
    %6 = arith.constant 4 : index
    %7 = arith.constant 12 : index
    %8 = arith.constant 16 : i32
    %9 = arith.constant 24 : index
    %10 = arith.constant 8 : index
    scf.for %11 = %2 to %3 step %4 {
      %12 = arith.muli %11, %7 : index
      %13 = arith.muli %11, %9 : index
      scf.for %14 = %2 to %5 step %4 {
        %15 = arith.muli %14, %6 : index
        %16 = arith.addi %12, %15 : index
        %17 = arith.muli %14, %10 : index
        %18 = arith.addi %13, %17 : index
        scf.for %19 = %2 to %6 step %4 {
          %20 = arith.addi %16, %19 : index
          %21 = memref.load %1[%20] : memref<24xi16>
          %22 = arith.extui %21 : i16 to i32
          %23 = arith.shli %22, %8 : i32
          %24 = arith.bitcast %23 : i32 to f32
          %25 = arith.addi %18, %19 : index
          %26 = arith.bitcast %24 : f32 to i32
          %27 = arith.shrui %26, %8 : i32
          %28 = arith.trunci %27 : i32 to i16
          memref.store %28, %0[%25] : memref<48xi16>
        }
      }
    }
    %29 = arith.constant 1 : i32
    %30 = arith.constant 32767 : i32
    %31 = arith.constant -65536 : i32
    %32 = arith.constant 0x7fc00000 : f32
    scf.for %33 = %2 to %3 step %4 {
      %34 = arith.muli %33, %7 : index
      %35 = arith.muli %33, %9 : index
      scf.for %36 = %2 to %5 step %4 {
        %37 = arith.muli %36, %6 : index
        %38 = arith.addi %34, %37 : index
        %39 = arith.muli %36, %10 : index
        %40 = arith.addi %35, %39 : index
        scf.for %41 = %2 to %6 step %4 {
          %42 = arith.addi %41, %6 : index
          %43 = arith.addi %38, %41 : index
          %44 = memref.load %1[%43] : memref<24xi16>
          %45 = arith.extui %44 : i16 to i32
          %46 = arith.shli %45, %8 : i32
          %47 = arith.bitcast %46 : i32 to f32
          %48 = arith.negf %47 : f32
          %49 = arith.bitcast %48 : f32 to i32
          %50 = arith.shrui %49, %8 : i32
          %51 = arith.andi %50, %29 : i32
          %52 = arith.addi %49, %30 : i32
          %53 = arith.addi %52, %51 : i32
          %54 = arith.andi %53, %31 : i32
          %55 = arith.bitcast %54 : i32 to f32
          %56 = arith.cmpf uno, %48, %48 : f32
          %57 = arith.select %56, %32, %55 : f32
          %58 = arith.addi %40, %42 : index
          %59 = arith.bitcast %57 : f32 to i32
          %60 = arith.shrui %59, %8 : i32
          %61 = arith.trunci %60 : i32 to i16
          memref.store %61, %0[%58] : memref<48xi16>
        }
      }
    }
    func.return
  }
  func.func private @k2_reduce(%0: memref<6xf32> {llvm.noalias}, %1: memref<48xi16> {llvm.noalias}) {
    %2 = arith.constant 0 : index
    %3 = arith.constant 2 : index
    %4 = arith.constant 1 : index
    %5 = arith.constant 3 : index
    %6 = arith.constant 0.000000e+00 : f32
    %7 = arith.constant 8 : index
    %8 = arith.constant 24 : index
    %9 = arith.constant 16 : i32
    %10 = arith.constant 1 : i32
    %11 = arith.constant 32767 : i32
    %12 = arith.constant -65536 : i32
    %13 = arith.constant 0x7fc00000 : f32
    %14 = arith.constant 8.000000e+00 : f32
    scf.for %15 = %2 to %3 step %4 {
      %16 = arith.muli %15, %8 : index
      %17 = arith.muli %15, %5 : index
      scf.for %18 = %2 to %5 step %4 {
        %19 = arith.muli %18, %7 : index
        %20 = arith.addi %16, %19 : index
        %21 = scf.for %22 = %2 to %7 step %4 iter_args(%23 = %6) -> (f32) {
          %24 = arith.addi %20, %22 : index
          %25 = memref.load %1[%24] : memref<48xi16>
          %26 = arith.extui %25 : i16 to i32
          %27 = arith.shli %26, %9 : i32
          %28 = arith.bitcast %27 : i32 to f32
          %29 = func.call @kinac_expf(%28) : (f32) -> f32
          %30 = arith.bitcast %29 : f32 to i32
          %31 = arith.shrui %30, %9 : i32
          %32 = arith.andi %31, %10 : i32
          %33 = arith.addi %30, %11 : i32
          %34 = arith.addi %33, %32 : i32
          %35 = arith.andi %34, %12 : i32
          %36 = arith.bitcast %35 : i32 to f32
          %37 = arith.cmpf uno, %29, %29 : f32
          %38 = arith.select %37, %13, %36 : f32
          %39 = arith.addf %23, %38 fastmath<reassoc,contract> : f32
          scf.yield %39 : f32
        }
        %40 = arith.divf %21, %14 fastmath<contract> : f32
        %41 = arith.addi %17, %18 : index
        memref.store %40, %0[%41] : memref<6xf32>
      }
    }
    func.return
  }
  func.func private @k3_map(%0: memref<6xf32> {llvm.noalias}, %1: memref<6xf32> {llvm.noalias}) {
    %2 = arith.constant 0 : index
    %3 = arith.constant 2 : index
    %4 = arith.constant 1 : index
    %5 = arith.constant 3 : index
    %6 = arith.constant 16 : i32
    %7 = arith.constant 1 : i32
    %8 = arith.constant 32767 : i32
    %9 = arith.constant -65536 : i32
    %10 = arith.constant 0x7fc00000 : f32
    scf.for %11 = %2 to %3 step %4 {
      %12 = arith.muli %11, %5 : index
      scf.for %13 = %2 to %5 step %4 {
        %14 = arith.addi %12, %13 : index
        %15 = memref.load %1[%14] : memref<6xf32>
        %16 = arith.bitcast %15 : f32 to i32
        %17 = arith.shrui %16, %6 : i32
        %18 = arith.andi %17, %7 : i32
        %19 = arith.addi %16, %8 : i32
        %20 = arith.addi %19, %18 : i32
        %21 = arith.andi %20, %9 : i32
        %22 = arith.bitcast %21 : i32 to f32
        %23 = arith.cmpf uno, %15, %15 : f32
        %24 = arith.select %23, %10, %22 : f32
        memref.store %24, %0[%14] : memref<6xf32>
      }
    }
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
