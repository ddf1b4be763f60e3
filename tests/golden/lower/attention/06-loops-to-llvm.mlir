builtin.module {
  llvm.func internal @attention(%x: !llvm.ptr, %wq: !llvm.ptr, %wk: !llvm.ptr, %wv: !llvm.ptr, %wo: !llvm.ptr, %0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
    %3 = llvm.mlir.constant(0) : i64
    %4 = llvm.getelementptr inbounds %1[%3] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k0_matmul(%4, %x, %wq) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %5 = llvm.mlir.constant(2048) : i64
    %6 = llvm.getelementptr inbounds %1[%5] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k1_matmul(%6, %x, %wk) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %7 = llvm.mlir.constant(3072) : i64
    %8 = llvm.getelementptr inbounds %1[%7] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k2_matmul(%8, %x, %wv) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %9 = llvm.mlir.constant(4096) : i64
    %10 = llvm.getelementptr inbounds %1[%9] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k3_matmul(%10, %6, %4) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %11 = llvm.mlir.constant(0) : i64
    %12 = llvm.getelementptr inbounds %1[%11] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k4_softmax(%12, %10) : (!llvm.ptr, !llvm.ptr) -> ()
    %13 = llvm.mlir.constant(4096) : i64
    %14 = llvm.getelementptr inbounds %1[%13] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k5_matmul(%14, %12, %8) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.call @k7_matmul(%0, %14, %wo) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @kinac_call_attention(%15: !llvm.ptr) {
    %16 = llvm.mlir.constant(0) : i64
    %17 = llvm.getelementptr inbounds %15[%16] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %18 = llvm.load %17 : !llvm.ptr -> !llvm.ptr
    %19 = llvm.mlir.constant(1) : i64
    %20 = llvm.getelementptr inbounds %15[%19] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %21 = llvm.load %20 : !llvm.ptr -> !llvm.ptr
    %22 = llvm.mlir.constant(2) : i64
    %23 = llvm.getelementptr inbounds %15[%22] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %24 = llvm.load %23 : !llvm.ptr -> !llvm.ptr
    %25 = llvm.mlir.constant(3) : i64
    %26 = llvm.getelementptr inbounds %15[%25] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %27 = llvm.load %26 : !llvm.ptr -> !llvm.ptr
    %28 = llvm.mlir.constant(4) : i64
    %29 = llvm.getelementptr inbounds %15[%28] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %30 = llvm.load %29 : !llvm.ptr -> !llvm.ptr
    %31 = llvm.mlir.constant(5) : i64
    %32 = llvm.getelementptr inbounds %15[%31] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %33 = llvm.load %32 : !llvm.ptr -> !llvm.ptr
    %34 = llvm.mlir.constant(6) : i64
    %35 = llvm.getelementptr inbounds %15[%34] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %36 = llvm.load %35 : !llvm.ptr -> !llvm.ptr
    %37 = llvm.mlir.constant(7) : i64
    %38 = llvm.getelementptr inbounds %15[%37] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %39 = llvm.load %38 : !llvm.ptr -> !llvm.ptr
    llvm.call @attention(%18, %21, %24, %27, %30, %33, %36, %39) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func internal @k0_matmul(%40: !llvm.ptr {llvm.noalias}, %41: !llvm.ptr {llvm.noalias}, %42: !llvm.ptr {llvm.noalias}) {
    %43 = llvm.mlir.constant(0) : i64
    %44 = llvm.getelementptr inbounds %41[%43] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %45 = llvm.getelementptr inbounds %42[%43] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %46 = llvm.getelementptr inbounds %40[%43] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %47 = llvm.mlir.constant(101 : i32) : i32
    %48 = llvm.mlir.constant(111 : i32) : i32
    %49 = llvm.mlir.constant(111 : i32) : i32
    %50 = llvm.mlir.constant(16) : i64
    %51 = llvm.mlir.constant(32) : i64
    %52 = llvm.mlir.constant(32) : i64
    %53 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %54 = llvm.mlir.constant(32) : i64
    %55 = llvm.mlir.constant(32) : i64
    %56 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %57 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%47, %48, %49, %50, %51, %52, %53, %44, %54, %45, %55, %56, %46, %57) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k1_matmul(%58: !llvm.ptr {llvm.noalias}, %59: !llvm.ptr {llvm.noalias}, %60: !llvm.ptr {llvm.noalias}) {
    %61 = llvm.mlir.constant(0) : i64
    %62 = llvm.getelementptr inbounds %59[%61] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %63 = llvm.getelementptr inbounds %60[%61] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %64 = llvm.getelementptr inbounds %58[%61] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %65 = llvm.mlir.constant(101 : i32) : i32
    %66 = llvm.mlir.constant(111 : i32) : i32
    %67 = llvm.mlir.constant(111 : i32) : i32
    %68 = llvm.mlir.constant(16) : i64
    %69 = llvm.mlir.constant(16) : i64
    %70 = llvm.mlir.constant(32) : i64
    %71 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %72 = llvm.mlir.constant(32) : i64
    %73 = llvm.mlir.constant(16) : i64
    %74 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %75 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%65, %66, %67, %68, %69, %70, %71, %62, %72, %63, %73, %74, %64, %75) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k2_matmul(%76: !llvm.ptr {llvm.noalias}, %77: !llvm.ptr {llvm.noalias}, %78: !llvm.ptr {llvm.noalias}) {
    %79 = llvm.mlir.constant(0) : i64
    %80 = llvm.getelementptr inbounds %77[%79] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %81 = llvm.getelementptr inbounds %78[%79] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %82 = llvm.getelementptr inbounds %76[%79] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %83 = llvm.mlir.constant(101 : i32) : i32
    %84 = llvm.mlir.constant(111 : i32) : i32
    %85 = llvm.mlir.constant(111 : i32) : i32
    %86 = llvm.mlir.constant(16) : i64
    %87 = llvm.mlir.constant(16) : i64
    %88 = llvm.mlir.constant(32) : i64
    %89 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %90 = llvm.mlir.constant(32) : i64
    %91 = llvm.mlir.constant(16) : i64
    %92 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %93 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%83, %84, %85, %86, %87, %88, %89, %80, %90, %81, %91, %92, %82, %93) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k3_matmul(%94: !llvm.ptr {llvm.noalias}, %95: !llvm.ptr {llvm.noalias}, %96: !llvm.ptr {llvm.noalias}) {
    %97 = llvm.mlir.constant(0) : i64
    %98 = llvm.mlir.constant(2) : i64
    %99 = llvm.mlir.constant(1) : i64
    %100 = llvm.mlir.constant(16) : i64
    %101 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%97 : i64)
  ^bb1(%102: i64):
    %103 = llvm.icmp "slt" %102, %98 : i64
    llvm.cond_br %103, ^bb2, ^bb3
  ^bb2:
    %104 = llvm.mul %102, %100 overflow<nsw,nuw> : i64
    %105 = llvm.mul %102, %101 overflow<nsw,nuw> : i64
    %106 = llvm.getelementptr inbounds %96[%104] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %107 = llvm.getelementptr inbounds %95[%97] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %108 = llvm.getelementptr inbounds %94[%105] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %109 = llvm.mlir.constant(101 : i32) : i32
    %110 = llvm.mlir.constant(111 : i32) : i32
    %111 = llvm.mlir.constant(112 : i32) : i32
    %112 = llvm.mlir.constant(16) : i64
    %113 = llvm.mlir.constant(16) : i64
    %114 = llvm.mlir.constant(16) : i64
    %115 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %116 = llvm.mlir.constant(32) : i64
    %117 = llvm.mlir.constant(16) : i64
    %118 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %119 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%109, %110, %111, %112, %113, %114, %115, %106, %116, %107, %117, %118, %108, %119) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    %120 = llvm.add %102, %99 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%120 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func internal @k4_softmax(%121: !llvm.ptr {llvm.noalias}, %122: !llvm.ptr {llvm.noalias}) {
    %123 = llvm.mlir.constant(0) : i64
    %124 = llvm.mlir.constant(2) : i64
    %125 = llvm.mlir.constant(1) : i64
    %126 = llvm.mlir.constant(16) : i64
    %127 = llvm.mlir.constant(0xff800000 : f32) : f32
    %128 = llvm.mlir.constant(256) : i64
    %129 = llvm.mlir.constant(1.600000e+01 : f32) : f32
    %130 = llvm.call_intrinsic "llvm.sqrt.f32"(%129) : (f32) -> f32
    %131 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %132 = llvm.fdiv %131, %130 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %133 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    llvm.br ^bb1(%123 : i64)
  ^bb1(%134: i64):
    %135 = llvm.icmp "slt" %134, %124 : i64
    llvm.cond_br %135, ^bb2, ^bb18
  ^bb2:
    %136 = llvm.mul %134, %128 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%123 : i64)
  ^bb3(%137: i64):
    %138 = llvm.icmp "slt" %137, %126 : i64
    llvm.cond_br %138, ^bb4, ^bb17
  ^bb4:
    %139 = llvm.add %137, %126 overflow<nsw,nuw> : i64
    %140 = llvm.udiv %139, %126 : i64
    %141 = llvm.mul %140, %126 overflow<nsw,nuw> : i64
    %142 = llvm.mul %137, %126 overflow<nsw,nuw> : i64
    %143 = llvm.add %136, %142 overflow<nsw,nuw> : i64
    %144 = llvm.trunc %137 : i64 to i32
    llvm.br ^bb5(%123, %127 : i64, f32)
  ^bb5(%145: i64, %146: f32):
    %147 = llvm.icmp "slt" %145, %141 : i64
    llvm.cond_br %147, ^bb6, ^bb7
  ^bb6:
    %148 = llvm.add %143, %145 overflow<nsw,nuw> : i64
    %149 = llvm.getelementptr inbounds %122[%148] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %150 = llvm.load %149 : !llvm.ptr -> f32
    %151 = llvm.fmul %150, %132 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %152 = llvm.trunc %145 : i64 to i32
    %153 = llvm.icmp "sge" %144, %152 : i32
    %154 = llvm.select %153, %133, %127 : i1, f32
    %155 = llvm.fadd %151, %154 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %156 = llvm.getelementptr inbounds %121[%148] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %155, %156 : f32, !llvm.ptr
    %157 = llvm.call_intrinsic "llvm.maximum.f32"(%146, %155) : (f32, f32) -> f32
    %158 = llvm.add %145, %125 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%158, %157 : i64, f32)
  ^bb7:
    llvm.br ^bb8(%123, %133 : i64, f32)
  ^bb8(%159: i64, %160: f32):
    %161 = llvm.icmp "slt" %159, %141 : i64
    llvm.cond_br %161, ^bb9, ^bb10
  ^bb9:
    %162 = llvm.add %143, %159 overflow<nsw,nuw> : i64
    %163 = llvm.getelementptr inbounds %121[%162] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %164 = llvm.load %163 : !llvm.ptr -> f32
    %165 = llvm.fsub %164, %146 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %166 = llvm.call @kinac_expf(%165) : (f32) -> f32
    %167 = llvm.getelementptr inbounds %121[%162] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %166, %167 : f32, !llvm.ptr
    %168 = llvm.fadd %160, %166 {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f32
    %169 = llvm.add %159, %125 overflow<nsw,nuw> : i64
    llvm.br ^bb8(%169, %168 : i64, f32)
  ^bb10:
    %170 = llvm.fdiv %131, %160 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb11(%123 : i64)
  ^bb11(%171: i64):
    %172 = llvm.icmp "slt" %171, %141 : i64
    llvm.cond_br %172, ^bb12, ^bb13
  ^bb12:
    %173 = llvm.add %143, %171 overflow<nsw,nuw> : i64
    %174 = llvm.getelementptr inbounds %121[%173] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %175 = llvm.load %174 : !llvm.ptr -> f32
    %176 = llvm.fmul %175, %170 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %177 = llvm.getelementptr inbounds %121[%173] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %176, %177 : f32, !llvm.ptr
    %178 = llvm.add %171, %125 overflow<nsw,nuw> : i64
    llvm.br ^bb11(%178 : i64)
  ^bb13:
    %179 = llvm.fmul %133, %170 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb14(%141 : i64)
  ^bb14(%180: i64):
    %181 = llvm.icmp "slt" %180, %126 : i64
    llvm.cond_br %181, ^bb15, ^bb16
  ^bb15:
    %182 = llvm.add %143, %180 overflow<nsw,nuw> : i64
    %183 = llvm.getelementptr inbounds %121[%182] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %179, %183 : f32, !llvm.ptr
    %184 = llvm.add %180, %125 overflow<nsw,nuw> : i64
    llvm.br ^bb14(%184 : i64)
  ^bb16:
    %185 = llvm.add %137, %125 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%185 : i64)
  ^bb17:
    %186 = llvm.add %134, %125 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%186 : i64)
  ^bb18:
    llvm.return
  }
  llvm.func internal @k5_matmul(%187: !llvm.ptr {llvm.noalias}, %188: !llvm.ptr {llvm.noalias}, %189: !llvm.ptr {llvm.noalias}) {
    %190 = llvm.mlir.constant(0) : i64
    %191 = llvm.mlir.constant(2) : i64
    %192 = llvm.mlir.constant(1) : i64
    %193 = llvm.mlir.constant(256) : i64
    %194 = llvm.mlir.constant(16) : i64
    llvm.br ^bb1(%190 : i64)
  ^bb1(%195: i64):
    %196 = llvm.icmp "slt" %195, %191 : i64
    llvm.cond_br %196, ^bb2, ^bb3
  ^bb2:
    %197 = llvm.mul %195, %193 overflow<nsw,nuw> : i64
    %198 = llvm.mul %195, %194 overflow<nsw,nuw> : i64
    %199 = llvm.getelementptr inbounds %188[%197] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %200 = llvm.getelementptr inbounds %189[%190] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %201 = llvm.getelementptr inbounds %187[%198] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %202 = llvm.mlir.constant(101 : i32) : i32
    %203 = llvm.mlir.constant(111 : i32) : i32
    %204 = llvm.mlir.constant(111 : i32) : i32
    %205 = llvm.mlir.constant(16) : i64
    %206 = llvm.mlir.constant(16) : i64
    %207 = llvm.mlir.constant(16) : i64
    %208 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %209 = llvm.mlir.constant(16) : i64
    %210 = llvm.mlir.constant(16) : i64
    %211 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %212 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%202, %203, %204, %205, %206, %207, %208, %199, %209, %200, %210, %211, %201, %212) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    %213 = llvm.add %195, %192 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%213 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func internal @k7_matmul(%214: !llvm.ptr {llvm.noalias}, %215: !llvm.ptr {llvm.noalias}, %216: !llvm.ptr {llvm.noalias}) {
    %217 = llvm.mlir.constant(0) : i64
    %218 = llvm.getelementptr inbounds %215[%217] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %219 = llvm.getelementptr inbounds %216[%217] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %220 = llvm.getelementptr inbounds %214[%217] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %221 = llvm.mlir.constant(101 : i32) : i32
    %222 = llvm.mlir.constant(111 : i32) : i32
    %223 = llvm.mlir.constant(111 : i32) : i32
    %224 = llvm.mlir.constant(16) : i64
    %225 = llvm.mlir.constant(32) : i64
    %226 = llvm.mlir.constant(32) : i64
    %227 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %228 = llvm.mlir.constant(32) : i64
    %229 = llvm.mlir.constant(32) : i64
    %230 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %231 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%221, %222, %223, %224, %225, %226, %227, %218, %228, %219, %229, %230, %220, %231) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @kinac_expf(%232: f32) -> f32 {
    %233 = llvm.mlir.constant(-1.040000e+02 : f32) : f32
    %234 = llvm.mlir.constant(8.875000e+01 : f32) : f32
    %235 = llvm.call_intrinsic "llvm.maximum.f32"(%232, %233) : (f32, f32) -> f32
    %236 = llvm.call_intrinsic "llvm.minimum.f32"(%235, %234) : (f32, f32) -> f32
    %237 = llvm.mlir.constant(1.44269502 : f32) : f32
    %238 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %239 = llvm.call_intrinsic "llvm.fma.f32"(%236, %237, %238) : (f32, f32, f32) -> f32
    %240 = llvm.call_intrinsic "llvm.floor.f32"(%239) : (f32) -> f32
    %241 = llvm.mlir.constant(-0.693359375 : f32) : f32
    %242 = llvm.call_intrinsic "llvm.fma.f32"(%240, %241, %236) : (f32, f32, f32) -> f32
    %243 = llvm.mlir.constant(0.000212194442 : f32) : f32
    %244 = llvm.call_intrinsic "llvm.fma.f32"(%240, %243, %242) : (f32, f32, f32) -> f32
    %245 = llvm.mlir.constant(0.000198756912 : f32) : f32
    %246 = llvm.mlir.constant(0.00139819994 : f32) : f32
    %247 = llvm.call_intrinsic "llvm.fma.f32"(%245, %244, %246) : (f32, f32, f32) -> f32
    %248 = llvm.mlir.constant(0.00833345205 : f32) : f32
    %249 = llvm.call_intrinsic "llvm.fma.f32"(%247, %244, %248) : (f32, f32, f32) -> f32
    %250 = llvm.mlir.constant(0.0416657962 : f32) : f32
    %251 = llvm.call_intrinsic "llvm.fma.f32"(%249, %244, %250) : (f32, f32, f32) -> f32
    %252 = llvm.mlir.constant(0.166666657 : f32) : f32
    %253 = llvm.call_intrinsic "llvm.fma.f32"(%251, %244, %252) : (f32, f32, f32) -> f32
    %254 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %255 = llvm.call_intrinsic "llvm.fma.f32"(%253, %244, %254) : (f32, f32, f32) -> f32
    %256 = llvm.fmul %244, %244 : f32
    %257 = llvm.call_intrinsic "llvm.fma.f32"(%255, %256, %244) : (f32, f32, f32) -> f32
    %258 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %259 = llvm.fadd %257, %258 : f32
    %260 = llvm.mlir.constant(-1.250000e+02 : f32) : f32
    %261 = llvm.fcmp "olt" %240, %260 : f32
    %262 = llvm.mlir.constant(6.400000e+01 : f32) : f32
    %263 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %264 = llvm.select %261, %262, %263 : i1, f32
    %265 = llvm.fadd %240, %264 : f32
    %266 = llvm.mlir.constant(0x4B00007E : f32) : f32
    %267 = llvm.fadd %265, %266 : f32
    %268 = llvm.bitcast %267 : f32 to i32
    %269 = llvm.mlir.constant(23 : i32) : i32
    %270 = llvm.shl %268, %269 : i32
    %271 = llvm.bitcast %270 : i32 to f32
    %272 = llvm.fmul %259, %271 : f32
    %273 = llvm.mlir.constant(1.08420217e-19 : f32) : f32
    %274 = llvm.mlir.constant(2.000000e+00 : f32) : f32
    %275 = llvm.select %261, %273, %274 : i1, f32
    %276 = llvm.fmul %272, %275 : f32
    %277 = llvm.fcmp "olt" %232, %233 : f32
    %278 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %279 = llvm.select %277, %278, %276 : i1, f32
    %280 = llvm.fcmp "ogt" %232, %234 : f32
    %281 = llvm.mlir.constant(0x7f800000 : f32) : f32
    %282 = llvm.select %280, %281, %279 : i1, f32
    llvm.return %282 : f32
  }
  llvm.func @kinac_sgemm(i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64)
}
