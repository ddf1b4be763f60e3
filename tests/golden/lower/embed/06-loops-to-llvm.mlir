builtin.module {
  llvm.func internal @embed(%table: !llvm.ptr, %ids: !llvm.ptr, %0: !llvm.ptr, %1: !llvm.ptr, %2: !llvm.ptr) {
    %3 = llvm.mlir.constant(0) : i64
    %4 = llvm.getelementptr inbounds %1[%3] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k0_gather(%4, %table, %ids, %2) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    %5 = llvm.mlir.constant(64) : i64
    %6 = llvm.getelementptr inbounds %1[%5] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k1_concat(%6, %4) : (!llvm.ptr, !llvm.ptr) -> ()
    %7 = llvm.mlir.constant(0) : i64
    %8 = llvm.getelementptr inbounds %1[%7] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k2_reduce(%8, %6) : (!llvm.ptr, !llvm.ptr) -> ()
    llvm.call @k3_map(%0, %8) : (!llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @kinac_call_embed(%9: !llvm.ptr) {
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
    llvm.call @embed(%12, %15, %18, %21, %24) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func internal @k0_gather(%25: !llvm.ptr {llvm.noalias}, %26: !llvm.ptr {llvm.noalias}, %27: !llvm.ptr {llvm.noalias}, %28: !llvm.ptr {llvm.noalias}) {
    %29 = llvm.mlir.constant(0) : i64
    %30 = llvm.mlir.constant(2) : i64
    %31 = llvm.mlir.constant(1) : i64
    %32 = llvm.mlir.constant(3) : i64
    %33 = llvm.mlir.constant(0 : i32) : i32
    %34 = llvm.mlir.constant(10 : i32) : i32
    %35 = llvm.mlir.constant(1) : i64
    %36 = llvm.mlir.constant(0) : i64
    %37 = llvm.mlir.constant(10) : i64
    %38 = llvm.mlir.constant(4) : i64
    %39 = llvm.mlir.constant(16 : i32) : i32
    %40 = llvm.mlir.constant(12) : i64
    llvm.br ^bb1(%29 : i64)
  ^bb1(%41: i64):
    %42 = llvm.icmp "slt" %41, %30 : i64
    llvm.cond_br %42, ^bb2, ^bb11
  ^bb2:
    %43 = llvm.mul %41, %32 overflow<nsw,nuw> : i64
    %44 = llvm.mul %41, %40 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%29 : i64)
  ^bb3(%45: i64):
    %46 = llvm.icmp "slt" %45, %32 : i64
    llvm.cond_br %46, ^bb4, ^bb10
  ^bb4:
    %47 = llvm.add %43, %45 overflow<nsw,nuw> : i64
    %48 = llvm.getelementptr inbounds %27[%47] : (!llvm.ptr, i64) -> !llvm.ptr, i32
    %49 = llvm.load %48 : !llvm.ptr -> i32
    %50 = llvm.icmp "slt" %49, %33 : i32
    %51 = llvm.icmp "sge" %49, %34 : i32
    %52 = llvm.or %50, %51 : i1
    %53 = llvm.sext %49 : i32 to i64
    llvm.cond_br %52, ^bb5, ^bb6
  ^bb5:
    %54 = llvm.getelementptr inbounds %28[%29] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    llvm.store %35, %54 : i64, !llvm.ptr
    %55 = llvm.getelementptr inbounds %28[%31] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    llvm.store %36, %55 : i64, !llvm.ptr
    %56 = llvm.getelementptr inbounds %28[%30] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    llvm.store %47, %56 : i64, !llvm.ptr
    %57 = llvm.getelementptr inbounds %28[%32] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    llvm.store %53, %57 : i64, !llvm.ptr
    %58 = llvm.getelementptr inbounds %28[%38] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    llvm.store %37, %58 : i64, !llvm.ptr
    llvm.br ^bb6
  ^bb6:
    %59 = llvm.select %52, %33, %49 : i1, i32
    %60 = llvm.sext %59 : i32 to i64
    %61 = llvm.mul %60, %38 overflow<nsw,nuw> : i64
    %62 = llvm.mul %45, %38 overflow<nsw,nuw> : i64
    %63 = llvm.add %44, %62 overflow<nsw,nuw> : i64
    llvm.br ^bb7(%29 : i64)
  ^bb7(%64: i64):
    %65 = llvm.icmp "slt" %64, %38 : i64
    llvm.cond_br %65, ^bb8, ^bb9
  ^bb8:
    %66 = llvm.add %61, %64 overflow<nsw,nuw> : i64
    %67 = llvm.getelementptr inbounds %26[%66] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    %68 = llvm.load %67 : !llvm.ptr -> i16
    %69 = llvm.zext %68 : i16 to i32
    %70 = llvm.shl %69, %39 : i32
    %71 = llvm.bitcast %70 : i32 to f32
    %72 = llvm.add %63, %64 overflow<nsw,nuw> : i64
    %73 = llvm.bitcast %71 : f32 to i32
    %74 = llvm.lshr %73, %39 : i32
    %75 = llvm.trunc %74 : i32 to i16
    %76 = llvm.getelementptr inbounds %25[%72] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    llvm.store %75, %76 : i16, !llvm.ptr
    %77 = llvm.add %64, %31 overflow<nsw,nuw> : i64
    llvm.br ^bb7(%77 : i64)
  ^bb9:
    %78 = llvm.add %45, %31 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%78 : i64)
  ^bb10:
    %79 = llvm.add %41, %31 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%79 : i64)
  ^bb11:
    llvm.return
  }
  llvm.func internal @k1_concat(%80: !llvm.ptr {llvm.noalias}, %81: !llvm.ptr {llvm.noalias}) {
    %82 = llvm.mlir.constant(0) : i64
    %83 = llvm.mlir.constant(2) : i64
    %84 = llvm.mlir.constant(1) : i64
    %85 = llvm.mlir.constant(3) : i64
    %86 = llvm.mlir.constant(4) : i64
    %87 = llvm.mlir.constant(12) : i64
    %88 = llvm.mlir.constant(16 : i32) : i32
    %89 = llvm.mlir.constant(24) : i64
    %90 = llvm.mlir.constant(8) : i64
    llvm.br ^bb1(%82 : i64)
  ^bb1(%91: i64):
    %92 = llvm.icmp "slt" %91, %83 : i64
    llvm.cond_br %92, ^bb2, ^bb9
  ^bb2:
    %93 = llvm.mul %91, %87 overflow<nsw,nuw> : i64
    %94 = llvm.mul %91, %89 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%82 : i64)
  ^bb3(%95: i64):
    %96 = llvm.icmp "slt" %95, %85 : i64
    llvm.cond_br %96, ^bb4, ^bb8
  ^bb4:
    %97 = llvm.mul %95, %86 overflow<nsw,nuw> : i64
    %98 = llvm.add %93, %97 overflow<nsw,nuw> : i64
    %99 = llvm.mul %95, %90 overflow<nsw,nuw> : i64
    %100 = llvm.add %94, %99 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%82 : i64)
  ^bb5(%101: i64):
    %102 = llvm.icmp "slt" %101, %86 : i64
    llvm.cond_br %102, ^bb6, ^bb7
  ^bb6:
    %103 = llvm.add %98, %101 overflow<nsw,nuw> : i64
    %104 = llvm.getelementptr inbounds %81[%103] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    %105 = llvm.load %104 : !llvm.ptr -> i16
    %106 = llvm.zext %105 : i16 to i32
    %107 = llvm.shl %106, %88 : i32
    %108 = llvm.bitcast %107 : i32 to f32
    %109 = llvm.add %100, %101 overflow<nsw,nuw> : i64
    %110 = llvm.bitcast %108 : f32 to i32
    %111 = llvm.lshr %110, %88 : i32
    %112 = llvm.trunc %111 : i32 to i16
    %113 = llvm.getelementptr inbounds %80[%109] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    llvm.store %112, %113 : i16, !llvm.ptr
    %114 = llvm.add %101, %84 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%114 : i64)
  ^bb7:
    %115 = llvm.add %95, %84 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%115 : i64)
  ^bb8:
    %116 = llvm.add %91, %84 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%116 : i64)
  ^bb9:
    %117 = llvm.mlir.constant(1 : i32) : i32
    %118 = llvm.mlir.constant(32767 : i32) : i32
    %119 = llvm.mlir.constant(-65536 : i32) : i32
    %120 = llvm.mlir.constant(0x7fc00000 : f32) : f32
    llvm.br ^bb10(%82 : i64)
  ^bb10(%121: i64):
    %122 = llvm.icmp "slt" %121, %83 : i64
    llvm.cond_br %122, ^bb11, ^bb18
  ^bb11:
    %123 = llvm.mul %121, %87 overflow<nsw,nuw> : i64
    %124 = llvm.mul %121, %89 overflow<nsw,nuw> : i64
    llvm.br ^bb12(%82 : i64)
  ^bb12(%125: i64):
    %126 = llvm.icmp "slt" %125, %85 : i64
    llvm.cond_br %126, ^bb13, ^bb17
  ^bb13:
    %127 = llvm.mul %125, %86 overflow<nsw,nuw> : i64
    %128 = llvm.add %123, %127 overflow<nsw,nuw> : i64
    %129 = llvm.mul %125, %90 overflow<nsw,nuw> : i64
    %130 = llvm.add %124, %129 overflow<nsw,nuw> : i64
    llvm.br ^bb14(%82 : i64)
  ^bb14(%131: i64):
    %132 = llvm.icmp "slt" %131, %86 : i64
    llvm.cond_br %132, ^bb15, ^bb16
  ^bb15:
    %133 = llvm.add %131, %86 overflow<nsw,nuw> : i64
    %134 = llvm.add %128, %131 overflow<nsw,nuw> : i64
    %135 = llvm.getelementptr inbounds %81[%134] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    %136 = llvm.load %135 : !llvm.ptr -> i16
    %137 = llvm.zext %136 : i16 to i32
    %138 = llvm.shl %137, %88 : i32
    %139 = llvm.bitcast %138 : i32 to f32
    %140 = llvm.fneg %139 : f32
    %141 = llvm.bitcast %140 : f32 to i32
    %142 = llvm.lshr %141, %88 : i32
    %143 = llvm.and %142, %117 : i32
    %144 = llvm.add %141, %118 : i32
    %145 = llvm.add %144, %143 : i32
    %146 = llvm.and %145, %119 : i32
    %147 = llvm.bitcast %146 : i32 to f32
    %148 = llvm.fcmp "uno" %140, %140 : f32
    %149 = llvm.select %148, %120, %147 : i1, f32
    %150 = llvm.add %130, %133 overflow<nsw,nuw> : i64
    %151 = llvm.bitcast %149 : f32 to i32
    %152 = llvm.lshr %151, %88 : i32
    %153 = llvm.trunc %152 : i32 to i16
    %154 = llvm.getelementptr inbounds %80[%150] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    llvm.store %153, %154 : i16, !llvm.ptr
    %155 = llvm.add %131, %84 overflow<nsw,nuw> : i64
    llvm.br ^bb14(%155 : i64)
  ^bb16:
    %156 = llvm.add %125, %84 overflow<nsw,nuw> : i64
    llvm.br ^bb12(%156 : i64)
  ^bb17:
    %157 = llvm.add %121, %84 overflow<nsw,nuw> : i64
    llvm.br ^bb10(%157 : i64)
  ^bb18:
    llvm.return
  }
  llvm.func internal @k2_reduce(%158: !llvm.ptr {llvm.noalias}, %159: !llvm.ptr {llvm.noalias}) {
    %160 = llvm.mlir.constant(0) : i64
    %161 = llvm.mlir.constant(2) : i64
    %162 = llvm.mlir.constant(1) : i64
    %163 = llvm.mlir.constant(3) : i64
    %164 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %165 = llvm.mlir.constant(8) : i64
    %166 = llvm.mlir.constant(24) : i64
    %167 = llvm.mlir.constant(16 : i32) : i32
    %168 = llvm.mlir.constant(1 : i32) : i32
    %169 = llvm.mlir.constant(32767 : i32) : i32
    %170 = llvm.mlir.constant(-65536 : i32) : i32
    %171 = llvm.mlir.constant(0x7fc00000 : f32) : f32
    %172 = llvm.mlir.constant(8.000000e+00 : f32) : f32
    llvm.br ^bb1(%160 : i64)
  ^bb1(%173: i64):
    %174 = llvm.icmp "slt" %173, %161 : i64
    llvm.cond_br %174, ^bb2, ^bb9
  ^bb2:
    %175 = llvm.mul %173, %166 overflow<nsw,nuw> : i64
    %176 = llvm.mul %173, %163 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%160 : i64)
  ^bb3(%177: i64):
    %178 = llvm.icmp "slt" %177, %163 : i64
    llvm.cond_br %178, ^bb4, ^bb8
  ^bb4:
    %179 = llvm.mul %177, %165 overflow<nsw,nuw> : i64
    %180 = llvm.add %175, %179 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%160, %164 : i64, f32)
  ^bb5(%181: i64, %182: f32):
    %183 = llvm.icmp "slt" %181, %165 : i64
    llvm.cond_br %183, ^bb6, ^bb7
  ^bb6:
    %184 = llvm.add %180, %181 overflow<nsw,nuw> : i64
    %185 = llvm.getelementptr inbounds %159[%184] : (!llvm.ptr, i64) -> !llvm.ptr, i16
    %186 = llvm.load %185 : !llvm.ptr -> i16
    %187 = llvm.zext %186 : i16 to i32
    %188 = llvm.shl %187, %167 : i32
    %189 = llvm.bitcast %188 : i32 to f32
    %190 = llvm.call @kinac_expf(%189) : (f32) -> f32
    %191 = llvm.bitcast %190 : f32 to i32
    %192 = llvm.lshr %191, %167 : i32
    %193 = llvm.and %192, %168 : i32
    %194 = llvm.add %191, %169 : i32
    %195 = llvm.add %194, %193 : i32
    %196 = llvm.and %195, %170 : i32
    %197 = llvm.bitcast %196 : i32 to f32
    %198 = llvm.fcmp "uno" %190, %190 : f32
    %199 = llvm.select %198, %171, %197 : i1, f32
    %200 = llvm.fadd %182, %199 {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f32
    %201 = llvm.add %181, %162 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%201, %200 : i64, f32)
  ^bb7:
    %202 = llvm.fdiv %182, %172 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %203 = llvm.add %176, %177 overflow<nsw,nuw> : i64
    %204 = llvm.getelementptr inbounds %158[%203] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %202, %204 : f32, !llvm.ptr
    %205 = llvm.add %177, %162 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%205 : i64)
  ^bb8:
    %206 = llvm.add %173, %162 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%206 : i64)
  ^bb9:
    llvm.return
  }
  llvm.func internal @k3_map(%207: !llvm.ptr {llvm.noalias}, %208: !llvm.ptr {llvm.noalias}) {
    %209 = llvm.mlir.constant(0) : i64
    %210 = llvm.mlir.constant(2) : i64
    %211 = llvm.mlir.constant(1) : i64
    %212 = llvm.mlir.constant(3) : i64
    %213 = llvm.mlir.constant(16 : i32) : i32
    %214 = llvm.mlir.constant(1 : i32) : i32
    %215 = llvm.mlir.constant(32767 : i32) : i32
    %216 = llvm.mlir.constant(-65536 : i32) : i32
    %217 = llvm.mlir.constant(0x7fc00000 : f32) : f32
    llvm.br ^bb1(%209 : i64)
  ^bb1(%218: i64):
    %219 = llvm.icmp "slt" %218, %210 : i64
    llvm.cond_br %219, ^bb2, ^bb6
  ^bb2:
    %220 = llvm.mul %218, %212 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%209 : i64)
  ^bb3(%221: i64):
    %222 = llvm.icmp "slt" %221, %212 : i64
    llvm.cond_br %222, ^bb4, ^bb5
  ^bb4:
    %223 = llvm.add %220, %221 overflow<nsw,nuw> : i64
    %224 = llvm.getelementptr inbounds %208[%223] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %225 = llvm.load %224 : !llvm.ptr -> f32
    %226 = llvm.bitcast %225 : f32 to i32
    %227 = llvm.lshr %226, %213 : i32
    %228 = llvm.and %227, %214 : i32
    %229 = llvm.add %226, %215 : i32
    %230 = llvm.add %229, %228 : i32
    %231 = llvm.and %230, %216 : i32
    %232 = llvm.bitcast %231 : i32 to f32
    %233 = llvm.fcmp "uno" %225, %225 : f32
    %234 = llvm.select %233, %217, %232 : i1, f32
    %235 = llvm.getelementptr inbounds %207[%223] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %234, %235 : f32, !llvm.ptr
    %236 = llvm.add %221, %211 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%236 : i64)
  ^bb5:
    %237 = llvm.add %218, %211 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%237 : i64)
  ^bb6:
    llvm.return
  }
  llvm.func internal @kinac_expf(%238: f32) -> f32 {
    %239 = llvm.mlir.constant(-1.040000e+02 : f32) : f32
    %240 = llvm.mlir.constant(8.875000e+01 : f32) : f32
    %241 = llvm.call_intrinsic "llvm.maximum.f32"(%238, %239) : (f32, f32) -> f32
    %242 = llvm.call_intrinsic "llvm.minimum.f32"(%241, %240) : (f32, f32) -> f32
    %243 = llvm.mlir.constant(1.44269502 : f32) : f32
    %244 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %245 = llvm.call_intrinsic "llvm.fma.f32"(%242, %243, %244) : (f32, f32, f32) -> f32
    %246 = llvm.call_intrinsic "llvm.floor.f32"(%245) : (f32) -> f32
    %247 = llvm.mlir.constant(-0.693359375 : f32) : f32
    %248 = llvm.call_intrinsic "llvm.fma.f32"(%246, %247, %242) : (f32, f32, f32) -> f32
    %249 = llvm.mlir.constant(0.000212194442 : f32) : f32
    %250 = llvm.call_intrinsic "llvm.fma.f32"(%246, %249, %248) : (f32, f32, f32) -> f32
    %251 = llvm.mlir.constant(0.000198756912 : f32) : f32
    %252 = llvm.mlir.constant(0.00139819994 : f32) : f32
    %253 = llvm.call_intrinsic "llvm.fma.f32"(%251, %250, %252) : (f32, f32, f32) -> f32
    %254 = llvm.mlir.constant(0.00833345205 : f32) : f32
    %255 = llvm.call_intrinsic "llvm.fma.f32"(%253, %250, %254) : (f32, f32, f32) -> f32
    %256 = llvm.mlir.constant(0.0416657962 : f32) : f32
    %257 = llvm.call_intrinsic "llvm.fma.f32"(%255, %250, %256) : (f32, f32, f32) -> f32
    %258 = llvm.mlir.constant(0.166666657 : f32) : f32
    %259 = llvm.call_intrinsic "llvm.fma.f32"(%257, %250, %258) : (f32, f32, f32) -> f32
    %260 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %261 = llvm.call_intrinsic "llvm.fma.f32"(%259, %250, %260) : (f32, f32, f32) -> f32
    %262 = llvm.fmul %250, %250 : f32
    %263 = llvm.call_intrinsic "llvm.fma.f32"(%261, %262, %250) : (f32, f32, f32) -> f32
    %264 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %265 = llvm.fadd %263, %264 : f32
    %266 = llvm.mlir.constant(-1.250000e+02 : f32) : f32
    %267 = llvm.fcmp "olt" %246, %266 : f32
    %268 = llvm.mlir.constant(6.400000e+01 : f32) : f32
    %269 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %270 = llvm.select %267, %268, %269 : i1, f32
    %271 = llvm.fadd %246, %270 : f32
    %272 = llvm.mlir.constant(0x4B00007E : f32) : f32
    %273 = llvm.fadd %271, %272 : f32
    %274 = llvm.bitcast %273 : f32 to i32
    %275 = llvm.mlir.constant(23 : i32) : i32
    %276 = llvm.shl %274, %275 : i32
    %277 = llvm.bitcast %276 : i32 to f32
    %278 = llvm.fmul %265, %277 : f32
    %279 = llvm.mlir.constant(1.08420217e-19 : f32) : f32
    %280 = llvm.mlir.constant(2.000000e+00 : f32) : f32
    %281 = llvm.select %267, %279, %280 : i1, f32
    %282 = llvm.fmul %278, %281 : f32
    %283 = llvm.fcmp "olt" %238, %239 : f32
    %284 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %285 = llvm.select %283, %284, %282 : i1, f32
    %286 = llvm.fcmp "ogt" %238, %240 : f32
    %287 = llvm.mlir.constant(0x7f800000 : f32) : f32
    %288 = llvm.select %286, %287, %285 : i1, f32
    llvm.return %288 : f32
  }
}
