; ModuleID = ""
target triple = ""
target datalayout = ""

define internal void @"embed"(ptr %".1", ptr %".2", ptr %".3", ptr %".4", ptr %".5") nounwind
{
.7:
  %".8" = getelementptr inbounds i8, ptr %".4", i64 0
  call ccc void @"k0_gather"(ptr %".8", ptr %".1", ptr %".2", ptr %".5")
  %".10" = getelementptr inbounds i8, ptr %".4", i64 64
  call ccc void @"k1_concat"(ptr %".10", ptr %".8")
  %".12" = getelementptr inbounds i8, ptr %".4", i64 0
  call ccc void @"k2_reduce"(ptr %".12", ptr %".10")
  call ccc void @"k3_map"(ptr %".3", ptr %".12")
  ret void
}

define void @"kinac_call_embed"(ptr %".1") nounwind
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
  call ccc void @"embed"(ptr %".5", ptr %".7", ptr %".9", ptr %".11", ptr %".13")
  ret void
}

define internal void @"k0_gather"(ptr noalias %".1", ptr noalias %".2", ptr noalias %".3", ptr noalias %".4") nounwind
{
.6:
  br label %".7"
.7:
  %".18" = phi  i64 [0, %".6"], [%".72", %".16"]
  %".22" = icmp slt i64 %".18", 2
  br i1 %".22", label %".8", label %".17"
.8:
  %".24" = mul nsw nuw i64 %".18", 3
  %".25" = mul nsw nuw i64 %".18", 12
  br label %".9"
.9:
  %".19" = phi  i64 [0, %".8"], [%".70", %".15"]
  %".27" = icmp slt i64 %".19", 3
  br i1 %".27", label %".10", label %".16"
.10:
  %".29" = add nsw nuw i64 %".24", %".19"
  %".30" = getelementptr inbounds i32, ptr %".3", i64 %".29"
  %".31" = load i32, ptr %".30"
  %".32" = icmp slt i32 %".31", 0
  %".33" = icmp sge i32 %".31", 10
  %".34" = or i1 %".32", %".33"
  %".35" = sext i32 %".31" to i64
  br i1 %".34", label %".11", label %".12"
.11:
  %".37" = getelementptr inbounds i64, ptr %".4", i64 0
  store i64 1, ptr %".37"
  %".39" = getelementptr inbounds i64, ptr %".4", i64 1
  store i64 0, ptr %".39"
  %".41" = getelementptr inbounds i64, ptr %".4", i64 2
  store i64 %".29", ptr %".41"
  %".43" = getelementptr inbounds i64, ptr %".4", i64 3
  store i64 %".35", ptr %".43"
  %".45" = getelementptr inbounds i64, ptr %".4", i64 4
  store i64 10, ptr %".45"
  br label %".12"
.12:
  %".48" = select  i1 %".34", i32 0, i32 %".31"
  %".49" = sext i32 %".48" to i64
  %".50" = mul nsw nuw i64 %".49", 4
  %".51" = mul nsw nuw i64 %".19", 4
  %".52" = add nsw nuw i64 %".25", %".51"
  br label %".13"
.13:
  %".20" = phi  i64 [0, %".12"], [%".68", %".14"]
  %".54" = icmp slt i64 %".20", 4
  br i1 %".54", label %".14", label %".15"
.14:
  %".56" = add nsw nuw i64 %".50", %".20"
  %".57" = getelementptr inbounds i16, ptr %".2", i64 %".56"
  %".58" = load i16, ptr %".57"
  %".59" = zext i16 %".58" to i32
  %".60" = shl i32 %".59", 16
  %".61" = bitcast i32 %".60" to float
  %".62" = add nsw nuw i64 %".52", %".20"
  %".63" = bitcast float %".61" to i32
  %".64" = lshr i32 %".63", 16
  %".65" = trunc i32 %".64" to i16
  %".66" = getelementptr inbounds i16, ptr %".1", i64 %".62"
  store i16 %".65", ptr %".66"
  %".68" = add nsw nuw i64 %".20", 1
  br label %".13", !llvm.loop !1000
.15:
  %".70" = add nsw nuw i64 %".19", 1
  br label %".9", !llvm.loop !1001
.16:
  %".72" = add nsw nuw i64 %".18", 1
  br label %".7", !llvm.loop !1002
.17:
  ret void
}

