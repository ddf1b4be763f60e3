; ModuleID = ""
target triple = ""
target datalayout = ""

define internal void @"attention"(ptr %".1", ptr %".2", ptr %".3", ptr %".4", ptr %".5", ptr %".6", ptr %".7", ptr %".8") nounwind
{
.10:
  %".11" = getelementptr inbounds i8, ptr %".7", i64 0
  call ccc void @"k0_matmul"(ptr %".11", ptr %".1", ptr %".2")
  %".13" = getelementptr inbounds i8, ptr %".7", i64 2048
  call ccc void @"k1_matmul"(ptr %".13", ptr %".1", ptr %".3")
  %".15" = getelementptr inbounds i8, ptr %".7", i64 3072
  call ccc void @"k2_matmul"(ptr %".15", ptr %".1", ptr %".4")
  %".17" = getelementptr inbounds i8, ptr %".7", i64 4096
  call ccc void @"k3_matmul"(ptr %".17", ptr %".13", ptr %".11")
  %".19" = getelementptr inbounds i8, ptr %".7", i64 0
  call ccc void @"k4_softmax"(ptr %".19", ptr %".17")
  %".21" = getelementptr inbounds i8, ptr %".7", i64 4096
  call ccc void @"k5_matmul"(ptr %".21", ptr %".19", ptr %".15")
  call ccc void @"k7_matmul"(ptr %".6", ptr %".21", ptr %".5")
  ret void
}

define void @"kinac_call_attention"(ptr %".1") nounwind
{
.3:
  %".4" = getelementptr inbounds ptr, ptr %".1", i64 0
  %".5" = load ptr, ptr %".4"
  %".6" = getelementptr inbounds ptr, ptr %".1", i64 1
  %".7" = load ptr, ptr %".6"
  %".8" = getelementptr inbounds ptr, ptr %".1", i64 2
  %".9" = load ptr, ptr %".8"
  %".10" = getelementptr inbounds ptr, ptr %".1", i64 3
  %".11" = load ptr, ptr %".10"
  %".12" = getelementptr inbounds ptr, ptr %".1", i64 4
  %".13" = load ptr, ptr %".12"
  %".14" = getelementptr inbounds ptr, ptr %".1", i64 5
  %".15" = load ptr, ptr %".14"
  %".16" = getelementptr inbounds ptr, ptr %".1", i64 6
  %".17" = load ptr, ptr %".16"
  %".18" = getelementptr inbounds ptr, ptr %".1", i64 7
  %".19" = load ptr, ptr %".18"
  call ccc void @"attention"(ptr %".5", ptr %".7", ptr %".9", ptr %".11", ptr %".13", ptr %".15", ptr %".17", ptr %".19")
  ret void
}

define internal void @"k0_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  %".6" = getelementptr inbounds float, ptr %".2", i64 0
  %".7" = getelementptr inbounds float, ptr %".3", i64 0
  %".8" = getelementptr inbounds float, ptr %".1", i64 0
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 111, i64 16, i64 32, i64 32, float 0x3ff0000000000000, ptr %".6", i64 32, ptr %".7", i64 32, float              0x0, ptr %".8", i64 32)
  ret void
}

define internal void @"k1_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  %".6" = getelementptr inbounds float, ptr %".2", i64 0
  %".7" = getelementptr inbounds float, ptr %".3", i64 0
  %".8" = getelementptr inbounds float, ptr %".1", i64 0
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 111, i64 16, i64 16, i64 32, float 0x3ff0000000000000, ptr %".6", i64 32, ptr %".7", i64 16, float              0x0, ptr %".8", i64 16)
  ret void
}

define internal void @"k2_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  %".6" = getelementptr inbounds float, ptr %".2", i64 0
  %".7" = getelementptr inbounds float, ptr %".3", i64 0
  %".8" = getelementptr inbounds float, ptr %".1", i64 0
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 111, i64 16, i64 16, i64 32, float 0x3ff0000000000000, ptr %".6", i64 32, ptr %".7", i64 16, float              0x0, ptr %".8", i64 16)
  ret void
}

define internal void @"k3_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  br label %".6"
.6:
  %".9" = phi  i64 [0, %".5"], [%".19", %".7"]
  %".11" = icmp slt i64 %".9", 2
  br i1 %".11", label %".7", label %".8"
.7:
  %".13" = mul nsw nuw i64 %".9", 16
  %".14" = mul nsw nuw i64 %".9", 256
  %".15" = getelementptr inbounds float, ptr %".3", i64 %".13"
  %".16" = getelementptr inbounds float, ptr %".2", i64 0
  %".17" = getelementptr inbounds float, ptr %".1", i64 %".14"
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 112, i64 16, i64 16, i64 16, float 0x3ff0000000000000, ptr %".15", i64 32, ptr %".16", i64 16, float              0x0, ptr %".17", i64 16)
  %".19" = add nsw nuw i64 %".9", 1
  br label %".6", !llvm.loop !1000
