builtin.module {
  func.func @mlp(%x: tensor<4096x2048xbf16>, %wn: tensor<2048xbf16>, %wg: tensor<2048x5632xbf16>, %wu: tensor<2048x5632xbf16>, %wd: tensor<5632x2048xbf16>) -> tensor<4096x2048xbf16> {
    %0 = "kina.kernel"(%x) <{kind = "reduce", impl = "loops", sym = "k0_reduce"}> ({
    ^bb0(%1: tensor<4096x2048xbf16>):
      %2 = kina.square %1 : tensor<4096x2048xbf16>
      %3 = kina.reduce_mean %2 {axis = 1 : i64, keepdims = 1 : i64} : tensor<4096x2048xbf16> -> tensor<4096x1xbf16>
      kina.yield %3 : tensor<4096x1xbf16>
    }) : (tensor<4096x2048xbf16>) -> tensor<4096x1xbf16>
    %4 = "kina.kernel"(%wn, %x, %0) <{kind = "map", impl = "loops", sym = "k1_map"}> ({
    ^bb0(%5: tensor<2048xbf16>, %6: tensor<4096x2048xbf16>, %7: tensor<4096x1xbf16>):
      %8 = kina.const {value = 1.000000e-06 : f64} : tensor<bf16>
      %9 = kina.add %7, %8 : tensor<4096x1xbf16>, tensor<bf16> -> tensor<4096x1xbf16>
      %10 = kina.sqrt %9 : tensor<4096x1xbf16>
      %11 = kina.div %6, %10 : tensor<4096x2048xbf16>, tensor<4096x1xbf16> -> tensor<4096x2048xbf16>
      %12 = kina.mul %11, %5 : tensor<4096x2048xbf16>, tensor<2048xbf16> -> tensor<4096x2048xbf16>
      kina.yield %12 : tensor<4096x2048xbf16>
    }) : (tensor<2048xbf16>, tensor<4096x2048xbf16>, tensor<4096x1xbf16>) -> tensor<4096x2048xbf16>
    %13 = "kina.kernel"(%4, %wg) <{kind = "matmul", impl = "blas", sym = "k2_matmul_c0"}> ({
    ^bb0(%14: tensor<4096x2048xbf16>, %15: tensor<2048x5632xbf16>):
      %16 = kina.slice %14 {axis = 0 : i64, start = 0 : i64, stop = 1024 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %17 = kina.matmul %16, %15 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %17 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %18 = "kina.kernel"(%4, %wu) <{kind = "matmul", impl = "blas", sym = "k3_matmul_c0"}> ({
    ^bb0(%19: tensor<4096x2048xbf16>, %20: tensor<2048x5632xbf16>):
      %21 = kina.slice %19 {axis = 0 : i64, start = 0 : i64, stop = 1024 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %22 = kina.matmul %21, %20 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %22 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %23 = "kina.kernel"(%18, %13) <{kind = "map", impl = "loops", sym = "k4_map_c0"}> ({
    ^bb0(%24: tensor<1024x5632xbf16>, %25: tensor<1024x5632xbf16>):
      %26 = kina.silu %25 : tensor<1024x5632xbf16>
      %27 = kina.mul %26, %24 : tensor<1024x5632xbf16>, tensor<1024x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %27 : tensor<1024x5632xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<1024x5632xbf16>) -> tensor<1024x5632xbf16>
    %28 = "kina.kernel"(%23, %wd) <{kind = "matmul", impl = "blas", sym = "k5_matmul_c0"}> ({
    ^bb0(%29: tensor<1024x5632xbf16>, %30: tensor<5632x2048xbf16>):
      %31 = kina.matmul %29, %30 {impl = "blas"} : tensor<1024x5632xbf16>, tensor<5632x2048xbf16> -> tensor<1024x2048xbf16>
      kina.yield %31 : tensor<1024x2048xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<5632x2048xbf16>) -> tensor<1024x2048xbf16>
    %32 = "kina.kernel"(%4, %wg) <{kind = "matmul", impl = "blas", sym = "k2_matmul_c1"}> ({
    ^bb0(%33: tensor<4096x2048xbf16>, %34: tensor<2048x5632xbf16>):
      %35 = kina.slice %33 {axis = 0 : i64, start = 1024 : i64, stop = 2048 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %36 = kina.matmul %35, %34 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %36 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %37 = "kina.kernel"(%4, %wu) <{kind = "matmul", impl = "blas", sym = "k3_matmul_c1"}> ({
    ^bb0(%38: tensor<4096x2048xbf16>, %39: tensor<2048x5632xbf16>):
      %40 = kina.slice %38 {axis = 0 : i64, start = 1024 : i64, stop = 2048 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %41 = kina.matmul %40, %39 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %41 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %42 = "kina.kernel"(%37, %32) <{kind = "map", impl = "loops", sym = "k4_map_c1"}> ({
    ^bb0(%43: tensor<1024x5632xbf16>, %44: tensor<1024x5632xbf16>):
      %45 = kina.silu %44 : tensor<1024x5632xbf16>
      %46 = kina.mul %45, %43 : tensor<1024x5632xbf16>, tensor<1024x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %46 : tensor<1024x5632xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<1024x5632xbf16>) -> tensor<1024x5632xbf16>
    %47 = "kina.kernel"(%42, %wd) <{kind = "matmul", impl = "blas", sym = "k5_matmul_c1"}> ({
    ^bb0(%48: tensor<1024x5632xbf16>, %49: tensor<5632x2048xbf16>):
      %50 = kina.matmul %48, %49 {impl = "blas"} : tensor<1024x5632xbf16>, tensor<5632x2048xbf16> -> tensor<1024x2048xbf16>
      kina.yield %50 : tensor<1024x2048xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<5632x2048xbf16>) -> tensor<1024x2048xbf16>
    %51 = "kina.kernel"(%4, %wg) <{kind = "matmul", impl = "blas", sym = "k2_matmul_c2"}> ({
    ^bb0(%52: tensor<4096x2048xbf16>, %53: tensor<2048x5632xbf16>):
      %54 = kina.slice %52 {axis = 0 : i64, start = 2048 : i64, stop = 3072 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %55 = kina.matmul %54, %53 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %55 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %56 = "kina.kernel"(%4, %wu) <{kind = "matmul", impl = "blas", sym = "k3_matmul_c2"}> ({
    ^bb0(%57: tensor<4096x2048xbf16>, %58: tensor<2048x5632xbf16>):
      %59 = kina.slice %57 {axis = 0 : i64, start = 2048 : i64, stop = 3072 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %60 = kina.matmul %59, %58 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %60 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %61 = "kina.kernel"(%56, %51) <{kind = "map", impl = "loops", sym = "k4_map_c2"}> ({
    ^bb0(%62: tensor<1024x5632xbf16>, %63: tensor<1024x5632xbf16>):
      %64 = kina.silu %63 : tensor<1024x5632xbf16>
      %65 = kina.mul %64, %62 : tensor<1024x5632xbf16>, tensor<1024x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %65 : tensor<1024x5632xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<1024x5632xbf16>) -> tensor<1024x5632xbf16>
    %66 = "kina.kernel"(%61, %wd) <{kind = "matmul", impl = "blas", sym = "k5_matmul_c2"}> ({
    ^bb0(%67: tensor<1024x5632xbf16>, %68: tensor<5632x2048xbf16>):
      %69 = kina.matmul %67, %68 {impl = "blas"} : tensor<1024x5632xbf16>, tensor<5632x2048xbf16> -> tensor<1024x2048xbf16>
      kina.yield %69 : tensor<1024x2048xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<5632x2048xbf16>) -> tensor<1024x2048xbf16>
    %70 = "kina.kernel"(%4, %wg) <{kind = "matmul", impl = "blas", sym = "k2_matmul_c3"}> ({
    ^bb0(%71: tensor<4096x2048xbf16>, %72: tensor<2048x5632xbf16>):
      %73 = kina.slice %71 {axis = 0 : i64, start = 3072 : i64, stop = 4096 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %74 = kina.matmul %73, %72 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %74 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %75 = "kina.kernel"(%4, %wu) <{kind = "matmul", impl = "blas", sym = "k3_matmul_c3"}> ({
    ^bb0(%76: tensor<4096x2048xbf16>, %77: tensor<2048x5632xbf16>):
      %78 = kina.slice %76 {axis = 0 : i64, start = 3072 : i64, stop = 4096 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %79 = kina.matmul %78, %77 {impl = "blas"} : tensor<1024x2048xbf16>, tensor<2048x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %79 : tensor<1024x5632xbf16>
    }) : (tensor<4096x2048xbf16>, tensor<2048x5632xbf16>) -> tensor<1024x5632xbf16>
    %80 = "kina.kernel"(%75, %70) <{kind = "map", impl = "loops", sym = "k4_map_c3"}> ({
    ^bb0(%81: tensor<1024x5632xbf16>, %82: tensor<1024x5632xbf16>):
      %83 = kina.silu %82 : tensor<1024x5632xbf16>
      %84 = kina.mul %83, %81 : tensor<1024x5632xbf16>, tensor<1024x5632xbf16> -> tensor<1024x5632xbf16>
      kina.yield %84 : tensor<1024x5632xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<1024x5632xbf16>) -> tensor<1024x5632xbf16>
    %85 = "kina.kernel"(%80, %wd) <{kind = "matmul", impl = "blas", sym = "k5_matmul_c3"}> ({
    ^bb0(%86: tensor<1024x5632xbf16>, %87: tensor<5632x2048xbf16>):
      %88 = kina.matmul %86, %87 {impl = "blas"} : tensor<1024x5632xbf16>, tensor<5632x2048xbf16> -> tensor<1024x2048xbf16>
      kina.yield %88 : tensor<1024x2048xbf16>
    }) : (tensor<1024x5632xbf16>, tensor<5632x2048xbf16>) -> tensor<1024x2048xbf16>
    %89 = "kina.kernel"(%28, %47, %66, %85, %x) <{kind = "concat", impl = "loops", sym = "k5_matmul_chunks"}> ({
    ^bb0(%90: tensor<1024x2048xbf16>, %91: tensor<1024x2048xbf16>, %92: tensor<1024x2048xbf16>, %93: tensor<1024x2048xbf16>, %94: tensor<4096x2048xbf16>):
      %95 = kina.slice %94 {axis = 0 : i64, start = 0 : i64, stop = 1024 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %96 = kina.add %95, %90 : tensor<1024x2048xbf16>, tensor<1024x2048xbf16> -> tensor<1024x2048xbf16>
      %97 = kina.slice %94 {axis = 0 : i64, start = 1024 : i64, stop = 2048 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %98 = kina.add %97, %91 : tensor<1024x2048xbf16>, tensor<1024x2048xbf16> -> tensor<1024x2048xbf16>
      %99 = kina.slice %94 {axis = 0 : i64, start = 2048 : i64, stop = 3072 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %100 = kina.add %99, %92 : tensor<1024x2048xbf16>, tensor<1024x2048xbf16> -> tensor<1024x2048xbf16>
      %101 = kina.slice %94 {axis = 0 : i64, start = 3072 : i64, stop = 4096 : i64} : tensor<4096x2048xbf16> -> tensor<1024x2048xbf16>
      %102 = kina.add %101, %93 : tensor<1024x2048xbf16>, tensor<1024x2048xbf16> -> tensor<1024x2048xbf16>
      %103 = kina.concat %96, %98, %100, %102 {axis = 0 : i64} : tensor<1024x2048xbf16>, tensor<1024x2048xbf16>, tensor<1024x2048xbf16>, tensor<1024x2048xbf16> -> tensor<4096x2048xbf16>
      kina.yield %103 : tensor<4096x2048xbf16>
    }) : (tensor<1024x2048xbf16>, tensor<1024x2048xbf16>, tensor<1024x2048xbf16>, tensor<1024x2048xbf16>, tensor<4096x2048xbf16>) -> tensor<4096x2048xbf16>
    func.return %89 : tensor<4096x2048xbf16>
  }
}
