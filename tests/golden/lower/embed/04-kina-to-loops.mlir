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
    %29 = arith.constant 1.000000e+00 : f32
    %30 = arith.constant 1 : i32
    %31 = arith.constant 32767 : i32
    %32 = arith.constant -65536 : i32
    %33 = arith.constant 0x7fc00000 : f32
    scf.for %34 = %2 to %3 step %4 {
      %35 = arith.muli %34, %7 : index
      %36 = arith.muli %34, %9 : index
      scf.for %37 = %2 to %5 step %4 {
        %38 = arith.muli %37, %6 : index
        %39 = arith.addi %35, %38 : index
        %40 = arith.muli %37, %10 : index
        %41 = arith.addi %36, %40 : index
        scf.for %42 = %2 to %6 step %4 {
          %43 = arith.addi %42, %6 : index
          %44 = arith.addi %39, %42 : index
          %45 = memref.load %1[%44] : memref<24xi16>
          %46 = arith.extui %45 : i16 to i32
          %47 = arith.shli %46, %8 : i32
          %48 = arith.bitcast %47 : i32 to f32
          %49 = arith.negf %48 : f32
          %50 = arith.bitcast %49 : f32 to i32
          %51 = arith.shrui %50, %8 : i32
          %52 = arith.andi %51, %30 : i32
          %53 = arith.addi %50, %31 : i32
          %54 = arith.addi %53, %52 : i32
          %55 = arith.andi %54, %32 : i32
          %56 = arith.bitcast %55 : i32 to f32
          %57 = arith.cmpf uno, %49, %49 : f32
          %58 = arith.select %57, %33, %56 : f32
          %59 = arith.addi %41, %43 : index
          %60 = arith.bitcast %58 : f32 to i32
          %61 = arith.shrui %60, %8 : i32
          %62 = arith.trunci %61 : i32 to i16
          memref.store %62, %0[%59] : memref<48xi16>
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
    %10 = arith.constant 1.000000e+00 : f32
    %11 = arith.constant 1 : i32
    %12 = arith.constant 32767 : i32
    %13 = arith.constant -65536 : i32
    %14 = arith.constant 0x7fc00000 : f32
    %15 = arith.constant 8.000000e+00 : f32
    scf.for %16 = %2 to %3 step %4 {
      %17 = arith.muli %16, %8 : index
      %18 = arith.muli %16, %5 : index
      scf.for %19 = %2 to %5 step %4 {
        %20 = arith.muli %19, %7 : index
        %21 = arith.addi %17, %20 : index
        %22 = scf.for %23 = %2 to %7 step %4 iter_args(%24 = %6) -> (f32) {
          %25 = arith.addi %21, %23 : index
          %26 = memref.load %1[%25] : memref<48xi16>
          %27 = arith.extui %26 : i16 to i32
          %28 = arith.shli %27, %9 : i32
          %29 = arith.bitcast %28 : i32 to f32
          %30 = math.exp %29 : f32
          %31 = arith.bitcast %30 : f32 to i32
          %32 = arith.shrui %31, %9 : i32
          %33 = arith.andi %32, %11 : i32
          %34 = arith.addi %31, %12 : i32
          %35 = arith.addi %34, %33 : i32
          %36 = arith.andi %35, %13 : i32
          %37 = arith.bitcast %36 : i32 to f32
          %38 = arith.cmpf uno, %30, %30 : f32
          %39 = arith.select %38, %14, %37 : f32
          %40 = arith.addf %24, %39 fastmath<reassoc,contract> : f32
          scf.yield %40 : f32
        }
        %41 = arith.divf %22, %15 fastmath<contract> : f32
        %42 = arith.addi %18, %19 : index
        memref.store %41, %0[%42] : memref<6xf32>
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
}
