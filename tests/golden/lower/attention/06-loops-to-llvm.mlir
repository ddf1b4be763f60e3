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
    %158 = llvm.getelementptr inbounds %123[%150] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %157, %158 : f32, !llvm.ptr
    %159 = llvm.call_intrinsic "llvm.maximum.f32"(%148, %157) : (f32, f32) -> f32
    %160 = llvm.add %147, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb5(%160, %159 : i64, f32)
  ^bb7:
    llvm.br ^bb8(%125, %135 : i64, f32)
  ^bb8(%161: i64, %162: f32):
    %163 = llvm.icmp "slt" %161, %143 : i64
    llvm.cond_br %163, ^bb9, ^bb10
  ^bb9:
    %164 = llvm.add %145, %161 overflow<nsw,nuw> : i64
    %165 = llvm.getelementptr inbounds %123[%164] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %166 = llvm.load %165 : !llvm.ptr -> f32
    %167 = llvm.fsub %166, %148 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %168 = llvm.call @kinac_expf(%167) : (f32) -> f32
    %169 = llvm.getelementptr inbounds %123[%164] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %168, %169 : f32, !llvm.ptr
    %170 = llvm.fadd %162, %168 {fastmathFlags = #llvm.fastmath<reassoc,contract>} : f32
    %171 = llvm.add %161, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb8(%171, %170 : i64, f32)
  ^bb10:
    %172 = llvm.fdiv %133, %162 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb11(%125 : i64)
  ^bb11(%173: i64):
    %174 = llvm.icmp "slt" %173, %143 : i64
    llvm.cond_br %174, ^bb12, ^bb13
  ^bb12:
    %175 = llvm.add %145, %173 overflow<nsw,nuw> : i64
    %176 = llvm.getelementptr inbounds %123[%175] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %177 = llvm.load %176 : !llvm.ptr -> f32
    %178 = llvm.fmul %177, %172 {fastmathFlags = #llvm.fastmath<contract>} : f32
    %179 = llvm.getelementptr inbounds %123[%175] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %178, %179 : f32, !llvm.ptr
    %180 = llvm.add %173, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb11(%180 : i64)
  ^bb13:
    %181 = llvm.fmul %135, %172 {fastmathFlags = #llvm.fastmath<contract>} : f32
    llvm.br ^bb14(%143 : i64)
  ^bb14(%182: i64):
    %183 = llvm.icmp "slt" %182, %128 : i64
    llvm.cond_br %183, ^bb15, ^bb16
  ^bb15:
    %184 = llvm.add %145, %182 overflow<nsw,nuw> : i64
    %185 = llvm.getelementptr inbounds %123[%184] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %181, %185 : f32, !llvm.ptr
    %186 = llvm.add %182, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb14(%186 : i64)
  ^bb16:
    %187 = llvm.add %139, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%187 : i64)
  ^bb17:
    %188 = llvm.add %136, %127 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%188 : i64)
  ^bb18:
    llvm.return
  }
  llvm.func internal @k5_matmul(%189: !llvm.ptr {llvm.noalias}, %190: !llvm.ptr {llvm.noalias}, %191: !llvm.ptr {llvm.noalias}) {
    %192 = llvm.mlir.constant(0) : i64
    %193 = llvm.mlir.constant(2) : i64
    %194 = llvm.mlir.constant(1) : i64
    %195 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%192 : i64)
  ^bb1(%196: i64):
    %197 = llvm.icmp "slt" %196, %193 : i64
    llvm.cond_br %197, ^bb2, ^bb3
  ^bb2:
    %198 = llvm.mul %196, %195 overflow<nsw,nuw> : i64
    %199 = llvm.getelementptr inbounds %190[%198] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %200 = llvm.getelementptr inbounds %191[%192] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %201 = llvm.getelementptr inbounds %189[%198] : (!llvm.ptr, i64) -> !llvm.ptr, f32
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
    %212 = llvm.mlir.constant(16) : i64
    llvm.call @kinac_sgemm(%202, %203, %204, %205, %206, %207, %208, %199, %209, %200, %210, %211, %201, %212) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    %213 = llvm.add %196, %194 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%213 : i64)
  ^bb3:
    llvm.return
  }
  llvm.func internal @k6_map(%214: !llvm.ptr {llvm.noalias}, %215: !llvm.ptr {llvm.noalias}) {
    %216 = llvm.mlir.constant(0) : i64
    %217 = llvm.mlir.constant(16) : i64
    %218 = llvm.mlir.constant(1) : i64
    %219 = llvm.mlir.constant(32) : i64
    %220 = llvm.mlir.constant(256) : i64
    llvm.br ^bb1(%216 : i64)
  ^bb1(%221: i64):
    %222 = llvm.icmp "slt" %221, %217 : i64
    llvm.cond_br %222, ^bb2, ^bb6
  ^bb2:
    %223 = llvm.mul %221, %217 overflow<nsw,nuw> : i64
    %224 = llvm.mul %221, %219 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%216 : i64)
  ^bb3(%225: i64):
    %226 = llvm.icmp "slt" %225, %219 : i64
    llvm.cond_br %226, ^bb4, ^bb5
  ^bb4:
    %227 = llvm.udiv %225, %217 : i64
    %228 = llvm.mul %227, %220 overflow<nsw,nuw> : i64
    %229 = llvm.add %223, %228 overflow<nsw,nuw> : i64
    %230 = llvm.urem %225, %217 : i64
    %231 = llvm.add %229, %230 overflow<nsw,nuw> : i64
    %232 = llvm.getelementptr inbounds %215[%231] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %233 = llvm.load %232 : !llvm.ptr -> f32
    %234 = llvm.add %224, %225 overflow<nsw,nuw> : i64
    %235 = llvm.getelementptr inbounds %214[%234] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    llvm.store %233, %235 : f32, !llvm.ptr
    %236 = llvm.add %225, %218 overflow<nsw,nuw> : i64
    llvm.br ^bb3(%236 : i64)
  ^bb5:
    %237 = llvm.add %221, %218 overflow<nsw,nuw> : i64
    llvm.br ^bb1(%237 : i64)
  ^bb6:
    llvm.return
  }
  llvm.func internal @k7_matmul(%238: !llvm.ptr {llvm.noalias}, %239: !llvm.ptr {llvm.noalias}, %240: !llvm.ptr {llvm.noalias}) {
    %241 = llvm.mlir.constant(0) : i64
    %242 = llvm.getelementptr inbounds %239[%241] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %243 = llvm.getelementptr inbounds %240[%241] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %244 = llvm.getelementptr inbounds %238[%241] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %245 = llvm.mlir.constant(101 : i32) : i32
    %246 = llvm.mlir.constant(111 : i32) : i32
    %247 = llvm.mlir.constant(111 : i32) : i32
    %248 = llvm.mlir.constant(16) : i64
    %249 = llvm.mlir.constant(32) : i64
    %250 = llvm.mlir.constant(32) : i64
    %251 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %252 = llvm.mlir.constant(32) : i64
    %253 = llvm.mlir.constant(32) : i64
    %254 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %255 = llvm.mlir.constant(32) : i64
    llvm.call @kinac_sgemm(%245, %246, %247, %248, %249, %250, %251, %242, %252, %243, %253, %254, %244, %255) : (i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64) -> ()
    llvm.return
  }
  llvm.func internal @kinac_expf(%256: f32) -> f32 {
    %257 = llvm.mlir.constant(-8.700000e+01 : f32) : f32
    %258 = llvm.mlir.constant(8.870000e+01 : f32) : f32
    %259 = llvm.call_intrinsic "llvm.maximum.f32"(%256, %257) : (f32, f32) -> f32
    %260 = llvm.call_intrinsic "llvm.minimum.f32"(%259, %258) : (f32, f32) -> f32
    %261 = llvm.mlir.constant(1.44269502 : f32) : f32
    %262 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %263 = llvm.call_intrinsic "llvm.fma.f32"(%260, %261, %262) : (f32, f32, f32) -> f32
    %264 = llvm.call_intrinsic "llvm.floor.f32"(%263) : (f32) -> f32
    %265 = llvm.mlir.constant(-0.693359375 : f32) : f32
    %266 = llvm.call_intrinsic "llvm.fma.f32"(%264, %265, %260) : (f32, f32, f32) -> f32
    %267 = llvm.mlir.constant(0.000212194442 : f32) : f32
    %268 = llvm.call_intrinsic "llvm.fma.f32"(%264, %267, %266) : (f32, f32, f32) -> f32
    %269 = llvm.mlir.constant(0.000198756912 : f32) : f32
    %270 = llvm.mlir.constant(0.00139819994 : f32) : f32
    %271 = llvm.call_intrinsic "llvm.fma.f32"(%269, %268, %270) : (f32, f32, f32) -> f32
    %272 = llvm.mlir.constant(0.00833345205 : f32) : f32
    %273 = llvm.call_intrinsic "llvm.fma.f32"(%271, %268, %272) : (f32, f32, f32) -> f32
    %274 = llvm.mlir.constant(0.0416657962 : f32) : f32
    %275 = llvm.call_intrinsic "llvm.fma.f32"(%273, %268, %274) : (f32, f32, f32) -> f32
    %276 = llvm.mlir.constant(0.166666657 : f32) : f32
    %277 = llvm.call_intrinsic "llvm.fma.f32"(%275, %268, %276) : (f32, f32, f32) -> f32
    %278 = llvm.mlir.constant(5.000000e-01 : f32) : f32
    %279 = llvm.call_intrinsic "llvm.fma.f32"(%277, %268, %278) : (f32, f32, f32) -> f32
    %280 = llvm.fmul %268, %268 : f32
    %281 = llvm.call_intrinsic "llvm.fma.f32"(%279, %280, %268) : (f32, f32, f32) -> f32
    %282 = llvm.mlir.constant(1.000000e+00 : f32) : f32
    %283 = llvm.fadd %281, %282 : f32
    %284 = llvm.mlir.constant(0x4B00007E : f32) : f32
    %285 = llvm.fadd %264, %284 : f32
    %286 = llvm.bitcast %285 : f32 to i32
    %287 = llvm.mlir.constant(23 : i32) : i32
    %288 = llvm.shl %286, %287 : i32
    %289 = llvm.bitcast %288 : i32 to f32
    %290 = llvm.fmul %283, %289 : f32
    %291 = llvm.mlir.constant(2.000000e+00 : f32) : f32
    %292 = llvm.fmul %290, %291 : f32
    %293 = llvm.fcmp "olt" %256, %257 : f32
    %294 = llvm.mlir.constant(0.000000e+00 : f32) : f32
    %295 = llvm.select %293, %294, %292 : i1, f32
    %296 = llvm.fcmp "ogt" %256, %258 : f32
    %297 = llvm.mlir.constant(0x7f800000 : f32) : f32
    %298 = llvm.select %296, %297, %295 : i1, f32
    llvm.return %298 : f32
  }
  llvm.func @kinac_sgemm(i32, i32, i32, i64, i64, i64, f32, !llvm.ptr, i64, !llvm.ptr, i64, f32, !llvm.ptr, i64)
}
