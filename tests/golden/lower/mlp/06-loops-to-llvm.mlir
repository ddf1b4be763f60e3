builtin.module {
  llvm.func internal @mlp(%x: !llvm.ptr, %w1: !llvm.ptr, %b1: !llvm.ptr, %w2: !llvm.ptr, %b2: !llvm.ptr, %0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
    %3 = llvm.mlir.constant(0) : i64
    %4 = llvm.getelementptr inbounds %1[%3] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k0_matmul(%4, %x, %w1) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %5 = llvm.mlir.constant(2048) : i64
    %6 = llvm.getelementptr inbounds %1[%5] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k1_map(%6, %4, %b1) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %7 = llvm.mlir.constant(0) : i64
    %8 = llvm.getelementptr inbounds %1[%7] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k2_matmul(%8, %6, %w2) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.call @k3_map(%0, %8, %b2) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @kinac_call_mlp(%9: !llvm.ptr) {
    %10 = llvm.mlir.constant(0) : i64
    %11 = llvm.getelementptr inbounds %9[%10] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %12 = llvm.load %11 : !llvm.ptr -> !llvm.ptr
    %13 = llvm.mlir.constant(1) : i64
    %14 = llvm.getelementptr inbounds %9[%13] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %15 = llvm.load %14 : !llvm.ptr -> !llvm.ptr
    %16 = llvm.mlir.constant(2) : i64
    %17 = llvm.getelementptr inbounds %9[%16] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %18 = llvm.load %17 : !llvm.ptr -> !llvm.ptr
    %19 = llvm.mlir.constant(3) : i64
    %20 = llvm.getelementptr inbounds %9[%19] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %21 = llvm.load %20 : !llvm.ptr -> !llvm.ptr
    %22 = llvm.mlir.constant(4) : i64
    %23 = llvm.getelementptr inbounds %9[%22] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %24 = llvm.load %23 : !llvm.ptr -> !llvm.ptr
    %25 = llvm.mlir.constant(5) : i64
    %26 = llvm.getelementptr inbounds %9[%25] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %27 = llvm.load %26 : !llvm.ptr -> !llvm.ptr
    %28 = llvm.mlir.constant(6) : i64
    %29 = llvm.getelementptr inbounds %9[%28] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %30 = llvm.load %29 : !llvm.ptr -> !llvm.ptr
    %31 = llvm.mlir.constant(7) : i64
    %32 = llvm.getelementptr inbounds %9[%31] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %33 = llvm.load %32 : !llvm.ptr -> !llvm.ptr
    llvm.call @mlp(%12, %15, %18, %21, %24, %27, %30, %33) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func internal @k0_matmul(%34: !llvm.ptr {llvm.noalias}, %35: !llvm.ptr {llvm.noalias}, %36: !llvm.ptr {llvm.noalias}) {
    %37 = llvm.mlir.constant(0) : i64
    %38 = llvm.getelementptr inbounds %35[%37] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %39 = llvm.getelementptr inbounds %36[%37] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %40 = llvm.getelementptr inbounds %34[%37] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %41 = llvm.mlir.constant(101 : i32) : i32
    %42 = llvm.mlir.constant(111 : i32) : i32
    %43 = llvm.mlir.constant(111 : i32) : i32
    %44 = llvm.mlir.constant(16) : i64
    %45 = llvm.mlir.constant(32) : i64
    %46 = llvm.mlir.constant(16) : i64
    %47 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %48 = llvm.mlir.constant(16) : i64
    %49 = llvm.mlir.constant(32) : i64
    %50 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %51 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%41, %42, %43, %44, %45, %46, %47, %38, %48, %39, %49, %50, %40, %51) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k1_map(%52: !llvm.ptr {llvm.noalias}, %53: !llvm.ptr {llvm.noalias}, %54: !llvm.ptr {llvm.noalias}) {
    %55 = llvm.mlir.constant(0) : i64
    %56 = llvm.mlir.constant(2) : i64
    %57 = llvm.mlir.constant(1) : i64
    %58 = llvm.mlir.constant(8) : i64
    %59 = llvm.mlir.constant(32) : i64
    %60 = llvm.mlir.constant(256) : i64
    %61 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %62 = llvm.mlir.constant(0.707106769 : f32) : f32
    %63 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    llvm.br ^bb1(%55 : i64)
  ^bb1(%64: i64):
    %65 = llvm.icmp "slt" %64, %56 : i64
    llvm.cond_br %65, ^bb2, ^bb9
  ^bb2:
    %66 = llvm.mul %64, %60 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%55 : i64)
  ^bb3(%67: i64):
    %68 = llvm.icmp "slt" %67, %58 : i64
    llvm.cond_br %68, ^bb4, ^bb8
  ^bb4:
    %69 = llvm.mul %67, %59 overflow<nsw,nuw> : i64
    %70 = llvm.add %66, %69 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%55 : i64)
  ^bb5(%71: i64):
    %72 = llvm.icmp "slt" %71, %59 : i64
    llvm.cond_br %72, ^bb6, ^bb7
  ^bb6:
    %73 = llvm.add %70, %71 overflow<nsw,nuw> : i64
    %74 = llvm.getelementptr inbounds %53[%73] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %75 = llvm.load %74 : !llvm.ptr -> f32
    %76 = llvm.getelementptr inbounds %54[%71] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %77 = llvm.load %76 : !llvm.ptr -> f32
    %78 = llvm.fadd %75, %77 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %79 = llvm.fmul %78, %61 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %80 = llvm.fmul %78, %62 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %81 = llvm.call @kinac_erff(%80) : (f32) -> f32
    %82 = llvm.fadd %63, %81 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %83 = llvm.fmul %79, %82 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %84 = llvm.getelementptr inbounds %52[%73] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %83, %84 : f32, !llvm.ptr
    %85 = llvm.add %71, %57 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%85 : i64)
  ^bb7:
    %86 = llvm.add %67, %57 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%86 : i64)
  ^bb8:
    %87 = llvm.add %64, %57 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%87 : i64)
  ^bb9:
    llvm.return
  }
  llvm.func internal @k2_matmul(%88: !llvm.ptr {llvm.noalias}, %89: !llvm.ptr {llvm.noalias}, %90: !llvm.ptr {llvm.noalias}) {
    %91 = llvm.mlir.constant(0) : i64
    %92 = llvm.getelementptr inbounds %89[%91] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %93 = llvm.getelementptr inbounds %90[%91] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %94 = llvm.getelementptr inbounds %88[%91] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %95 = llvm.mlir.constant(101 : i32) : i32
    %96 = llvm.mlir.constant(111 : i32) : i32
    %97 = llvm.mlir.constant(111 : i32) : i32
    %98 = llvm.mlir.constant(16) : i64
    %99 = llvm.mlir.constant(16) : i64
    %100 = llvm.mlir.constant(32) : i64
    %101 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %102 = llvm.mlir.constant(32) : i64
    %103 = llvm.mlir.constant(16) : i64
    %104 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %105 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%95, %96, %97, %98, %99, %100, %101, %92, %102, %93, %103, %104, %94, %105) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k3_map(%106: !llvm.ptr {llvm.noalias}, %107: !llvm.ptr {llvm.noalias}, %108: !llvm.ptr {llvm.noalias}) {
    %109 = llvm.mlir.constant(0) : i64
    %110 = llvm.mlir.constant(2) : i64
    %111 = llvm.mlir.constant(1) : i64
    %112 = llvm.mlir.constant(8) : i64
    %113 = llvm.mlir.constant(16) : i64
    %114 = llvm.mlir.constant(128) : i64
    llvm.br ^bb1(%109 : i64)
  ^bb1(%115: i64):
    %116 = llvm.icmp "slt" %115, %110 : i64
    llvm.cond_br %116, ^bb2, ^bb9
  ^bb2:
    %117 = llvm.mul %115, %114 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%109 : i64)
  ^bb3(%118: i64):
    %119 = llvm.icmp "slt" %118, %112 : i64
    llvm.cond_br %119, ^bb4, ^bb8
  ^bb4:
    %120 = llvm.mul %118, %113 overflow<nsw,nuw> : i64
    %121 = llvm.add %117, %120 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%109 : i64)
  ^bb5(%122: i64):
    %123 = llvm.icmp "slt" %122, %113 : i64
    llvm.cond_br %123, ^bb6, ^bb7
  ^bb6:
    %124 = llvm.add %121, %122 overflow<nsw,nuw> : i64
    %125 = llvm.getelementptr inbounds %107[%124] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %126 = llvm.load %125 : !llvm.ptr -> f32
    %127 = llvm.getelementptr inbounds %108[%122] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %128 = llvm.load %127 : !llvm.ptr -> f32
    %129 = llvm.fadd %126, %128 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %130 = llvm.getelementptr inbounds %106[%124] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %129, %130 : f32, !llvm.ptr
    %131 = llvm.add %122, %111 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%131 : i64)
  ^bb7:
    %132 = llvm.add %118, %111 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%132 : i64)
  ^bb8:
    %133 = llvm.add %115, %111 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%133 : i64)
  ^bb9:
    llvm.return
  }
  llvm.func internal @kinac_erff(%134: f32) -> f32 {
    %135 = llvm.mlir.constant(-4.000000e+00 : f32) : f32
    %136 = llvm.call_intrinsic "llvm.maximum.f32"(%134, %135) : (f32, f32) -> f32
    %137 = llvm.mlir.constant(4.000000e+00 : f32) : f32
    %138 = llvm.call_intrinsic "llvm.minimum.f32"(%136, %137) : (f32, f32) -> f32
    %139 = llvm.fmul %138, %138 : f32
    %140 = llvm.mlir.constant(-2.72614237e-10 : f32) : f32
    %141 = llvm.mlir.constant(2.77068146e-08 : f32) : f32
    %142 = llvm.call_intrinsic "llvm.fma.f32"(%140, %139, %141) : (f32, f32, f32) -> f32
    %143 = llvm.mlir.constant(-2.10102394e-06 : f32) : f32
    %144 = llvm.call_intrinsic "llvm.fma.f32"(%142, %139, %143) : (f32, f32, f32) -> f32
    %145 = llvm.mlir.constant(-5.69250624e-05 : f32) : f32
    %146 = llvm.call_intrinsic "llvm.fma.f32"(%144, %139, %145) : (f32, f32, f32) -> f32
    %147 = llvm.mlir.constant(-0.000734990637 : f32) : f32
    %148 = llvm.call_intrinsic "llvm.fma.f32"(%146, %139, %147) : (f32, f32, f32) -> f32
    %149 = llvm.mlir.constant(-2.954600e-03 : f32) : f32
    %150 = llvm.call_intrinsic "llvm.fma.f32"(%148, %139, %149) : (f32, f32, f32) -> f32
    %151 = llvm.mlir.constant(-0.0160960332 : f32) : f32
    %152 = llvm.call_intrinsic "llvm.fma.f32"(%150, %139, %151) : (f32, f32, f32) -> f32
    %153 = llvm.fmul %138, %152 : f32
    %154 = llvm.mlir.constant(-1.45660715e-05 : f32) : f32
    %155 = llvm.mlir.constant(-0.000213374049 : f32) : f32
    %156 = llvm.call_intrinsic "llvm.fma.f32"(%154, %139, %155) : (f32, f32, f32) -> f32
    %157 = llvm.mlir.constant(-0.00168282702 : f32) : f32
    %158 = llvm.call_intrinsic "llvm.fma.f32"(%156, %139, %157) : (f32, f32, f32) -> f32
    %159 = llvm.mlir.constant(-0.00737332925 : f32) : f32
    %160 = llvm.call_intrinsic "llvm.fma.f32"(%158, %139, %159) : (f32, f32, f32) -> f32
    %161 = llvm.mlir.constant(-0.0142647391 : f32) : f32
    %162 = llvm.call_intrinsic "llvm.fma.f32"(%160, %139, %161) : (f32, f32, f32) -> f32
    %163 = llvm.fdiv %153, %162 : f32
    llvm.return %163 : f32
  }
  llvm.func @kinac_sgemm(i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64)
}