.8:
  ret void
}

define internal void @"k4_softmax"(ptr noalias %".1", ptr noalias %".2") nounwind
{
.4:
  %".31" = call float @"llvm.sqrt.f32"(float 0x4030000000000000)
  %".32" = fdiv contract float 0x3ff0000000000000, %".31"
  br label %".5"
.5:
  %".23" = phi  i64 [0, %".4"], [%".98", %".21"]
  %".34" = icmp slt i64 %".23", 2
  br i1 %".34", label %".6", label %".22"
.6:
  %".36" = mul nsw nuw i64 %".23", 256
  br label %".7"
.7:
  %".24" = phi  i64 [0, %".6"], [%".96", %".20"]
  %".38" = icmp slt i64 %".24", 16
  br i1 %".38", label %".8", label %".21"
.8:
  %".40" = add nsw nuw i64 %".24", 16
  %".41" = udiv i64 %".40", 16
  %".42" = mul nsw nuw i64 %".41", 16
  %".43" = mul nsw nuw i64 %".24", 16
  %".44" = add nsw nuw i64 %".36", %".43"
  %".45" = trunc i64 %".24" to i32
  br label %".9"
.9:
  %".25" = phi  i64 [0, %".8"], [%".60", %".10"]
  %".26" = phi  float [0xfff0000000000000, %".8"], [%".59", %".10"]
  %".47" = icmp slt i64 %".25", %".42"
  br i1 %".47", label %".10", label %".11"
.10:
  %".49" = add nsw nuw i64 %".44", %".25"
  %".50" = getelementptr inbounds float, ptr %".2", i64 %".49"
  %".51" = load float, ptr %".50"
  %".52" = fmul contract float %".51", %".32"
  %".53" = trunc i64 %".25" to i32
  %".54" = icmp sge i32 %".45", %".53"
  %".55" = select  i1 %".54", float              0x0, float 0xfff0000000000000
  %".56" = fadd contract float %".52", %".55"
  %".57" = getelementptr inbounds float, ptr %".1", i64 %".49"
  store float %".56", ptr %".57"
  %".59" = call float @"llvm.maximum.f32"(float %".26", float %".56")
  %".60" = add nsw nuw i64 %".25", 1
  br label %".9", !llvm.loop !1001
.11:
  br label %".12"
.12:
  %".27" = phi  i64 [0, %".11"], [%".73", %".13"]
  %".28" = phi  float [             0x0, %".11"], [%".72", %".13"]
  %".63" = icmp slt i64 %".27", %".42"
  br i1 %".63", label %".13", label %".14"
.13:
  %".65" = add nsw nuw i64 %".44", %".27"
  %".66" = getelementptr inbounds float, ptr %".1", i64 %".65"
  %".67" = load float, ptr %".66"
  %".68" = fsub contract float %".67", %".26"
  %".69" = call ccc float @"kinac_expf"(float %".68")
  %".70" = getelementptr inbounds float, ptr %".1", i64 %".65"
  store float %".69", ptr %".70"
  %".72" = fadd contract reassoc float %".28", %".69"
  %".73" = add nsw nuw i64 %".27", 1
  br label %".12", !llvm.loop !1002
.14:
  %".75" = fdiv contract float 0x3ff0000000000000, %".28"
  br label %".15"
.15:
  %".29" = phi  i64 [0, %".14"], [%".85", %".16"]
  %".77" = icmp slt i64 %".29", %".42"
  br i1 %".77", label %".16", label %".17"
.16:
  %".79" = add nsw nuw i64 %".44", %".29"
  %".80" = getelementptr inbounds float, ptr %".1", i64 %".79"
  %".81" = load float, ptr %".80"
  %".82" = fmul contract float %".81", %".75"
  %".83" = getelementptr inbounds float, ptr %".1", i64 %".79"
  store float %".82", ptr %".83"
  %".85" = add nsw nuw i64 %".29", 1
  br label %".15", !llvm.loop !1003
.17:
  %".87" = fmul contract float              0x0, %".75"
  br label %".18"
.18:
  %".30" = phi  i64 [%".42", %".17"], [%".94", %".19"]
  %".89" = icmp slt i64 %".30", 16
  br i1 %".89", label %".19", label %".20"
.19:
  %".91" = add nsw nuw i64 %".44", %".30"
  %".92" = getelementptr inbounds float, ptr %".1", i64 %".91"
  store float %".87", ptr %".92"
  %".94" = add nsw nuw i64 %".30", 1
  br label %".18", !llvm.loop !1004
.20:
  %".96" = add nsw nuw i64 %".24", 1
  br label %".7", !llvm.loop !1005
.21:
  %".98" = add nsw nuw i64 %".23", 1
  br label %".5", !llvm.loop !1006
.22:
  ret void
}