define internal void @"k1_concat"(ptr noalias %".1", ptr noalias %".2") nounwind
{
.4:
  br label %".5"
.5:
  %".23" = phi  i64 [0, %".4"], [%".60", %".12"]
  %".30" = icmp slt i64 %".23", 2
  br i1 %".30", label %".6", label %".13"
.6:
  %".32" = mul nsw nuw i64 %".23", 12
  %".33" = mul nsw nuw i64 %".23", 24
  br label %".7"
.7:
  %".24" = phi  i64 [0, %".6"], [%".58", %".11"]
  %".35" = icmp slt i64 %".24", 3
  br i1 %".35", label %".8", label %".12"
.8:
  %".37" = mul nsw nuw i64 %".24", 4
  %".38" = add nsw nuw i64 %".32", %".37"
  %".39" = mul nsw nuw i64 %".24", 8
  %".40" = add nsw nuw i64 %".33", %".39"
  br label %".9"
.9:
  %".25" = phi  i64 [0, %".8"], [%".56", %".10"]
  %".42" = icmp slt i64 %".25", 4
  br i1 %".42", label %".10", label %".11"
.10:
  %".44" = add nsw nuw i64 %".38", %".25"
  %".45" = getelementptr inbounds i16, ptr %".2", i64 %".44"
  %".46" = load i16, ptr %".45"
  %".47" = zext i16 %".46" to i32
  %".48" = shl i32 %".47", 16
  %".49" = bitcast i32 %".48" to float
  %".50" = add nsw nuw i64 %".40", %".25"
  %".51" = bitcast float %".49" to i32
  %".52" = lshr i32 %".51", 16
  %".53" = trunc i32 %".52" to i16
  %".54" = getelementptr inbounds i16, ptr %".1", i64 %".50"
  store i16 %".53", ptr %".54"
  %".56" = add nsw nuw i64 %".25", 1
  br label %".9", !llvm.loop !1003
.11:
  %".58" = add nsw nuw i64 %".24", 1
  br label %".7", !llvm.loop !1004
.12:
  %".60" = add nsw nuw i64 %".23", 1
  br label %".5", !llvm.loop !1005
.13:
  br label %".14"
.14:
  %".26" = phi  i64 [0, %".13"], [%".104", %".21"]
  %".63" = icmp slt i64 %".26", 2
  br i1 %".63", label %".15", label %".22"
.15:
  %".65" = mul nsw nuw i64 %".26", 12
  %".66" = mul nsw nuw i64 %".26", 24
  br label %".16"
.16:
  %".27" = phi  i64 [0, %".15"], [%".102", %".20"]
  %".68" = icmp slt i64 %".27", 3
  br i1 %".68", label %".17", label %".21"
.17:
  %".70" = mul nsw nuw i64 %".27", 4
  %".71" = add nsw nuw i64 %".65", %".70"
  %".72" = mul nsw nuw i64 %".27", 8
  %".73" = add nsw nuw i64 %".66", %".72"
  br label %".18"
.18:
  %".28" = phi  i64 [0, %".17"], [%".100", %".19"]
  %".75" = icmp slt i64 %".28", 4
  br i1 %".75", label %".19", label %".20"
.19:
  %".77" = add nsw nuw i64 %".28", 4
  %".78" = add nsw nuw i64 %".71", %".28"
  %".79" = getelementptr inbounds i16, ptr %".2", i64 %".78"
  %".80" = load i16, ptr %".79"
  %".81" = zext i16 %".80" to i32
  %".82" = shl i32 %".81", 16
  %".83" = bitcast i32 %".82" to float
  %".84" = fneg float %".83"
  %".85" = bitcast float %".84" to i32
  %".86" = lshr i32 %".85", 16
  %".87" = and i32 %".86", 1
  %".88" = add i32 %".85", 32767
  %".89" = add i32 %".88", %".87"
  %".90" = and i32 %".89", -65536
  %".91" = bitcast i32 %".90" to float
  %".92" = fcmp uno float %".84", %".84"
  %".93" = select  i1 %".92", float 0x7ff8000000000000, float %".91"
  %".94" = add nsw nuw i64 %".73", %".77"
  %".95" = bitcast float %".93" to i32
  %".96" = lshr i32 %".95", 16
  %".97" = trunc i32 %".96" to i16
  %".98" = getelementptr inbounds i16, ptr %".1", i64 %".94"
  store i16 %".97", ptr %".98"
  %".100" = add nsw nuw i64 %".28", 1
  br label %".18", !llvm.loop !1006
.20:
  %".102" = add nsw nuw i64 %".27", 1
  br label %".16", !llvm.loop !1007
.21:
  %".104" = add nsw nuw i64 %".26", 1
  br label %".14", !llvm.loop !1008
.22:
  ret void
}

