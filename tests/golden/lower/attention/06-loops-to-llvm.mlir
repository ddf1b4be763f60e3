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
    %15 = llvm.mlir.constant(0) : i64
    %16 = llvm.getelementptr inbounds %1[%15] : (!llvm.ptr, i64) -> !llvm.ptr, i8
    llvm.call @k6_map(%16, %14) : (!llvm.ptr, !llvm.ptr) -> ()
    llvm.call @k7_matmul(%0, %16, %wo) : (!llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func @kinac_call_attention(%17: !llvm.ptr) {
    %18 = llvm.mlir.constant(0) : i64
    %19 = llvm.getelementptr inbounds %17[%18] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %20 = llvm.load %19 : !llvm.ptr -> !llvm.ptr
    %21 = llvm.mlir.constant(1) : i64
    %22 = llvm.getelementptr inbounds %17[%21] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %23 = llvm.load %22 : !llvm.ptr -> !llvm.ptr
    %24 = llvm.mlir.constant(2) : i64
    %25 = llvm.getelementptr inbounds %17[%24] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %26 = llvm.load %25 : !llvm.ptr -> !llvm.ptr
    %27 = llvm.mlir.constant(3) : i64
    %28 = llvm.getelementptr inbounds %17[%27] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %29 = llvm.load %28 : !llvm.ptr -> !llvm.ptr
    %30 = llvm.mlir.constant(4) : i64
    %31 = llvm.getelementptr inbounds %17[%30] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %32 = llvm.load %31 : !llvm.ptr -> !llvm.ptr
    %33 = llvm.mlir.constant(5) : i64
    %34 = llvm.getelementptr inbounds %17[%33] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %35 = llvm.load %34 : !llvm.ptr -> !llvm.ptr
    %36 = llvm.mlir.constant(6) : i64
    %37 = llvm.getelementptr inbounds %17[%36] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %38 = llvm.load %37 : !llvm.ptr -> !llvm.ptr
    %39 = llvm.mlir.constant(7) : i64
    %40 = llvm.getelementptr inbounds %17[%39] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %41 = llvm.load %40 : !llvm.ptr -> !llvm.ptr
    llvm.call @attention(%20, %23, %26, %29, %32, %35, %38, %41) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    llvm.return
  }
  llvm.func internal @k0_matmul(%42: !llvm.ptr {llvm.noalias}, %43: !llvm.ptr {llvm.noalias}, %44: !llvm.ptr {llvm.noalias}) {
    %45 = llvm.mlir.constant(0) : i64
    %46 = llvm.getelementptr inbounds %43[%45] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %47 = llvm.getelementptr inbounds %44[%45] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %48 = llvm.getelementptr inbounds %42[%45] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %49 = llvm.mlir.constant(101 : i32) : i32
    %50 = llvm.mlir.constant(111 : i32) : i32
    %51 = llvm.mlir.constant(111 : i32) : i32
    %52 = llvm.mlir.constant(16) : i64
    %53 = llvm.mlir.constant(32) : i64
    %54 = llvm.mlir.constant(32) : i64
    %55 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %56 = llvm.mlir.constant(32) : i64
    %57 = llvm.mlir.constant(32) : i64
    %58 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %59 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%49, %50, %51, %52, %53, %54, %55, %46, %56, %47, %57, %58, %48, %59) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k1_matmul(%60: !llvm.ptr {llvm.noalias}, %61: !llvm.ptr {llvm.noalias}, %62: !llvm.ptr {llvm.noalias}) {
    %63 = llvm.mlir.constant(0) : i64
    %64 = llvm.getelementptr inbounds %61[%63] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %65 = llvm.getelementptr inbounds %62[%63] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %66 = llvm.getelementptr inbounds %60[%63] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %67 = llvm.mlir.constant(101 : i32) : i32
    %68 = llvm.mlir.constant(111 : i32) : i32
    %69 = llvm.mlir.constant(111 : i32) : i32
    %70 = llvm.mlir.constant(16) : i64
    %71 = llvm.mlir.constant(16) : i64
    %72 = llvm.mlir.constant(32) : i64
    %73 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %74 = llvm.mlir.constant(32) : i64
    %75 = llvm.mlir.constant(16) : i64
    %76 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %77 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%67, %68, %69, %70, %71, %72, %73, %64, %74, %65, %75, %76, %66, %77) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k2_matmul(%78: !llvm.ptr {llvm.noalias}, %79: !llvm.ptr {llvm.noalias}, %80: !llvm.ptr {llvm.noalias}) {
    %81 = llvm.mlir.constant(0) : i64
    %82 = llvm.getelementptr inbounds %79[%81] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %83 = llvm.getelementptr inbounds %80[%81] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %84 = llvm.getelementptr inbounds %78[%81] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %85 = llvm.mlir.constant(101 : i32) : i32
    %86 = llvm.mlir.constant(111 : i32) : i32
    %87 = llvm.mlir.constant(111 : i32) : i32
    %88 = llvm.mlir.constant(16) : i64
    %89 = llvm.mlir.constant(16) : i64
    %90 = llvm.mlir.constant(32) : i64
    %91 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %92 = llvm.mlir.constant(32) : i64
    %93 = llvm.mlir.constant(16) : i64
    %94 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %95 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%85, %86, %87, %88, %89, %90, %91, %82, %92, %83, %93, %94, %84, %95) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @k3_matmul(%96: !llvm.ptr {llvm.noalias}, %97: !llvm.ptr {llvm.noalias}, %98: !llvm.ptr {llvm.noalias}) {
    %99 = llvm.mlir.constant(0) : i64
    %100 = llvm.mlir.constant(2) : i64
    %101 = llvm.mlir.constant(1) : i64
    %102 = llvm.mlir.constant(16) : i64
    %103 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%99 : i64)
  ^bb1(%104: i64):
    %105 = llvm.icmp "slt" %104, %100 : i64
    llvm.cond_br %105, ^bb2, ^bb3
  ^bb2:
    %106 = llvm.mul %104, %102 overflow<nsw,nuw> : i64
    %107 = llvm.mul %104, %103 overflow<nsw,nuw> : i64
    %108 = llvm.getelementptr inbounds %98[%106] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %109 = llvm.getelementptr inbounds %97[%99] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %110 = llvm.getelementptr inbounds %96[%107] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %111 = llvm.mlir.constant(101 : i32) : i32
    %112 = llvm.mlir.constant(111 : i32) : i32
    %113 = llvm.mlir.constant(112 : i32) : i32
    %114 = llvm.mlir.constant(16) : i64
    %115 = llvm.mlir.constant(16) : i64
    %116 = llvm.mlir.constant(16) : i64
    %117 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %118 = llvm.mlir.constant(32) : i64
    %119 = llvm.mlir.constant(16) : i64
    %120 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %121 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%111, %112, %113, %114, %115, %116, %117, %108, %118, %109, %119, %120, %110, %121) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    %122 = llvm.add %104, %101 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%122 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func internal @k4_softmax(%123: !llvm.ptr {llvm.noalias}, %124: !llvm.ptr {llvm.noalias}) {
    %125 = llvm.mlir.constant(0) : i64
    %126 = llvm.mlir.constant(2) : i64
    %127 = llvm.mlir.constant(1) : i64
    %128 = llvm.mlir.constant(16) : i64
    %129 = llvm.mlir.constant(0xff800000 : f32) : f32
    %130 = llvm.mlir.constant(256) : i64
    %131 = llvm.mlir.constant(1.600000e+01 : f32) : f32
    %132 = llvm.call_intrinsic "llvm.sqrt.f32"(%131) : (f32) -> f32
    %133 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %134 = llvm.fdiv %133, %132 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %135 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    llvm.br ^bb1(%125 : i64)
  ^bb1(%136: i64):
    %137 = llvm.icmp "slt" %136, %126 : i64
    llvm.cond_br %137, ^bb2, ^bb15
  ^bb2:
    %138 = llvm.mul %136, %130 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%125 : i64)
  ^bb3(%139: i64):
    %140 = llvm.icmp "slt" %139, %128 : i64
    llvm.cond_br %140, ^bb4, ^bb14
  ^bb4:
    %141 = llvm.mul %139, %128 overflow<nsw,nuw> : i64
    %142 = llvm.add %138, %141 overflow<nsw,nuw> : i64
    %143 = llvm.trunc %139 : i64 to i32
    llvm.br ^bb5(%125, %129 : i64, f32)
  ^bb5(%144: i64, %145: f32):
    %146 = llvm.icmp "slt" %144, %128 : i64
    llvm.cond_br %146, ^bb6, ^bb7
  ^bb6:
    %147 = llvm.add %142, %144 overflow<nsw,nuw> : i64
    %148 = llvm.getelementptr inbounds %124[%147] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %149 = llvm.load %148 : !llvm.ptr -> f32
    %150 = llvm.fmul %149, %134 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %151 = llvm.trunc %144 : i64 to i32
    %152 = llvm.icmp "sge" %143, %151 : i32
    %153 = llvm.select %152, %135, %129 : i1, f32
    %154 = llvm.fadd %150, %153 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %155 = llvm.call_intrinsic "llvm.maximum.f32"(%145, %154) : (f32, f32) -> f32
    %156 = llvm.add %144, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%156, %155 : i64, f32)
  ^bb7:
    llvm.br ^bb8(%125, %135 : i64, f32)
  ^bb8(%157: i64, %158: f32):
    %159 = llvm.icmp "slt" %157, %128 : i64
    llvm.cond_br %159, ^bb9, ^bb10
  ^bb9:
    %160 = llvm.add %142, %157 overflow<nsw,nuw> : i64
    %161 = llvm.getelementptr inbounds %124[%160] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %162 = llvm.load %161 : !llvm.ptr -> f32
    %163 = llvm.fmul %162, %134 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %164 = llvm.trunc %157 : i64 to i32
    %165 = llvm.icmp "sge" %143, %164 : i32
    %166 = llvm.select %165, %135, %129 : i1, f32
    %167 = llvm.fadd %163, %166 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %168 = llvm.fsub %167, %145 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %169 = llvm.call @kinac_expf(%168) : (f32) -> f32
    %170 = llvm.getelementptr inbounds %123[%160] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %169, %170 : f32, !llvm.ptr
    %171 = llvm.fadd %158, %169 {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f32
    %172 = llvm.add %157, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb8(%172, %171 : i64, f32)
  ^bb10:
    %173 = llvm.fdiv %133, %158 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb11(%125 : i64)
  ^bb11(%174: i64):
    %175 = llvm.icmp "slt" %174, %128 : i64
    llvm.cond_br %175, ^bb12, ^bb13
  ^bb12:
    %176 = llvm.add %142, %174 overflow<nsw,nuw> : i64
    %177 = llvm.getelementptr inbounds %123[%176] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %178 = llvm.load %177 : !llvm.ptr -> f32
    %179 = llvm.fmul %178, %173 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %180 = llvm.getelementptr inbounds %123[%176] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %179, %180 : f32, !llvm.ptr
    %181 = llvm.add %174, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb11(%181 : i64)
  ^bb13:
    %182 = llvm.add %139, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%182 : i64)
  ^bb14:
    %183 = llvm.add %136, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%183 : i64)
  ^bb15:
    llvm.return
  }
  llvm.func internal @k5_matmul(%184: !llvm.ptr {llvm.noalias}, %185: !llvm.ptr {llvm.noalias}, %186: !llvm.ptr {llvm.noalias}) {
    %187 = llvm.mlir.constant(0) : i64
    %188 = llvm.mlir.constant(2) : i64
    %189 = llvm.mlir.constant(1) : i64
    %190 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%187 : i64)
  ^bb1(%191: i64):
    %192 = llvm.icmp "slt" %191, %188 : i64
    llvm.cond_br %192, ^bb2, ^bb3
  ^bb2:
    %193 = llvm.mul %191, %190 overflow<nsw,nuw> : i64
    %194 = llvm.getelementptr inbounds %185[%193] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %195 = llvm.getelementptr inbounds %186[%187] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %196 = llvm.getelementptr inbounds %184[%193] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %197 = llvm.mlir.constant(101 : i32) : i32
    %198 = llvm.mlir.constant(111 : i32) : i32
    %199 = llvm.mlir.constant(111 : i32) : i32
    %200 = llvm.mlir.constant(16) : i64
    %201 = llvm.mlir.constant(16) : i64
    %202 = llvm.mlir.constant(16) : i64
    %203 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %204 = llvm.mlir.constant(16) : i64
    %205 = llvm.mlir.constant(16) : i64
    %206 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %207 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%197, %198, %199, %200, %201, %202, %203, %194, %204, %195, %205, %206, %196, %207) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    %208 = llvm.add %191, %189 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%208 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func internal @k6_map(%209: !llvm.ptr {llvm.noalias}, %210: !llvm.ptr {llvm.noalias}) {
    %211 = llvm.mlir.constant(0) : i64
    %212 = llvm.mlir.constant(16) : i64
    %213 = llvm.mlir.constant(1) : i64
    %214 = llvm.mlir.constant(32) : i64
    %215 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%211 : i64)
  ^bb1(%216: i64):
    %217 = llvm.icmp "slt" %216, %212 : i64
    llvm.cond_br %217, ^bb2, ^bb6
  ^bb2:
    %218 = llvm.mul %216, %212 overflow<nsw,nuw> : i64
    %219 = llvm.mul %216, %214 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%211 : i64)
  ^bb3(%220: i64):
    %221 = llvm.icmp "slt" %220, %214 : i64
    llvm.cond_br %221, ^bb4, ^bb5
  ^bb4:
    %222 = llvm.udiv %220, %212 : i64
    %223 = llvm.mul %222, %215 overflow<nsw,nuw> : i64
    %224 = llvm.add %218, %223 overflow<nsw,nuw> : i64
    %225 = llvm.urem %220, %212 : i64
    %226 = llvm.add %224, %225 overflow<nsw,nuw> : i64
    %227 = llvm.getelementptr inbounds %210[%226] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %228 = llvm.load %227 : !llvm.ptr -> f32
    %229 = llvm.add %219, %220 overflow<nsw,nuw> : i64
    %230 = llvm.getelementptr inbounds %209[%229] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %228, %230 : f32, !llvm.ptr
    %231 = llvm.add %220, %213 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%231 : i64)
  ^bb5:
    %232 = llvm.add %216, %213 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%232 : i64)
  ^bb6:
    llvm.return
  }
  llvm.func internal @k7_matmul(%233: !llvm.ptr {llvm.noalias}, %234: !llvm.ptr {llvm.noalias}, %235: !llvm.ptr {llvm.noalias}) {
    %236 = llvm.mlir.constant(0) : i64
    %237 = llvm.getelementptr inbounds %234[%236] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %238 = llvm.getelementptr inbounds %235[%236] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %239 = llvm.getelementptr inbounds %233[%236] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %240 = llvm.mlir.constant(101 : i32) : i32
    %241 = llvm.mlir.constant(111 : i32) : i32
    %242 = llvm.mlir.constant(111 : i32) : i32
    %243 = llvm.mlir.constant(16) : i64
    %244 = llvm.mlir.constant(32) : i64
    %245 = llvm.mlir.constant(32) : i64
    %246 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %247 = llvm.mlir.constant(32) : i64
    %248 = llvm.mlir.constant(32) : i64
    %249 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %250 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%240, %241, %242, %243, %244, %245, %246, %237, %247, %238, %248, %249, %239, %250) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @kinac_expf(%251: f32) -> f32 {
    %252 = llvm.mlir.constant(-8.700000e+01 : f32) : f32
    %253 = llvm.mlir.constant(8.870000e+01 : f32) : f32
    %254 = llvm.call_intrinsic "llvm.maximum.f32"(%251, %252) : (f32, f32) -> f32
    %255 = llvm.call_intrinsic "llvm.minimum.f32"(%254, %253) : (f32, f32) -> f32
    %256 = llvm.mlir.constant(1.44269502 : f32) : f32
    %257 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %258 = llvm.call_intrinsic "llvm.fma.f32"(%255, %256, %257) : (f32, f32, f32) -> f32
    %259 = llvm.call_intrinsic "llvm.floor.f32"(%258) : (f32) -> f32
    %260 = llvm.mlir.constant(-0.693359375 : f32) : f32
    %261 = llvm.call_intrinsic "llvm.fma.f32"(%259, %260, %255) : (f32, f32, f32) -> f32
    %262 = llvm.mlir.constant(0.000212194442 : f32) : f32
    %263 = llvm.call_intrinsic "llvm.fma.f32"(%259, %262, %261) : (f32, f32, f32) -> f32
    %264 = llvm.mlir.constant(0.000198756912 : f32) : f32
    %265 = llvm.mlir.constant(0.00139819994 : f32) : f32
    %266 = llvm.call_intrinsic "llvm.fma.f32"(%264, %263, %265) : (f32, f32, f32) -> f32
    %267 = llvm.mlir.constant(0.00833345205 : f32) : f32
    %268 = llvm.call_intrinsic "llvm.fma.f32"(%266, %263, %267) : (f32, f32, f32) -> f32
    %269 = llvm.mlir.constant(0.0416657962 : f32) : f32
    %270 = llvm.call_intrinsic "llvm.fma.f32"(%268, %263, %269) : (f32, f32, f32) -> f32
    %271 = llvm.mlir.constant(0.166666657 : f32) : f32
    %272 = llvm.call_intrinsic "llvm.fma.f32"(%270, %263, %271) : (f32, f32, f32) -> f32
    %273 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %274 = llvm.call_intrinsic "llvm.fma.f32"(%272, %263, %273) : (f32, f32, f32) -> f32
    %275 = llvm.fmul %263, %263 : f32
    %276 = llvm.call_intrinsic "llvm.fma.f32"(%274, %275, %263) : (f32, f32, f32) -> f32
    %277 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %278 = llvm.fadd %276, %277 : f32
    %279 = llvm.mlir.constant(0x4B00007E : f32) : f32
    %280 = llvm.fadd %259, %279 : f32
    %281 = llvm.bitcast %280 : f32 to i32
    %282 = llvm.mlir.constant(23 : i32) : i32
    %283 = llvm.shl %281, %282 : i32
    %284 = llvm.bitcast %283 : i32 to f32
    %285 = llvm.fmul %278, %284 : f32
    %286 = llvm.mlir.constant(2.000000e+00 : f32) : f32
    %287 = llvm.fmul %285, %286 : f32
    %288 = llvm.fcmp "olt" %251, %252 : f32
    %289 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %290 = llvm.select %288, %289, %287 : i1, f32
    %291 = llvm.fcmp "ogt" %251, %253 : f32
    %292 = llvm.mlir.constant(0x7f800000 : f32) : f32
    %293 = llvm.select %291, %292, %290 : i1, f32
    llvm.return %293 : f32
  }
  llvm.func @kinac_sgemm(i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64)
}
