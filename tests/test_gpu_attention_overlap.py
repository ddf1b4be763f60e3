"""The overlapped (``wgmma_ovl``) and warp-specialised (``ws``, ``setmaxnreg``) attention
variants on the GPU against float64 (``pytest -m gpu``), each case in a child process with a
time limit: a variant that hangs on the device (a barrier or register hand-off that never
completes) fails its case instead of hanging the suite.

Random inputs, outputs poisoned with NaN (every element must be written), bf16 and f16, head
dims 64 and 128, causal and not, grouped-query, lengths that leave partial tiles, one-tile
blocks. Bound: relative L2 error 1e-2 (FlashAttention's own error is ~2e-3 bf16 here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kinac.rt import cuda  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (cuda.available() and torch.cuda.is_available()), reason="no CUDA GPU with PyTorch"
    ),
]

ROOT = Path(__file__).resolve().parent.parent
# (dtype, head dim, batch, heads, kv heads, sq, sk, causal, block_n, mma, switches)
CASES = [
    ("bf16", 128, 2, 16, 4, 1000, 1000, True, 128, "wgmma_ovl", "mbar"),
    ("f16", 128, 1, 8, 2, 777, 777, True, 128, "wgmma_ovl", "mbar pingpong lpt"),
    ("bf16", 128, 1, 4, 4, 300, 555, False, 128, "wgmma_ovl", "mbar pingpong"),
    ("bf16", 64, 1, 4, 1, 129, 129, True, 64, "wgmma_ovl", "mbar"),
    ("bf16", 128, 1, 8, 2, 60, 60, True, 128, "wgmma_ovl", "mbar pingpong"),
    ("bf16", 128, 2, 16, 4, 1000, 1000, True, 128, "wgmma_ovl", "mbar ws pingpong"),
    ("f16", 128, 1, 8, 2, 777, 777, True, 128, "wgmma_ovl", "mbar ws"),
    ("bf16", 128, 1, 8, 2, 1000, 1000, True, 128, "wgmma", "mbar pack ws pingpong"),
    ("f16", 128, 1, 4, 4, 300, 555, False, 128, "wgmma", "mbar pack ws"),
    ("bf16", 128, 1, 8, 2, 333, 333, True, 64, "wgmma", "mbar ws"),
    # the lazy softmax (attention_lean.py); 1024 keys: every tile whole (straight-line loads)
    ("bf16", 128, 2, 16, 4, 1024, 1024, True, 128, "wgmma_ovl", "mbar ws pingpong lazy lpt"),
    ("f16", 128, 1, 8, 2, 777, 777, True, 128, "wgmma_ovl", "mbar ws pingpong lazy"),
    ("bf16", 128, 1, 4, 4, 300, 555, False, 128, "wgmma_ovl", "mbar ws lazy"),
    ("f16", 128, 2, 16, 4, 1024, 1024, True, 128, "wgmma_ovl", "mbar pingpong lazy lpt"),
    ("bf16", 64, 1, 4, 1, 256, 256, True, 128, "wgmma_ovl", "mbar lazy"),
    ("bf16", 128, 1, 8, 2, 60, 60, True, 128, "wgmma_ovl", "mbar ws pingpong lazy"),
    ("f16", 128, 1, 8, 2, 512, 512, True, 128, "wgmma", "mbar pack ws pingpong"),
]

CHILD = r"""
import importlib.util, json, sys
from dataclasses import replace
import torch
from kinac.ir.gpu.attention_params import AttnTiles, bhsd_params, check_params
spec = importlib.util.spec_from_file_location("attention_bench", sys.argv[1])
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
for i, (dt, d, b, h, kv, sq, sk, causal, bn, mma, sw) in enumerate(json.loads(sys.argv[2])):
    fl = set(sw.split())
    p = replace(bhsd_params(dt, b, h, kv, sq, d, causal, AttnTiles(128, bn), sk=sk), mma=mma,
                stages=3, mbar="mbar" in fl, ws="ws" in fl, pingpong="pingpong" in fl,
                pack_p="pack" in fl, lpt="lpt" in fl, lazy="lazy" in fl)
    assert check_params(p) is None, check_params(p)
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dt]
    q = torch.randn(b, h, sq, d, device="cuda", dtype=tdt)
    k = torch.randn(b, kv, sk, d, device="cuda", dtype=tdt)
    v = torch.randn(b, kv, sk, d, device="cuda", dtype=tdt)
    o = torch.full_like(q, float("nan"))
    m.KernelRun(p)(q, k, v, o)
    torch.cuda.synchronize()
    g = h // kv
    errs = []
    for bi in range(b):
        kk = k[bi].double().repeat_interleave(g, 0)
        vv = v[bi].double().repeat_interleave(g, 0)
        s = q[bi].double() @ kk.transpose(-1, -2) * d**-0.5
        if causal:
            s = s.masked_fill(torch.ones(sq, sk, device="cuda").triu(1).bool(), float("-inf"))
        ref = torch.softmax(s, -1) @ vv
        errs.append(float((o[bi].double() - ref).norm() / ref.norm()))
    print(json.dumps([i, bool(torch.isfinite(o).all()), max(errs)]), flush=True)
"""


def test_variants_match_float64_within_a_time_limit() -> None:
    """Every case, one child process (one CUDA context, 240 s); a case that hangs or faults
    fails with the ones after it (named)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *sys.path]))
    args = [sys.executable, "-c", CHILD, str(ROOT / "benches/attention.py"), json.dumps(CASES)]
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=240, env=env)
        out, err = r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = "timed out after 240 s (a hang on the device)"
    done = {}
    for line in out.splitlines():
        if line.startswith("["):
            i, finite, rel = json.loads(line)
            done[i] = (finite, rel)
    bad = [(CASES[i], done.get(i)) for i in range(len(CASES))
           if i not in done or not done[i][0] or not done[i][1] < 1e-2]  # fmt: skip
    assert not bad, f"{bad}\n{err[-3000:]}"