define internal void @"k2_reduce"(ptr noalias %".1", ptr noalias %".2") nounwind
{
.4:
  br label %".5"
.5:
  %".14" = phi  i64 [0, %".4"], [%".56", %".12"]
  %".19" = icmp slt i64 %".14", 2
  br i1 %".19", label %".6", label %".13"
.6:
  %".21" = mul nsw nuw i64 %".14", 24
  %".22" = mul nsw nuw i64 %".14", 3
  br label %".7"
.7:
  %".15" = phi  i64 [0, %".6"], [%".54", %".11"]
  %".24" = icmp slt i64 %".15", 3
  br i1 %".24", label %".8", label %".12"
.8:
  %".26" = mul nsw nuw i64 %".15", 8
  %".27" = add nsw nuw i64 %".21", %".26"
  br label %".9"
.9:
  %".16" = phi  i64 [0, %".8"], [%".48", %".10"]
  %".17" = phi  float [             0x0, %".8"], [%".47", %".10"]
  %".29" = icmp slt i64 %".16", 8
  br i1 %".29", label %".10", label %".11"
.10:
  %".31" = add nsw nuw i64 %".27", %".16"
  %".32" = getelementptr inbounds i16, ptr %".2", i64 %".31"
  %".33" = load i16, ptr %".32"
  %".34" = zext i16 %".33" to i32
  %".35" = shl i32 %".34", 16
  %".36" = bitcast i32 %".35" to float
  %".37" = call ccc float @"kinac_expf"(float %".36")
  %".38" = bitcast float %".37" to i32
  %".39" = lshr i32 %".38", 16
  %".40" = and i32 %".39", 1
  %".41" = add i32 %".38", 32767
  %".42" = add i32 %".41", %".40"
  %".43" = and i32 %".42", -65536
  %".44" = bitcast i32 %".43" to float
  %".45" = fcmp uno float %".37", %".37"
  %".46" = select  i1 %".45", float 0x7ff8000000000000, float %".44"
  %".47" = fadd contract reassoc float %".17", %".46"
  %".48" = add nsw nuw i64 %".16", 1
  br label %".9", !llvm.loop !1009
.11:
  %".50" = fdiv contract float %".17", 0x4020000000000000
  %".51" = add nsw nuw i64 %".22", %".15"
  %".52" = getelementptr inbounds float, ptr %".1", i64 %".51"
  store float %".50", ptr %".52"
  %".54" = add nsw nuw i64 %".15", 1
  br label %".7", !llvm.loop !1010
.12:
  %".56" = add nsw nuw i64 %".14", 1
  br label %".5", !llvm.loop !1011
.13:
  ret void
}

define internal void @"k3_map"(ptr noalias %".1", ptr noalias %".2") nounwind
{
.4:
  br label %".5"
.5:
  %".11" = phi  i64 [0, %".4"], [%".36", %".9"]
  %".14" = icmp slt i64 %".11", 2
  br i1 %".14", label %".6", label %".10"
.6:
  %".16" = mul nsw nuw i64 %".11", 3
  br label %".7"
.7:
  %".12" = phi  i64 [0, %".6"], [%".34", %".8"]
  %".18" = icmp slt i64 %".12", 3
  br i1 %".18", label %".8", label %".9"
.8:
  %".20" = add nsw nuw i64 %".16", %".12"
  %".21" = getelementptr inbounds float, ptr %".2", i64 %".20"
  %".22" = load float, ptr %".21"
  %".23" = bitcast float %".22" to i32
  %".24" = lshr i32 %".23", 16
  %".25" = and i32 %".24", 1
  %".26" = add i32 %".23", 32767
  %".27" = add i32 %".26", %".25"
  %".28" = and i32 %".27", -65536
  %".29" = bitcast i32 %".28" to float
  %".30" = fcmp uno float %".22", %".22"
  %".31" = select  i1 %".30", float 0x7ff8000000000000, float %".29"
  %".32" = getelementptr inbounds float, ptr %".1", i64 %".20"
  store float %".31", ptr %".32"
  %".34" = add nsw nuw i64 %".12", 1
  br label %".7", !llvm.loop !1012
.9:
  %".36" = add nsw nuw i64 %".11", 1
  br label %".5", !llvm.loop !1013
.10:
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
!1008 = distinct !{!1008, !999}
!1009 = distinct !{!1009, !999}
!1010 = distinct !{!1010, !999}
!1011 = distinct !{!1011, !999}
!1012 = distinct !{!1012, !999}
!1013 = distinct !{!1013, !999}
!999 = !{!"llvm.loop.interleave.count", i32 1}
