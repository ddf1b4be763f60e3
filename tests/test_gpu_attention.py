"""The fused attention kernel on the GPU against a float64 reference (``pytest -m gpu``).

Random inputs (fresh per case), outputs poisoned with NaN first (every element must be
written): bf16 and f16, head dims 64 and 128, causal and not, grouped-query (4 query heads per
K/V head) and not, odd sequence lengths (tails of every tile). Bound: relative L2 error 1e-2.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from kinac.ir.gpu.attention_params import AttnTiles, bhsd_params  # noqa: E402
from kinac.rt import cuda  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not (cuda.available() and torch.cuda.is_available()), reason="no CUDA GPU with PyTorch"
    ),
]

ROOT = Path(__file__).resolve().parent.parent


def bench() -> Any:
    spec = importlib.util.spec_from_file_location("attention_bench", ROOT / "benches/attention.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = [
    ("bf16", 128, 2, 16, 4, 1024, True, AttnTiles(64, 64)),
    ("bf16", 128, 1, 16, 4, 1000, True, AttnTiles(128, 64)),
    ("f16", 128, 2, 8, 2, 777, True, AttnTiles(64, 64)),
    ("bf16", 64, 3, 4, 4, 333, False, AttnTiles(128, 64)),
    ("f16", 64, 1, 8, 1, 129, True, AttnTiles(64, 128)),
    ("bf16", 128, 1, 2, 1, 17, True, AttnTiles(64, 32)),
    ("bf16", 64, 1, 2, 2, 1, False, AttnTiles(64, 64)),
]


@pytest.mark.parametrize("dtype,d,b,h,kv,s,causal,tiles", CASES, ids=lambda x: str(x))
def test_fused_attention_matches_float64(
    dtype: str, d: int, b: int, h: int, kv: int, s: int, causal: bool, tiles: AttnTiles
) -> None:
    m = bench()
    tdt = {"bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    q = torch.randn(b, h, s, d, device="cuda", dtype=tdt)
    k = torch.randn(b, kv, s, d, device="cuda", dtype=tdt)
    v = torch.randn(b, kv, s, d, device="cuda", dtype=tdt)
    run = m.KernelRun(bhsd_params(dtype, b, h, kv, s, d, causal, tiles))
    o = torch.full_like(q, float("nan"))
    run(q, k, v, o)
    torch.cuda.synchronize()
    assert bool(torch.isfinite(o).all()), "an output element was not written"
    heads = list(range(h))
    ref = m.reference(q, k, v, heads, causal)
    err = m.rel_err(o[0], ref)
    assert err < 1e-2, err


def test_gqa_from_kina_source_odd_length(tmp_path: Path) -> None:
    """``kinac.compile`` on Kina source (as a user calls it): one fused kernel, S = 777."""
    import kinac

    m = bench()
    src = tmp_path / "gqa.kina"
    src.write_text(m.KINA_SOURCE)
    f = kinac.compile(src, "gqa", target="cuda")
    b, h, kv, s, d = 2, 8, 2, 777, 128
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16)
    out = torch.from_dlpack(f(q, k, v))
    ent = next(iter(f._entries.values()))
    assert [st.kind for st in ent.lowered.steps] == ["attention"]
    err = m.rel_err(out[0], m.reference(q, k, v, list(range(h))))
    assert err < 1e-2, err


def test_block_from_kina_source_bf16_head_dim_128() -> None:
    """The transformer workspace's block in bf16 with the fused kernel (Dh 128, S odd)."""
    import sys

    import kinac

    sys.path.insert(0, str(ROOT / "tests"))
    from gpu_refs import block_inputs, block_torch, causal_mask, rel_l2

    dims = {"b": 2, "s": 333, "d": 512, "h": 4, "kv": 2, "f": 704}
    fn = kinac.compile(ROOT / "workspaces/transformer", "block", target="cuda")
    ins = block_inputs(dims, torch.bfloat16)
    out = torch.from_dlpack(fn(dims["h"], dims["kv"], *ins))
    ent = next(iter(fn._entries.values()))
    assert "attention" in [st.kind for st in ent.lowered.steps]
    ref = block_torch(*(t.double() for t in ins), dims["h"], dims["kv"],  # type: ignore[call-arg]
                      causal_mask(dims["s"], torch.float64, "cuda"))  # fmt: skip
    assert rel_l2(out, ref) < 1e-2


