"""Every autotune candidate of an attention through LLVM and ptxas, once per test session.

Why: the candidates (37 at head dim 128) took ~26 s of LLVM codegen and ~22 s of ptxas in one
module, one after the other, the attention tests' largest cost on a 2-core CI machine. Here
they go in chunks: LLVM compiles chunk i + 1 (one thread at a time, ``compile_ptx``'s lock)
while ptxas assembles chunk i in its own process, so the two overlap on two cores; every
candidate is still assembled and reported. Results are cached by the parameters, so tests in
several files that check the same candidates share one compilation.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

from kinac.codegen.ptx import compile_ptx, ptx_resources
from kinac.ir.gpu.attention_kernel import attention_llvm_ir, kernel_name
from kinac.ir.gpu.attention_params import AttnParams

CHUNK = 5  # candidates per LLVM module / ptxas run


def _chunk(cands: tuple[AttnParams, ...], arch: str) -> tuple[str, dict[str, dict[str, int]]]:
    ptx = compile_ptx(attention_llvm_ir(cands), arch)
    return ptx, ptx_resources(ptx, arch)


@functools.cache
def assembled(
    cands: tuple[AttnParams, ...], arch: str = "sm_90a"
) -> tuple[tuple[str, ...], dict[str, dict[str, int]]]:
    """(each chunk's PTX, ptxas's resources per kernel name: empty without ptxas)."""
    chunks = [cands[i : i + CHUNK] for i in range(0, len(cands), CHUNK)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda c: _chunk(c, arch), chunks))
    res: dict[str, dict[str, int]] = {}
    for _, r in done:
        res.update(r)
    return tuple(ptx for ptx, _ in done), res


def entries(ptxs: tuple[str, ...], cands: tuple[AttnParams, ...]) -> bool:
    """Each candidate's kernel is an entry of exactly one chunk, and nothing else is."""
    return sum(p.count(".entry ") for p in ptxs) == len(cands) and all(
        sum(f".entry {kernel_name(c)}(" in p for p in ptxs) == 1 for c in cands
    )
