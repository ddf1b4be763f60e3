"""One digest of the LLVM IR of every fused-attention autotune candidate (no GPU needed).

A refactor of the attention kernel's generator that must not change what it emits (or, when
it does, a reason to bump ``attention_tune.GENERATOR_VERSION``) is checked by running this
before and after: the same digest means byte-identical IR for every candidate of every
parameter set below (both dtypes, head dims 64 and 128, causal or not, short and long
sequences, with a user mask, tokens-major output; Hopper and sm_80 candidates, plus the
default choice). ``--out DIR`` also writes each kernel's IR, for ``diff -r`` when they differ.
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import replace
from pathlib import Path

from kinac.ir.gpu.attention_kernel import attention_llvm_ir, kernel_name
from kinac.ir.gpu.attention_params import AttnParams, bhsd_params
from kinac.ir.gpu.attention_tune import apply, candidates, default_choice


def bases() -> list[AttnParams]:
    """The parameter sets whose candidates are generated."""
    out = []
    for dt in ("bf16", "f16"):
        for d in (64, 128):
            for causal in (True, False):
                for s in (1000, 4096):
                    p = bhsd_params(dt, 2, 8, 2, s, d, causal)
                    mask = (0, 0, s, 1)
                    tokens = (p.sq * p.heads * d, d, p.heads * d)
                    out.append(p)
                    out.append(replace(p, mask_arg=3, n_inputs=4, mask_dtype="f32",
                                       mask_strides=mask))  # fmt: skip
                    out.append(replace(p, o_strides=tokens))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write each kernel's IR here")
    args = ap.parse_args()
    h = hashlib.sha256()
    n = 0
    for i, p in enumerate(bases()):
        for arch in ("sm_90a", "sm_80"):
            for c in (*candidates(p, arch), apply(p, default_choice(p, arch))):
                ir = attention_llvm_ir((c,))
                name = f"{i:03d}_{arch}_{kernel_name(c)}.ll"
                h.update(name.encode())
                h.update(ir.encode())
                n += 1
                if args.out is not None:
                    args.out.mkdir(parents=True, exist_ok=True)
                    (args.out / name).write_text(ir)
    print(f"{n} kernels, sha256 {h.hexdigest()}")


if __name__ == "__main__":
    main()
