builtin.module {
  llvm.func internal @sin_f64(%x: !llvm.ptr, %0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
    llvm.call @k0_map(%0, %x) : (!llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @kinac_call_sin_f64(%3: !llvm.ptr) {
    %4 = llvm.mlir.constant(0) : i64
    %5 = llvm.getelementptr inbounds %3[%4] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %6 = llvm.load %5 : !llvm.ptr -> !llvm.ptr
    %7 = llvm.mlir.constant(1) : i64
    %8 = llvm.getelementptr inbounds %3[%7] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %9 = llvm.load %8 : !llvm.ptr -> !llvm.ptr
    %10 = llvm.mlir.constant(2) : i64
    %11 = llvm.getelementptr inbounds %3[%10] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %12 = llvm.load %11 : !llvm.ptr -> !llvm.ptr
    %13 = llvm.mlir.constant(3) : i64
    %14 = llvm.getelementptr inbounds %3[%13] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %15 = llvm.load %14 : !llvm.ptr -> !llvm.ptr
    llvm.call @sin_f64(%6, %9, %12, %15) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func internal @k0_map(%16: !llvm.ptr {llvm.noalias}, %17: !llvm.ptr {llvm.noalias}) {
    %18 = llvm.mlir.constant(0) : i64
    %19 = llvm.mlir.constant(8) : i64
    %20 = llvm.mlir.constant(1) : i64
    llvm.br ^bb1(%18 : i64)
  ^bb1(%21: i64):
    %22 = llvm.icmp "slt" %21, %19 : i64
    llvm.cond_br %22, ^bb2, ^bb3
  ^bb2:
    %23 = llvm.getelementptr inbounds %17[%21] : (!llvm.ptr, i64) -> !llvm.ptr, f64
    %24 = llvm.load %23 : !llvm.ptr -> f64
    %25 = llvm.call @sin(%24) : (f64) -> f64
    %26 = llvm.getelementptr inbounds %16[%21] : (!llvm.ptr, i64) -> !llvm.ptr, f64
    llvm.store %25, %26 : f64, !llvm.ptr
    %27 = llvm.add %21, %20 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%27 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func @sin(f64) -> f64
}
