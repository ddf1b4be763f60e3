; ModuleID = ""
target triple = ""
target datalayout = ""

define internal void @"mlp"(ptr %".1", ptr %".2", ptr %".3", ptr %".4", ptr %".5", ptr %".6", ptr %".7", ptr %".8") nounwind
{
.10:
  %".11" = getelementptr inbounds i8, ptr %".7", i64 0
  call ccc void @"k0_matmul"(ptr %".11", ptr %".1", ptr %".2")
  %".13" = getelementptr inbounds i8, ptr %".7", i64 2048
  call ccc void @"k1_map"(ptr %".13", ptr %".11", ptr %".3")
  %".15" = getelementptr inbounds i8, ptr %".7", i64 0
  call ccc void @"k2_matmul"(ptr %".15", ptr %".13", ptr %".4")
  call ccc void @"k3_map"(ptr %".6", ptr %".15", ptr %".5")
  ret void
}

define void @"kinac_call_mlp"(ptr %".1") nounwind
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
  call ccc void @"mlp"(ptr %".5", ptr %".7", ptr %".9", ptr %".11", ptr %".13", ptr %".15", ptr %".17", ptr %".19")
  ret void
}

define internal void @"k0_matmul"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  %".6" = getelementptr inbounds float, ptr %".2", i64 0
  %".7" = getelementptr inbounds float, ptr %".3", i64 0
  %".8" = getelementptr inbounds float, ptr %".1", i64 0
  call ccc void @"kinac_sgemm"(i32 101, i32 111, i32 111, i64 16, i64 32, i64 16, float 0x3ff0000000000000, ptr %".6", i64 16, ptr %".7", i64 32, float              0x0, ptr %".8", i64 32)
  ret void
}

define internal void @"k1_map"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  br label %".6"
.6:
  %".15" = phi  i64 [0, %".5"], [%".47", %".13"]
  %".19" = icmp slt i64 %".15", 2
  br i1 %".19", label %".7", label %".14"
.7:
  %".21" = mul nsw nuw i64 %".15", 256
  br label %".8"
.8:
  %".16" = phi  i64 [0, %".7"], [%".45", %".12"]
  %".23" = icmp slt i64 %".16", 8
  br i1 %".23", label %".9", label %".13"
.9:
  %".25" = mul nsw nuw i64 %".16", 32
  %".26" = add nsw nuw i64 %".21", %".25"
  br label %".10"
.10:
  %".17" = phi  i64 [0, %".9"], [%".43", %".11"]
  %".28" = icmp slt i64 %".17", 32
  br i1 %".28", label %".11", label %".12"
.11:
  %".30" = add nsw nuw i64 %".26", %".17"
  %".31" = getelementptr inbounds float, ptr %".2", i64 %".30"
  %".32" = load float, ptr %".31"
  %".33" = getelementptr inbounds float, ptr %".3", i64 %".17"
  %".34" = load float, ptr %".33"
  %".35" = fadd contract float %".32", %".34"
  %".36" = fmul contract float %".35", 0x3fe0000000000000
  %".37" = fmul contract float %".35", 0x3fe6a09e60000000
  %".38" = call ccc float @"kinac_erff"(float %".37")
  %".39" = fadd contract float 0x3ff0000000000000, %".38"
  %".40" = fmul contract float %".36", %".39"
  %".41" = getelementptr inbounds float, ptr %".1", i64 %".30"
  store float %".40", ptr %".41"
  %".43" = add nsw nuw i64 %".17", 1
  br label %".10", !llvm.loop !1000
.12:
  %".45" = add nsw nuw i64 %".16", 1
  br label %".8", !llvm.loop !1001
.13:
  %".47" = add nsw nuw i64 %".15", 1
  br label %".6", !llvm.loop !1002
.14:
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