MASKED_SOURCE = """\
(module masked)
(defn masked [(q : (tensor T [B H S Dh])) (k : (tensor T [B KV S Dh]))
              (v : (tensor T [B KV S Dh])) (m : (tensor T [S S]))] -> (tensor T [B H S Dh])
  (where (= H (* KV G)))
  (let [(kr (repeat-interleave k :repeats G :axis 1))
        (vr (repeat-interleave v :repeats G :axis 1))
        (s (add (mul (matmul q (transpose kr :perm [0 1 3 2])) (rsqrt Dh)) m))]
    (matmul (softmax s :axis -1) vr)))
"""


def _rows_masked(s: int, dtype: Any) -> Any:
    """A random [S, S] additive mask, -inf in places, over all of rows 1 and S - 2 (fully
    masked: NaN out), over row S - 1's keys but its last (a whole first key tile) and over
    column 0."""
    mask = torch.randn(s, s, device="cuda").masked_fill(
        torch.rand(s, s, device="cuda") < 0.3, float("-inf")
    )
    mask[:, 0] = float("-inf")
    mask[:, 2] = 0.0
    mask[[1, s - 2], :] = float("-inf")
    mask[s - 1, :-1] = float("-inf")
    mask[s - 1, -1] = 0.0
    return mask.to(dtype)


def _same_nans_and_close(out: Any, ref: Any) -> None:
    """NaN exactly on the reference's fully masked rows (softmax's 0/0), the rest close."""
    nan = torch.isnan(ref)
    assert bool(nan.any()) and bool((torch.isnan(out) == nan).all()), torch.nonzero(
        torch.isnan(out) != nan
    )[:8].tolist()
    err = float((out.double()[~nan] - ref[~nan]).norm() / ref[~nan].norm())
    assert err < 1e-2, err


def test_user_mask_from_kina_source(tmp_path: Path) -> None:
    """The user's own additive [S, S] mask (with -inf entries, rows of it entirely) in the
    fused kernel (bf16), and in the unfused path (f32: a softmax kernel, then cuBLAS): both
    NaN on the fully masked rows, as torch's softmax-then-matmul."""
    import kinac

    src = tmp_path / "masked.kina"
    src.write_text(MASKED_SOURCE)
    f = kinac.compile(src, "masked", target="cuda")
    b, h, kv, s, d = 1, 8, 2, 301, 128
    for dt, fused in ((torch.bfloat16, True), (torch.float32, False)):
        q = torch.randn(b, h, s, d, device="cuda", dtype=dt)
        k = torch.randn(b, kv, s, d, device="cuda", dtype=dt)
        v = torch.randn(b, kv, s, d, device="cuda", dtype=dt)
        mask = _rows_masked(s, dt)
        out = torch.from_dlpack(f(q, k, v, mask))
        kinds = [st.kind for st in list(f._entries.values())[-1].lowered.steps]  # this dtype's
        assert ("attention" in kinds) == fused and ("softmax" in kinds) != fused, kinds
        kr, vr = (x.double().repeat_interleave(h // kv, 1) for x in (k, v))
        sc = q.double() @ kr.transpose(-1, -2) * d**-0.5 + mask.double()
        _same_nans_and_close(out, torch.softmax(sc, -1) @ vr)


def test_fully_masked_rows_in_every_autotune_candidate() -> None:
    """Every kernel the autotuner may pick on Hopper at head dim 128 (sync, wgmma, pipelined,
    mbarrier ring, ping-pong, producer warpgroup, overlapped, lazy, longest-first: 37),
    causal, with a user's f32 mask that masks whole rows: NaN there, the rest against
    float64 (one small shape: 300 rows, partial tiles)."""
    from dataclasses import replace

    from kinac.ir.gpu.attention_tune import candidates, label

    m = bench()
    b, h, kv, s, d = 1, 2, 1, 300, 128
    p = replace(bhsd_params("bf16", b, h, kv, s, d, True), mask_arg=3, n_inputs=4,
                mask_dtype="f32", mask_strides=(0, 0, s, 1))  # fmt: skip
    cands = candidates(p, m.ARCH)
    assert len(cands) >= 10 and all(c.mask_arg == 3 for c in cands)
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(b, kv, s, d, device="cuda", dtype=torch.bfloat16)
    mask = _rows_masked(s, torch.float32)
    kr, vr = (x.double().repeat_interleave(h // kv, 1) for x in (k, v))
    sc = q.double() @ kr.transpose(-1, -2) * d**-0.5 + mask.double()
    sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    ref = torch.softmax(sc, -1) @ vr
    bad = []
    for c in cands:
        o = torch.full_like(q, float("nan"))
        m.KernelRun(c)(q, k, v, o, mask)
        torch.cuda.synchronize()
        try:
            _same_nans_and_close(o, ref)
        except AssertionError as e:
            bad.append(f"{label(c)}: {e}")
    assert not bad, bad
