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
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor

from kinac.codegen.ptx import compile_ptx, parse_ptxas_report, ptxas_path
from kinac.ir.gpu.attention_kernel import attention_llvm_ir, kernel_name
from kinac.ir.gpu.attention_params import AttnParams, bhsd_params
from kinac.ir.gpu.attention_tune import candidates, label

CHUNK = 5  # candidates per LLVM module / ptxas run
_INFO = re.compile(r"\((C\d{4})\)[^\n]*function '([^']+)'")


def _chunk(cands: tuple[AttnParams, ...], arch: str) -> tuple[str, dict[str, dict[str, int]]]:
    """One chunk's PTX and, from one ``ptxas -v`` run, each kernel's resources (as
    ``ptx_resources`` reads them) and the count of each numbered note (C7519, C7513) it got."""
    ptx = compile_ptx(attention_llvm_ir(cands), arch)
    exe = ptxas_path()
    if exe is None:
        return ptx, {}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "k.ptx")
        with open(src, "w") as fh:
            fh.write(ptx)
        r = subprocess.run([exe, f"-arch={arch}", "-v", src, "-o", os.path.join(tmp, "k")],
                           capture_output=True, text=True, check=True)  # fmt: skip
    res = parse_ptxas_report(r.stdout + r.stderr)
    for code, fn in _INFO.findall(r.stderr):
        res[fn][code] = res[fn].get(code, 0) + 1
    return ptx, res


@functools.cache
def assembled(
    cands: tuple[AttnParams, ...], arch: str = "sm_90a"
) -> tuple[tuple[str, ...], dict[str, dict[str, int]]]:
    """(each chunk's PTX, ptxas's resources per kernel name, with the count of each numbered
    note it gave the function, e.g. ``"C7519"``: empty without ptxas)."""
    chunks = [cands[i : i + CHUNK] for i in range(0, len(cands), CHUNK)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(lambda c: _chunk(c, arch), chunks))
    res: dict[str, dict[str, int]] = {}
    for _, r in done:
        res.update(r)
    return tuple(ptx for ptx, _ in done), res


def kernel_ptx(ptxs: tuple[str, ...], p: AttnParams) -> str:
    """The PTX text of ``p``'s kernel (its ``.entry`` to the next one)."""
    head = f".entry {kernel_name(p)}("
    (ptx,) = [x for x in ptxs if head in x]
    body = ptx[ptx.index(head) :]
    nxt = body.find(".entry ", len(head))
    return body if nxt < 0 else body[:nxt]


def entries(ptxs: tuple[str, ...], cands: tuple[AttnParams, ...]) -> bool:
    """Each candidate's kernel is an entry of exactly one chunk, and nothing else is."""
    return sum(p.count(".entry ") for p in ptxs) == len(cands) and all(
        sum(f".entry {kernel_name(c)}(" in p for p in ptxs) == 1 for c in cands
    )


def hopper_candidates(d: int) -> tuple[AttnParams, ...]:
    """The Hopper autotune candidates of the tests' shape (bf16, B 2, H 8, KV 2, S 1000,
    causal, head dim ``d``): compiled once through :func:`assembled`."""
    return candidates(bhsd_params("bf16", 2, 8, 2, 1000, d), "sm_90a")


def by_label(cands: tuple[AttnParams, ...], text: str) -> AttnParams:
    """The candidate labelled ``text`` (``attention_tune.label``)."""
    (c,) = [c for c in cands if label(c) == text]
    return c