define internal void @"k3_map"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3") nounwind
{
.5:
  br label %".6"
.6:
  %".15" = phi  i64 [0, %".5"], [%".42", %".13"]
  %".19" = icmp slt i64 %".15", 2
  br i1 %".19", label %".7", label %".14"
.7:
  %".21" = mul nsw nuw i64 %".15", 128
  br label %".8"
.8:
  %".16" = phi  i64 [0, %".7"], [%".40", %".12"]
  %".23" = icmp slt i64 %".16", 8
  br i1 %".23", label %".9", label %".13"
.9:
  %".25" = mul nsw nuw i64 %".16", 16
  %".26" = add nsw nuw i64 %".21", %".25"
  br label %".10"
.10:
  %".17" = phi  i64 [0, %".9"], [%".38", %".11"]
  %".28" = icmp slt i64 %".17", 16
  br i1 %".28", label %".11", label %".12"
.11:
  %".30" = add nsw nuw i64 %".26", %".17"
  %".31" = getelementptr inbounds float, ptr %".2", i64 %".30"
  %".32" = load float, ptr %".31"
  %".33" = getelementptr inbounds float, ptr %".3", i64 %".17"
  %".34" = load float, ptr %".33"
  %".35" = fadd contract float %".32", %".34"
  %".36" = getelementptr inbounds float, ptr %".1", i64 %".30"
  store float %".35", ptr %".36"
  %".38" = add nsw nuw i64 %".17", 1
  br label %".10", !llvm.loop !1003
.12:
  %".40" = add nsw nuw i64 %".16", 1
  br label %".8", !llvm.loop !1004
.13:
  %".42" = add nsw nuw i64 %".15", 1
  br label %".6", !llvm.loop !1005
.14:
  ret void
}

define internal float @"kinac_erff"(float %".1") nounwind
{
.3:
  %".4" = call float @"llvm.maximum.f32"(float %".1", float 0xc010000000000000)
  %".5" = call float @"llvm.minimum.f32"(float %".4", float 0x4010000000000000)
  %".6" = fmul float %".5", %".5"
  %".7" = call float @"llvm.fma.f32"(float 0xbdf2bbe160000000, float %".6", float 0x3e5dbffdc0000000)
  %".8" = call float @"llvm.fma.f32"(float %".7", float %".6", float 0xbec19fea20000000)
  %".9" = call float @"llvm.fma.f32"(float %".8", float %".6", float 0xbf0dd85a40000000)
  %".10" = call float @"llvm.fma.f32"(float %".9", float %".6", float 0xbf48158c60000000)
  %".11" = call float @"llvm.fma.f32"(float %".10", float %".6", float 0xbf68343ec0000000)
  %".12" = call float @"llvm.fma.f32"(float %".11", float %".6", float 0xbf907b7a80000000)
  %".13" = fmul float %".5", %".12"
  %".14" = call float @"llvm.fma.f32"(float 0xbeee8c19a0000000, float %".6", float 0xbf2bf7a520000000)
  %".15" = call float @"llvm.fma.f32"(float %".14", float %".6", float 0xbf5b9249c0000000)
  %".16" = call float @"llvm.fma.f32"(float %".15", float %".6", float 0xbf7e337f00000000)
  %".17" = call float @"llvm.fma.f32"(float %".16", float %".6", float 0xbf8d36d4e0000000)
  %".18" = fdiv float %".13", %".17"
  ret float %".18"
}

declare void @"kinac_sgemm"(i32 %".1", i32 %".2", i32 %".3", i64 %".4", i64 %".5", i64 %".6", float %".7", ptr %".8", i64 %".9", ptr %".10", i64 %".11", float %".12", ptr %".13", i64 %".14")

declare float @"llvm.maximum.f32"(float %".1", float %".2")

declare float @"llvm.minimum.f32"(float %".1", float %".2")

declare float @"llvm.fma.f32"(float %".1", float %".2", float %".3")

!1000 = distinct !{!1000, !999}
!1001 = distinct !{!1001, !999}
!1002 = distinct !{!1002, !999}
!1003 = distinct !{!1003, !999}
!1004 = distinct !{!1004, !999}
!1005 = distinct !{!1005, !999}
!999 = !{!"llvm.loop.interleave.count", i32 1}
