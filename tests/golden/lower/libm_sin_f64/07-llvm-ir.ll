; ModuleID = ""
target triple = ""
target datalayout = ""

define internal void @"sin_f64"(ptr %".1", ptr %".2", ptr %".3", ptr %".4") nounwind
{
.6:
  call ccc void @"k0_map"(ptr %".2", ptr %".1")
  ret void
}

define void @"kinac_call_sin_f64"(ptr %".1") nounwind
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
  call ccc void @"sin_f64"(ptr %".5", ptr %".7", ptr %".9", ptr %".11")
  ret void
}

define internal void @"k0_map"(ptr noalias %".1", ptr noalias %".2") nounwind
{
.4:
  br label %".5"
.5:
  %".8" = phi  i64 [0, %".4"], [%".17", %".6"]
  %".10" = icmp slt i64 %".8", 8
  br i1 %".10", label %".6", label %".7"
.6:
  %".12" = getelementptr inbounds double, ptr %".2", i64 %".8"
  %".13" = load double, ptr %".12"
  %".14" = call ccc double @"sin"(double %".13")
  %".15" = getelementptr inbounds double, ptr %".1", i64 %".8"
  store double %".14", ptr %".15"
  %".17" = add nsw nuw i64 %".8", 1
  br label %".5", !llvm.loop !1000
.7:
  ret void
}

declare double @"sin"(double %".1")

!1000 = distinct !{!1000, !999}
!999 = !{!"llvm.loop.interleave.count", i32 1}
