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
    llvm.cond_br %137, ^bb2, ^bb18
  ^bb2:
    %138 = llvm.mul %136, %130 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%125 : i64)
  ^bb3(%139: i64):
    %140 = llvm.icmp "slt" %139, %128 : i64
    llvm.cond_br %140, ^bb4, ^bb17
  ^bb4:
    %141 = llvm.add %139, %128 overflow<nsw,nuw> : i64
    %142 = llvm.udiv %141, %128 : i64
    %143 = llvm.mul %142, %128 overflow<nsw,nuw> : i64
    %144 = llvm.mul %139, %128 overflow<nsw,nuw> : i64
    %145 = llvm.add %138, %144 overflow<nsw,nuw> : i64
    %146 = llvm.trunc %139 : i64 to i32
    llvm.br ^bb5(%125, %129 : i64, f32)
  ^bb5(%147: i64, %148: f32):
    %149 = llvm.icmp "slt" %147, %143 : i64
    llvm.cond_br %149, ^bb6, ^bb7
  ^bb6:
    %150 = llvm.add %145, %147 overflow<nsw,nuw> : i64
    %151 = llvm.getelementptr inbounds %124[%150] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %152 = llvm.load %151 : !llvm.ptr -> f32
    %153 = llvm.fmul %152, %134 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %154 = llvm.trunc %147 : i64 to i32
    %155 = llvm.icmp "sge" %146, %154 : i32
    %156 = llvm.select %155, %135, %129 : i1, f32
    %157 = llvm.fadd %153, %156 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %158 = llvm.call_intrinsic "llvm.maximum.f32"(%148, %157) : (f32, f32) -> f32
    %159 = llvm.add %147, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%159, %158 : i64, f32)
  ^bb7:
    llvm.br ^bb8(%125, %135 : i64, f32)
  ^bb8(%160: i64, %161: f32):
    %162 = llvm.icmp "slt" %160, %143 : i64
    llvm.cond_br %162, ^bb9, ^bb10
  ^bb9:
    %163 = llvm.add %145, %160 overflow<nsw,nuw> : i64
    %164 = llvm.getelementptr inbounds %124[%163] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %165 = llvm.load %164 : !llvm.ptr -> f32
    %166 = llvm.fmul %165, %134 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %167 = llvm.trunc %160 : i64 to i32
    %168 = llvm.icmp "sge" %146, %167 : i32
    %169 = llvm.select %168, %135, %129 : i1, f32
    %170 = llvm.fadd %166, %169 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %171 = llvm.fsub %170, %148 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %172 = llvm.call @kinac_expf(%171) : (f32) -> f32
    %173 = llvm.getelementptr inbounds %123[%163] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %172, %173 : f32, !llvm.ptr
    %174 = llvm.fadd %161, %172 {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f32
    %175 = llvm.add %160, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb8(%175, %174 : i64, f32)
  ^bb10:
    %176 = llvm.fdiv %133, %161 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb11(%125 : i64)
  ^bb11(%177: i64):
    %178 = llvm.icmp "slt" %177, %143 : i64
    llvm.cond_br %178, ^bb12, ^bb13
  ^bb12:
    %179 = llvm.add %145, %177 overflow<nsw,nuw> : i64
    %180 = llvm.getelementptr inbounds %123[%179] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %181 = llvm.load %180 : !llvm.ptr -> f32
    %182 = llvm.fmul %181, %176 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %183 = llvm.getelementptr inbounds %123[%179] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %182, %183 : f32, !llvm.ptr
    %184 = llvm.add %177, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb11(%184 : i64)
  ^bb13:
    %185 = llvm.fmul %135, %176 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb14(%143 : i64)
  ^bb14(%186: i64):
    %187 = llvm.icmp "slt" %186, %128 : i64
    llvm.cond_br %187, ^bb15, ^bb16
  ^bb15:
    %188 = llvm.add %145, %186 overflow<nsw,nuw> : i64
    %189 = llvm.getelementptr inbounds %123[%188] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %185, %189 : f32, !llvm.ptr
    %190 = llvm.add %186, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb14(%190 : i64)
  ^bb16:
    %191 = llvm.add %139, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%191 : i64)
  ^bb17:
    %192 = llvm.add %136, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%192 : i64)
  ^bb18:
    llvm.return
  }
  llvm.func internal @k5_matmul(%193: !llvm.ptr {llvm.noalias}, %194: !llvm.ptr {llvm.noalias}, %195: !llvm.ptr {llvm.noalias}) {
    %196 = llvm.mlir.constant(0) : i64
    %197 = llvm.mlir.constant(2) : i64
    %198 = llvm.mlir.constant(1) : i64
    %199 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%196 : i64)
  ^bb1(%200: i64):
    %201 = llvm.icmp "slt" %200, %197 : i64
    llvm.cond_br %201, ^bb2, ^bb3
  ^bb2:
    %202 = llvm.mul %200, %199 overflow<nsw,nuw> : i64
    %203 = llvm.getelementptr inbounds %194[%202] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %204 = llvm.getelementptr inbounds %195[%196] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %205 = llvm.getelementptr inbounds %193[%202] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %206 = llvm.mlir.constant(101 : i32) : i32
    %207 = llvm.mlir.constant(111 : i32) : i32
    %208 = llvm.mlir.constant(111 : i32) : i32
    %209 = llvm.mlir.constant(16) : i64
    %210 = llvm.mlir.constant(16) : i64
    %211 = llvm.mlir.constant(16) : i64
    %212 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %213 = llvm.mlir.constant(16) : i64
    %214 = llvm.mlir.constant(16) : i64
    %215 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %216 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%206, %207, %208, %209, %210, %211, %212, %203, %213, %204, %214, %215, %205, %216) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    %217 = llvm.add %200, %198 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%217 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func internal @k6_map(%218: !llvm.ptr {llvm.noalias}, %219: !llvm.ptr {llvm.noalias}) {
    %220 = llvm.mlir.constant(0) : i64
    %221 = llvm.mlir.constant(16) : i64
    %222 = llvm.mlir.constant(1) : i64
    %223 = llvm.mlir.constant(32) : i64
    %224 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%220 : i64)
  ^bb1(%225: i64):
    %226 = llvm.icmp "slt" %225, %221 : i64
    llvm.cond_br %226, ^bb2, ^bb6
  ^bb2:
    %227 = llvm.mul %225, %221 overflow<nsw,nuw> : i64
    %228 = llvm.mul %225, %223 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%220 : i64)
  ^bb3(%229: i64):
    %230 = llvm.icmp "slt" %229, %223 : i64
    llvm.cond_br %230, ^bb4, ^bb5
  ^bb4:
    %231 = llvm.udiv %229, %221 : i64
    %232 = llvm.mul %231, %224 overflow<nsw,nuw> : i64
    %233 = llvm.add %227, %232 overflow<nsw,nuw> : i64
    %234 = llvm.urem %229, %221 : i64
    %235 = llvm.add %233, %234 overflow<nsw,nuw> : i64
    %236 = llvm.getelementptr inbounds %219[%235] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %237 = llvm.load %236 : !llvm.ptr -> f32
    %238 = llvm.add %228, %229 overflow<nsw,nuw> : i64
    %239 = llvm.getelementptr inbounds %218[%238] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %237, %239 : f32, !llvm.ptr
    %240 = llvm.add %229, %222 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%240 : i64)
  ^bb5:
    %241 = llvm.add %225, %222 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%241 : i64)
  ^bb6:
    llvm.return
  }
  llvm.func internal @k7_matmul(%242: !llvm.ptr {llvm.noalias}, %243: !llvm.ptr {llvm.noalias}, %244: !llvm.ptr {llvm.noalias}) {
    %245 = llvm.mlir.constant(0) : i64
    %246 = llvm.getelementptr inbounds %243[%245] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %247 = llvm.getelementptr inbounds %244[%245] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %248 = llvm.getelementptr inbounds %242[%245] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %249 = llvm.mlir.constant(101 : i32) : i32
    %250 = llvm.mlir.constant(111 : i32) : i32
    %251 = llvm.mlir.constant(111 : i32) : i32
    %252 = llvm.mlir.constant(16) : i64
    %253 = llvm.mlir.constant(32) : i64
    %254 = llvm.mlir.constant(32) : i64
    %255 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %256 = llvm.mlir.constant(32) : i64
    %257 = llvm.mlir.constant(32) : i64
    %258 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %259 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%249, %250, %251, %252, %253, %254, %255, %246, %256, %247, %257, %258, %248, %259) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @kinac_expf(%260: f32) -> f32 {
    %261 = llvm.mlir.constant(-8.700000e+01 : f32) : f32
    %262 = llvm.mlir.constant(8.870000e+01 : f32) : f32
    %263 = llvm.call_intrinsic "llvm.maximum.f32"(%260, %261) : (f32, f32) -> f32
    %264 = llvm.call_intrinsic "llvm.minimum.f32"(%263, %262) : (f32, f32) -> f32
    %265 = llvm.mlir.constant(1.44269502 : f32) : f32
    %266 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %267 = llvm.call_intrinsic "llvm.fma.f32"(%264, %265, %266) : (f32, f32, f32) -> f32
    %268 = llvm.call_intrinsic "llvm.floor.f32"(%267) : (f32) -> f32
    %269 = llvm.mlir.constant(-0.693359375 : f32) : f32
    %270 = llvm.call_intrinsic "llvm.fma.f32"(%268, %269, %264) : (f32, f32, f32) -> f32
    %271 = llvm.mlir.constant(0.000212194442 : f32) : f32
    %272 = llvm.call_intrinsic "llvm.fma.f32"(%268, %271, %270) : (f32, f32, f32) -> f32
    %273 = llvm.mlir.constant(0.000198756912 : f32) : f32
    %274 = llvm.mlir.constant(0.00139819994 : f32) : f32
    %275 = llvm.call_intrinsic "llvm.fma.f32"(%273, %272, %274) : (f32, f32, f32) -> f32
    %276 = llvm.mlir.constant(0.00833345205 : f32) : f32
    %277 = llvm.call_intrinsic "llvm.fma.f32"(%275, %272, %276) : (f32, f32, f32) -> f32
    %278 = llvm.mlir.constant(0.0416657962 : f32) : f32
    %279 = llvm.call_intrinsic "llvm.fma.f32"(%277, %272, %278) : (f32, f32, f32) -> f32
    %280 = llvm.mlir.constant(0.166666657 : f32) : f32
    %281 = llvm.call_intrinsic "llvm.fma.f32"(%279, %272, %280) : (f32, f32, f32) -> f32
    %282 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %283 = llvm.call_intrinsic "llvm.fma.f32"(%281, %272, %282) : (f32, f32, f32) -> f32
    %284 = llvm.fmul %272, %272 : f32
    %285 = llvm.call_intrinsic "llvm.fma.f32"(%283, %284, %272) : (f32, f32, f32) -> f32
    %286 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %287 = llvm.fadd %285, %286 : f32
    %288 = llvm.mlir.constant(0x4B00007E : f32) : f32
    %289 = llvm.fadd %268, %288 : f32
    %290 = llvm.bitcast %289 : f32 to i32
    %291 = llvm.mlir.constant(23 : i32) : i32
    %292 = llvm.shl %290, %291 : i32
    %293 = llvm.bitcast %292 : i32 to f32
    %294 = llvm.fmul %287, %293 : f32
    %295 = llvm.mlir.constant(2.000000e+00 : f32) : f32
    %296 = llvm.fmul %294, %295 : f32
    %297 = llvm.fcmp "olt" %260, %261 : f32
    %298 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %299 = llvm.select %297, %298, %296 : i1, f32
    %300 = llvm.fcmp "ogt" %260, %262 : f32
    %301 = llvm.mlir.constant(0x7f800000 : f32) : f32
    %302 = llvm.select %300, %301, %299 : i1, f32
    llvm.return %302 : f32
  }
  llvm.func @kinac_sgemm(i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64)
}