define internal void @"k5_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  br label %".6"
.6:
  %".9" = phi  i64 [0, %".5"], [%".19", %".7"]
  %".11" = icmp slt i64 %".9", 2
  br i1 %".11", label %".7", label %".8"
.7:
  %".13" = mul nsw nuw i64 %".9", 256
  %".14" = mul nsw nuw i64 %".9", 16
  %".15" = getelementptr inbounds float, ptr %".2", i64 %".13"
  %".16" = getelementptr inbounds float, ptr %".3", i64 0
  %".17" = getelementptr inbounds float, ptr %".1", i64 %".14"
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 111, i64 16, i64 16, i64 16, float 0x3ff0000000000000, ptr %".15", i64 16, ptr %".16", i64 16, float              0x0, ptr %".17", i64 32)
  %".19" = add nsw nuw i64 %".9", 1
  br label %".6", !llvm.loop !1007
.8:
  ret void
}

define internal void @"k7_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  %".6" = getelementptr inbounds float, ptr %".2", i64 0
  %".7" = getelementptr inbounds float, ptr %".3", i64 0
  %".8" = getelementptr inbounds float, ptr %".1", i64 0
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 111, i64 16, i64 32, i64 32, float 0x3ff0000000000000, ptr %".6", i64 32, ptr %".7", i64 32, float              0x0, ptr %".8", i64 32)
  ret void
}

define internal float @"kinac_expf"(float %".1") nounwind
{
.3:
  %".4" = call float @"llvm.maximum.f32"(float %".1", float 0xc05a000000000000)
  %".5" = call float @"llvm.minimum.f32"(float %".4", float 0x4056300000000000)
  %".6" = call float @"llvm.fma.f32"(float %".5", float 0x3ff7154760000000, float 0x3fe0000000000000)
  %".7" = call float @"llvm.floor.f32"(float %".6")
  %".8" = call float @"llvm.fma.f32"(float %".7", float 0xbfe6300000000000, float %".5")
  %".9" = call float @"llvm.fma.f32"(float %".7", float 0x3f2bd01060000000, float %".8")
  %".10" = call float @"llvm.fma.f32"(float 0x3f2a0d2ce0000000, float %".9", float 0x3f56e879c0000000)
  %".11" = call float @"llvm.fma.f32"(float %".10", float %".9", float 0x3f81112100000000)
  %".12" = call float @"llvm.fma.f32"(float %".11", float %".9", float 0x3fa5553820000000)
  %".13" = call float @"llvm.fma.f32"(float %".12", float %".9", float 0x3fc5555540000000)
  %".14" = call float @"llvm.fma.f32"(float %".13", float %".9", float 0x3fe0000000000000)
  %".15" = fmul float %".9", %".9"
  %".16" = call float @"llvm.fma.f32"(float %".14", float %".15", float %".9")
  %".17" = fadd float %".16", 0x3ff0000000000000
  %".18" = fcmp olt float %".7", 0xc05f400000000000
  %".19" = select  i1 %".18", float 0x4050000000000000, float              0x0
  %".20" = fadd float %".7", %".19"
  %".21" = fadd float %".20", 0x4160000fc0000000
  %".22" = bitcast float %".21" to i32
  %".23" = shl i32 %".22", 23
  %".24" = bitcast i32 %".23" to float
  %".25" = fmul float %".17", %".24"
  %".26" = select  i1 %".18", float 0x3c00000000000000, float 0x4000000000000000
  %".27" = fmul float %".25", %".26"
  %".28" = fcmp olt float %".1", 0xc05a000000000000
  %".29" = select  i1 %".28", float              0x0, float %".27"
  %".30" = fcmp ogt float %".1", 0x4056300000000000
  %".31" = select  i1 %".30", float 0x7ff0000000000000, float %".29"
  ret float %".31"
}

declare void @"kinac_sgemm"(i32 %".1", i32 %".2", i32 %".3", i64 %".4", i64 %".5", i64 %".6", float %".7", ptr %".8", i64 %".9", ptr %".10", i64 %".11", float %".12", ptr %".13", i64 %".14")

declare float @"llvm.sqrt.f32"(float %".1")

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.minimum.f32"(float %".1", float %".2")

declare float @"llvm.fma.f32"(float %".1", float %".2", float %".3")

declare float @"llvm.floor.f32"(float %".1")

!1000 = distinct !{!1000, !999}
!1001 = distinct !{!1001, !999}
!1002 = distinct !{!1002, !999}
!1003 = distinct !{!1003, !999}
!1004 = distinct !{!1004, !999}
!1005 = distinct !{!1005, !999}
!1006 = distinct !{!1006, !999}
!1007 = distinct !{!1007, !999}
!999 = !{!"llvm.loop.interleave.count", i32 1}
