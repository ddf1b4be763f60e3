builtin.module {
  func.func @sin_f64(%x: memref<8xf64>, %0: memref<8xf64>, %1: memref<64xi8>, %2: memref<8xi64>) attributes {kinac.entry, kinac.arena_bytes = 64 : i64} {
    func.call @k0_map(%0, %x) {kind = "map", impl = "loops"} : (memref<8xf64>, memref<8xf64>) -> ()
    func.return
  }
  func.func private @k0_map(%0: memref<8xf64> {llvm.noalias}, %1: memref<8xf64> {llvm.noalias}) {
    %2 = arith.constant 0 : index
    %3 = arith.constant 8 : index
    %4 = arith.constant 1 : index
    scf.for %5 = %2 to %3 step %4 {
      %6 = memref.load %1[%5] : memref<8xf64>
      %7 = func.call @sin(%6) {kinac.libm = "sin"} : (f64) -> f64
      memref.store %7, %0[%5] : memref<8xf64>
    }
    func.return
  }
  func.func private @sin(f64) -> f64 attributes {kinac.libm = "sin"}
}
