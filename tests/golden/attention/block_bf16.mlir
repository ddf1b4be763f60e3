%22 = "kina.kernel"(%14, %10, %18) <{kind = "attention", impl = "flash", sym = "k7_attention"}> ({
^bb0(%23: tensor<1x40x64xbf16>, %24: tensor<1x40x128xbf16>, %25: tensor<1x40x64xbf16>):
%26 = kina.reshape %24 : tensor<1x40x128xbf16> -> tensor<1x40x2x64xbf16>
%27 = kina.transpose %26 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x40x2x64xbf16> -> tensor<1x2x40x64xbf16>
%28 = kina.reshape %23 : tensor<1x40x64xbf16> -> tensor<1x40x1x64xbf16>
%29 = kina.transpose %28 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x40x1x64xbf16> -> tensor<1x1x40x64xbf16>
%30 = kina.repeat_interleave %29 {axis = 1 : i64, repeats = 2 : i64} : tensor<1x1x40x64xbf16> -> tensor<1x2x40x64xbf16>
%31 = kina.transpose %30 {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x40x64xbf16> -> tensor<1x2x64x40xbf16>
%32 = kina.matmul %27, %31 {impl = "blas"} : tensor<1x2x40x64xbf16>, tensor<1x2x64x40xbf16> -> tensor<1x2x40x40xbf16>
%33 = kina.const {value = 1.250000e-01 : f64} : tensor<bf16>
%34 = kina.mul %32, %33 : tensor<1x2x40x40xbf16>, tensor<bf16> -> tensor<1x2x40x40xbf16>
%35 = kina.iota {axis = 1 : i64} : tensor<40x40xi32>
%36 = kina.iota {axis = 0 : i64} : tensor<40x40xi32>
%37 = kina.gt %35, %36 : tensor<40x40xi32>, tensor<40x40xi32> -> tensor<40x40xi1>
%38 = kina.full {value = 0xfff0000000000000 : f64} : tensor<40x40xf32>
%39 = kina.full {value = 0.000000e+00 : f64} : tensor<40x40xf32>
%40 = kina.where %37, %38, %39 : tensor<40x40xi1>, tensor<40x40xf32>, tensor<40x40xf32> -> tensor<40x40xf32>
%41 = kina.cast %40 : tensor<40x40xf32> -> tensor<40x40xbf16>
%42 = kina.add %34, %41 : tensor<1x2x40x40xbf16>, tensor<40x40xbf16> -> tensor<1x2x40x40xbf16>
%43 = kina.softmax %42 {axis = 3 : i64} : tensor<1x2x40x40xbf16>
%44 = kina.reshape %25 : tensor<1x40x64xbf16> -> tensor<1x40x1x64xbf16>
%45 = kina.transpose %44 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x40x1x64xbf16> -> tensor<1x1x40x64xbf16>
%46 = kina.repeat_interleave %45 {axis = 1 : i64, repeats = 2 : i64} : tensor<1x1x40x64xbf16> -> tensor<1x2x40x64xbf16>
%47 = kina.matmul %43, %46 {impl = "blas"} : tensor<1x2x40x40xbf16>, tensor<1x2x40x64xbf16> -> tensor<1x2x40x64xbf16>
%48 = kina.transpose %47 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x40x64xbf16> -> tensor<1x40x2x64xbf16>
%49 = kina.reshape %48 : tensor<1x40x2x64xbf16> -> tensor<1x40x128xbf16>
kina.yield %49 : tensor<1x40x128xbf16>
}) {gpu = "kernel attn_bf16_d64_m64n64_eb4509a356 grid=1 block=128 vec=1 flash 64x64 grid 1x2x1 smem 40960"} : (tensor<1x40x64xbf16>, tensor<1x40x128xbf16>, tensor<1x40x64xbf16>) -> tensor<1x40x128xbf16>
