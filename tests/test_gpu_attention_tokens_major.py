"""On the GPU (issue 14): the transformer block whose attention kernel writes tokens-major
(no transpose map after it) against PyTorch in float64, Dh 64 and 128, S not a multiple of
the tiles, on whichever mma path the device takes (wgmma on an H200)."""

from __future__ import annotations

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


@pytest.mark.parametrize("d,h,kv", [(256, 4, 2), (512, 4, 2)])
def test_block_tokens_major_attention_matches_torch(d: int, h: int, kv: int) -> None:
    import kinac

    sys.path.insert(0, str(ROOT / "tests"))
    from gpu_refs import block_inputs, block_torch, causal_mask, rel_l2

    dims = {"b": 2, "s": 200, "d": d, "h": h, "kv": kv, "f": 704}
    fn = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    ins = block_inputs(dims, torch.bfloat16)
    out = torch.from_dlpack(fn(dims["h"], dims["kv"], *ins))
    ent = next(iter(fn._entries.values()))
    steps = ent.lowered.steps
    i = [s.kind for s in steps].index("attention")
    assert steps[i].shape == (2, 200, d) and steps[i + 1].kind == "matmul"  # no map between
    ref = block_torch(*(t.double() for t in ins), dims["h"], dims["kv"],
                      causal_mask(dims["s"], torch.float64, "cuda"))  # fmt: skip
    assert rel_l2(out, ref) < 1e-2
